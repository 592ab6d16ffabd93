"""The `/v1` routes (and `/llms.txt`, `/review.md`, `/dedupe.md`) as a table of module-level handlers.

Each handler is `async def name(request) -> Response`: it parses the request, calls one `Mesh`
method and renders its result, holding no domain logic and no SQL. What a handler reaches (the
service, who acts, the write limit, the read-only flag) is the app's `ApiState` (`api.state`), set
once by `api.app.build_app` as `app.state.api` (its service opened by the app's lifespan). What the
handlers share to read a request and answer is `api.http_io`; how the table is built, `api.table`.

Under `/v1/nodes/` a node id is `{ecosystem}/{slug}` and holds a slash: a route with a suffix takes
exactly those two segments (`{node:node}`), so `/v1/nodes/python/article` is that node; the node's
own read takes the rest of the path (`{node:path}`), so a malformed id is its 400 `invalid_id`.
Each answers every method (a method it does not serve: 405 with its own Allow).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from knowmesh_mcp.api.auth import bearer
from knowmesh_mcp.api.http_io import (
    MARKDOWN,
    SEARCH_BODY_BYTES,
    TRUST_HEADER,
    agent_field,
    answer,
    edit_body,
    int_param,
    markdown_answer,
    node_of,
    parsed_object,
    read_json,
    read_response,
    search_body,
    wire_body,
)
from knowmesh_mcp.api.openapi import openapi_document
from knowmesh_mcp.api.state import api, mesh
from knowmesh_mcp.api.table import ByMethod as ByMethod  # the tests and the OpenAPI check read it here
from knowmesh_mcp.api.table import node_route, route
from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter
from knowmesh_mcp.services.dedupe import dedupe_markdown
from knowmesh_mcp.services.mesh import llms_txt
from knowmesh_mcp.services.publishing import require_node_id
from knowmesh_mcp.services.review import review_markdown
from knowmesh_mcp.wire import requests as wire

# -- nodes -----------------------------------------------------------------------------------------


async def create_node(request: Request) -> Response:
    state = api(request)
    state.writable()
    body = await read_json(request)
    actor = state.actor(request, body.pop("agent", None) if isinstance(body, dict) else None)
    created = await state.submission(
        request, actor, lambda counted: state.current().creation.create_node(body, actor=actor, submission=counted)
    )
    return answer(created, 201)


async def list_nodes(request: Request) -> Response:
    params = request.query_params
    return answer(
        await mesh(request).nodes.list_nodes(
            ecosystem=params.get("ecosystem"),
            fields=params.get("fields"),
            limit=int_param(request, "limit"),
            cursor=params.get("cursor"),
        )
    )


def read_wanted(request: Request) -> Any:
    """A read's query: ?env=, ?solution=, ?fields=, ?include= (checked before the path's id)."""
    params = request.query_params
    return mesh(request).nodes.read_request(
        env=params.get("env"),
        solution=params.get("solution"),
        fields=params.get("fields"),
        include=params.get("include"),
    )


async def node_read(request: Request, *, markdown: bool) -> Response:
    """/v1/nodes/{ecosystem}/{slug}[.md]."""
    wanted = read_wanted(request)
    result = await mesh(request).nodes.read_node(require_node_id(node_of(request)), wanted)
    return read_response(request, result, markdown=markdown)


async def read_node(request: Request) -> Response:
    return await node_read(request, markdown=False)


async def read_node_markdown(request: Request) -> Response:
    return await node_read(request, markdown=True)


async def version_read(request: Request, *, markdown: bool) -> Response:
    """/v1/nodes/{ecosystem}/{slug}/versions/{version}[.md]: the node as it was at a content hash."""
    wanted, params = read_wanted(request), request.path_params
    node_id = require_node_id(f"{params['ecosystem']}/{params['slug']}")
    result = await mesh(request).nodes.read_version(node_id, params["version"], wanted)
    return read_response(request, result, markdown=markdown)


async def read_version(request: Request) -> Response:
    return await version_read(request, markdown=False)


async def read_version_markdown(request: Request) -> Response:
    return await version_read(request, markdown=True)


async def read_article(request: Request) -> Response:
    result = await mesh(request).articles.read_article(
        require_node_id(node_of(request)), include=request.query_params.get("include")
    )
    return read_response(request, result, markdown=False)


async def article_history(request: Request) -> Response:
    node_id = require_node_id(node_of(request))
    return answer(
        await mesh(request).articles.article_history(node_id, **wire.query(wire.HistoryQuery, request.query_params))
    )


async def patch_article(request: Request) -> Response:
    edit = await edit_body(request, wire.ArticlePatch, codes={"ops": "invalid_op"})
    payload = edit.payload
    result = await mesh(request).articles.patch_article(
        edit.node_id,
        base_revision=payload.get("base_revision"),
        ops=payload.get("ops"),
        agent=payload.get("agent"),
        summary=payload.get("summary"),
        actor=api(request).actor(request, payload.get("agent")),
    )
    return answer(result)


async def revise_article(request: Request) -> Response:
    edit = await edit_body(request, wire.ArticleRevision, codes={"article": "invalid_node"})
    payload = edit.payload
    result = await mesh(request).articles.revise_article(
        edit.node_id,
        base_revision=payload.get("base_revision"),
        article=payload.get("article"),
        agent=payload.get("agent"),
        summary=payload.get("summary"),
        actor=api(request).actor(request, payload.get("agent")),
    )
    return answer(result)


async def solutions_gone(request: Request) -> Response:
    raise KnowmeshError(
        410,
        "gone",
        "answers are no longer posted separately: add one with PATCH "
        f"{node_of(request)}/article (op set, path /content/solutions/-)",
    )


async def list_failures(request: Request) -> Response:
    return answer(await mesh(request).failures.list_failures(require_node_id(node_of(request))))


async def report_failed_attempt(request: Request) -> Response:
    state, node_id = api(request), require_node_id(node_of(request))
    state.writable()
    body = await wire_body(request, wire.FailedAttempt, code="invalid_failure", shape="failures")
    payload = body.payload
    if isinstance(payload, dict) and "env" in payload:  # the service's name, either form of the value
        payload = {**payload, "environment": wire.env_object(payload.pop("env"))}
    actor = state.actor(request, agent_field(payload))
    accepted = await state.submission(
        request,
        actor,
        lambda counted: state.current().failures.report_failed_attempt(
            node_id, payload, submission=counted, actor=actor
        ),
    )
    return answer({**accepted, **wire.deprecation(body.notes)}, 202)


async def set_status(request: Request) -> Response:
    """Maintainers: POST {status: verified|draft|deprecated, note}."""
    edit = await edit_body(request, wire.StatusChange)
    payload = edit.payload
    actor = api(request).actor(request, agent_field(payload))
    return answer(
        await mesh(request).maintenance.set_status(
            edit.node_id, payload.get("status"), note=payload.get("note"), actor=actor
        )
    )


async def list_feedback(request: Request) -> Response:
    params = request.query_params
    return answer(
        await mesh(request).outcomes.list_feedback(
            node_of(request), after=params.get("after"), limit=params.get("limit")
        )
    )


async def undo(request: Request) -> Response:
    """The undo token is the bearer (the spec's form), or `undo_token` in the body when the
    bearer is the agent's own token (a mesh with auth on)."""
    payload = await parsed_object(request, wire.Undo)
    actor = api(request).actor(request, payload.get("agent"))
    undo_token = payload.get("undo_token") or (None if actor.proof == "token" else bearer(request))
    result = await mesh(request).articles.undo_edit(
        request.path_params["revision_id"],
        undo_token=undo_token,
        agent=payload.get("agent"),
        summary=payload.get("summary"),
        actor=actor,
    )
    return answer(result)


# -- outcomes, review, dedupe, issues --------------------------------------------------------------


async def feedback(request: Request) -> Response:
    state = api(request)
    state.writable()
    body = await wire_body(
        request, wire.Feedback, code="invalid_feedback", codes={"outcome": "invalid_outcome"}, shape="feedback"
    )
    payload = body.payload
    if isinstance(payload, dict):  # the service's names: node, and env as an object
        payload = {
            **payload,
            **({"node": payload.pop("id")} if "id" in payload else {}),
            **({"env": wire.env_object(payload["env"])} if isinstance(payload.get("env"), str) else {}),
        }
    actor = state.actor(request, agent_field(payload))
    accepted = await state.submission(
        request,
        actor,
        lambda counted: state.current().outcomes.report_outcome(payload, submission=counted, actor=actor),
    )
    return answer({**accepted, **wire.deprecation(body.notes)}, 202)


async def review_page_of(request: Request) -> dict[str, Any]:
    """One page of the review queue: ?limit=, ?offset= (next_offset of the previous page), ?reason=."""
    return await mesh(request).review.review_queue(**wire.query(wire.ReviewQuery, request.query_params))


async def review(request: Request) -> Response:
    return answer(await review_page_of(request))


async def review_md(request: Request) -> Response:
    return markdown_answer(review_markdown(await review_page_of(request)))


async def dedupe_tasks(request: Request) -> Response:
    api(request).writable()
    payload = (await wire_body(request, wire.DedupeTask, code="invalid_dedupe")).payload
    return answer(
        await mesh(request).dedupe.open_dedupe_task(payload, actor=api(request).actor(request, agent_field(payload))),
        202,
    )


async def dedupe_vote(request: Request) -> Response:
    api(request).writable()
    payload = (await wire_body(request, wire.DedupeVote, code="invalid_dedupe")).payload
    actor = api(request).actor(request, agent_field(payload))
    return answer(await mesh(request).dedupe.vote_dedupe(request.path_params["task_id"], payload, actor=actor))


async def dedupe_list(request: Request) -> Response:
    status = request.query_params.get("status") or "open"
    if status not in ("open", "flagged"):
        raise bad_parameter("status", "status must be open (for agents to vote) or flagged (for maintainers to merge)")
    limit = int_param(request, "limit") or 50
    service = mesh(request)
    return answer(
        await (
            service.maintenance.flagged_pairs(limit=limit)
            if status == "flagged"
            else service.dedupe.dedupe_queue(limit=limit)
        )
    )


async def dedupe_merge(request: Request) -> Response:
    """Maintainers: POST {canonical_id?, note} confirms a flagged pair as one node."""
    payload = await parsed_object(request, wire.MergeConfirmation)
    result = await mesh(request).maintenance.confirm_merge(
        request.path_params["task_id"],
        canonical_id=payload.get("canonical_id"),
        note=payload.get("note"),
        actor=api(request).actor(request, agent_field(payload)),
    )
    return answer(result)


async def dedupe_md(request: Request) -> Response:
    return markdown_answer(dedupe_markdown(await mesh(request).dedupe.dedupe_queue()))


async def issues_post(request: Request) -> Response:
    state = api(request)
    state.writable()
    payload = (await wire_body(request, wire.Issue, code="invalid_issue")).payload
    actor = state.actor(request, agent_field(payload))
    filed = await state.submission(
        request, actor, lambda counted: state.current().issues.file_issue(payload, submission=counted, actor=actor)
    )
    filed["url"] = str(request.base_url).rstrip("/") + filed["url"]
    return answer(filed, 202)


async def issue_status(request: Request) -> Response:
    """Maintainers: POST {status: closed|discarded, note}."""
    payload = await parsed_object(request, wire.IssueResolution)
    result = await mesh(request).maintenance.resolve_issue(
        request.path_params["number"],
        payload.get("status"),
        note=payload.get("note"),
        actor=api(request).actor(request, agent_field(payload)),
    )
    return answer(result)


async def audit(request: Request) -> Response:
    params = request.query_params
    return answer(
        await mesh(request).maintenance.audit_log(
            target=params.get("target"), after=params.get("after"), limit=params.get("limit")
        )
    )


# -- the feed, search, the service itself ----------------------------------------------------------


async def changes(request: Request) -> Response:
    return answer(
        await mesh(request).feed.changes(since=request.query_params.get("since"), limit=int_param(request, "limit"))
    )


async def changes_jsonl(request: Request) -> Response:
    page = await mesh(request).feed.changes(since=request.query_params.get("since"), limit=int_param(request, "limit"))
    lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in page["changes"])
    headers = {
        **TRUST_HEADER,
        "X-Knowmesh-Next-Cursor": page["next_cursor"],
        "X-Knowmesh-Has-More": "true" if page["has_more"] else "false",
    }
    return Response(lines, media_type="application/x-ndjson", headers=headers)


async def search(request: Request) -> Response:
    params = request.query_params
    wanted = wire.query(wire.SearchQuery, params)
    return answer(
        await mesh(request).searching.search(
            params.get("q"), env=params.get("env"), ecosystem=params.get("ecosystem"), limit=wanted.get("limit")
        )
    )


async def search_post(request: Request) -> Response:
    """POST /v1/search: the GET's fields as a JSON body, for pasted output too long for a URL."""
    body = search_body(await read_json(request, SEARCH_BODY_BYTES))
    return answer(
        await mesh(request).searching.search(
            body.get("q"), env=wire.env_text(body.get("env")), ecosystem=body.get("ecosystem"), limit=body.get("limit")
        )
    )


async def health(request: Request) -> Response:
    return JSONResponse(await mesh(request).health.check(auth=api(request).auth))


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


async def llms(request: Request) -> Response:
    return PlainTextResponse(llms_txt(), media_type=MARKDOWN)


# -- the table -------------------------------------------------------------------------------------

VERSION = "/v1/nodes/{ecosystem:segment}/{slug:segment}/versions/{version:segment}"

ROUTES: tuple[Route, ...] = (
    route("/llms.txt", GET=llms),
    route("/v1/openapi.json", GET=openapi),
    route("/v1/health", GET=health),
    route("/v1/search", GET=search, POST=search_post),
    route("/v1/issues", POST=issues_post),
    route("/v1/changes", GET=changes),
    route("/v1/changes.jsonl", GET=changes_jsonl),
    route("/v1/feedback", POST=feedback),
    route("/v1/review", GET=review),
    route("/review.md", GET=review_md),
    route("/v1/dedupe/tasks", GET=dedupe_list, POST=dedupe_tasks),
    route("/v1/dedupe/tasks/{task_id}/votes", POST=dedupe_vote),
    route("/v1/dedupe/tasks/{task_id}/merge", POST=dedupe_merge),
    route("/v1/issues/{number}/status", POST=issue_status),
    route("/v1/audit", GET=audit),
    route("/dedupe.md", GET=dedupe_md),
    route("/v1/nodes", GET=list_nodes, POST=create_node),
    # Under /v1/nodes/, in the order the paths are tried: the first whose path matches answers.
    node_route("/v1/nodes/{node:node}/article/revisions", GET=article_history, POST=revise_article),
    node_route("/v1/nodes/{node:node}/article", GET=read_article, PATCH=patch_article),
    node_route("/v1/nodes/{node:node}/solutions", POST=solutions_gone),
    node_route("/v1/nodes/{node:node}/failures", GET=list_failures, POST=report_failed_attempt),
    node_route("/v1/nodes/{node:node}/feedback", GET=list_feedback),
    node_route("/v1/nodes/{node:node}/status", POST=set_status),
    node_route(VERSION + ".md", GET=read_version_markdown),
    node_route(VERSION, GET=read_version),
    node_route("/v1/nodes/{node:path}.md", GET=read_node_markdown),
    node_route("/v1/nodes/{node:path}", GET=read_node),
    route("/v1/article-revisions/{revision_id}/undo", POST=undo),
)
"""Every `/v1` route (and `/llms.txt`, `/review.md`, `/dedupe.md`); `build_app` adds the pages and `/mcp`."""
