"""The HTTP service: `/v1` JSON and Markdown routes, `/llms.txt`, and MCP at `/mcp`, in one ASGI app.

Routes parse the request, call one `Service` method and render its result; they hold no
domain logic and no SQL. Every error, including malformed requests, is the JSON body of
`KnowmeshError` with the spec's status; nothing reaches the client as a bare 500.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from . import wire
from .errors import KnowmeshError, bad_parameter
from .outcomes import Submission, dedupe_markdown, review_markdown
from .http_auth import actor_of, auth_middleware, bearer
from .http_guard import CrossSiteGuard, is_loopback
from .identity import Actor, AuthMode
from .openapi import openapi_document
from .page_shell import error_page
from .pages import page_routes, wants_html
from .publishing import require_node_id
from .reading import ReadResult
from .service import Service, llms_txt
from .limits import MAX_DEPTH, MAX_INT, check_json, to_int

log = logging.getLogger("knowmesh.http")

MAX_BODY_BYTES = 1_048_576  # documented in README: larger bodies get 413 payload_too_large
# POST /v1/search carries up to 1 MiB of pasted output, which JSON escaping can grow.
SEARCH_BODY_BYTES = 4 * MAX_BODY_BYTES
TRUST_HEADER = {"X-Knowmesh-Content-Trust": "untrusted-data"}
EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]


def error_response(error: KnowmeshError) -> JSONResponse:
    return JSONResponse(error.to_body(), status_code=error.status, headers=TRUST_HEADER)


async def read_json(request: Request, limit: int = MAX_BODY_BYTES) -> Any:
    """The request body as JSON, refusing oversized bodies (413) and malformed JSON (400)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise KnowmeshError(413, "payload_too_large", f"request bodies are limited to {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise KnowmeshError(413, "payload_too_large", f"request bodies are limited to {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise KnowmeshError(400, "invalid_json", "the request body is empty; send a JSON object")
    try:
        payload = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise KnowmeshError(400, "invalid_json", f"the request body is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, integers past 4,300 digits
        raise KnowmeshError(400, "invalid_json", f"the request body is not valid UTF-8 JSON: {error}") from None
    return check_json(payload)


def search_body(payload: Any) -> dict[str, Any]:
    """A POST /v1/search body: the GET's fields (`wire.SearchQuery`), parsed with its model."""
    if not isinstance(payload, dict):
        raise KnowmeshError(400, "invalid_json", "the body must be a JSON object such as {\"q\": \"<the error>\"}")
    for name in payload:
        if name not in wire.SearchQuery.model_fields:
            raise bad_parameter(name, f"unknown field {name!r}; a search takes {', '.join(wire.SearchQuery.model_fields)}")
    for name, value in payload.items():  # JSON types as they are: "5" is no integer in a body
        if isinstance(value, bool) or (name == "limit" and value is not None and not isinstance(value, int)):
            raise bad_parameter(name, f"{name} must be {'an integer' if name == 'limit' else 'a string'}")
    parsed = wire.parse(wire.SearchQuery, payload)
    return {name: getattr(parsed, name) for name in payload} if parsed is not None else payload


async def wire_body(request: Request, model: type[Any], *, code: str, codes: dict[str, str] | None = None,
                    shape: str | None = None) -> tuple[Any, list[str]]:
    """A write's JSON body parsed with its `wire` model (a value past a bound: 400 `code` naming the
    field), its old field names (`shape` of `wire.DEPRECATED_NAMES`) renamed; and the notes on them."""
    payload = await read_json(request)
    notes: list[str] = []
    if shape is not None and isinstance(payload, dict):
        payload, notes = wire.renamed(shape, payload)
    wire.parse(model, payload, code=code, codes=codes)
    return payload, notes


async def json_object(request: Request) -> dict[str, Any]:
    payload = await read_json(request)
    if not isinstance(payload, dict):
        raise KnowmeshError(400, "invalid_json", "the request body must be a JSON object")
    return payload


def moved_location(request: Request, merged: str, canonical: str) -> str:
    """The request's URL with the node id after its route prefix swapped (ids may hold `nodes`)."""
    path = request.url.path
    for prefix in ("/v1/nodes/", "/nodes/"):
        if path.startswith(prefix + merged):
            path = prefix + canonical + path[len(prefix + merged):]
            break
    return path + (f"?{request.url.query}" if request.url.query else "")


def agent_field(payload: Any) -> Any:
    """The `agent` object a write body names (its shape is checked by `identity.claimed`)."""
    return payload.get("agent") if isinstance(payload, dict) else None


def int_param(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    return to_int(value, name, lowest=-MAX_INT - 1)


def read_response(request: Request, result: ReadResult, *, markdown: bool) -> Response:
    headers = result.headers()
    if request.headers.get("if-none-match") in {result.etag, f"W/{result.etag}"}:
        return Response(status_code=304, headers=headers)
    if markdown:
        return PlainTextResponse(result.markdown(), headers=headers, media_type="text/markdown; charset=utf-8")
    return JSONResponse(result.body, headers=headers)


Handler = Callable[[Request], Awaitable[Response]]


def by_method(**handlers: Handler) -> Handler:
    """One endpoint for a path served by several handlers: Starlette answers a 405 from the
    first route whose path matches, so two routes on one path would each hide the other's methods."""

    async def endpoint(request: Request) -> Response:
        return await handlers["GET" if request.method == "HEAD" else request.method](request)

    return endpoint


def method_not_allowed(request: Request, allowed: str) -> HTTPException:
    return HTTPException(405, f"{request.method} is not allowed here; use {allowed}", headers={"Allow": allowed})


def server_config(app: Any, *, host: str, port: int, trust_proxy: str | None = None) -> Any:
    """The uvicorn configuration of `serve --http` (and of the tests' servers).

    Forwarded headers are believed only from `trust_proxy` (comma-separated addresses): uvicorn
    trusts them from 127.0.0.1 by default, which let any local client pick its address.
    """
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                          proxy_headers=bool(trust_proxy), forwarded_allow_ips=trust_proxy or "")


def build_app(
    *,
    service: Service | None = None,
    db_path: str | None = None,
    seed: bool = True,
    read_only: bool = False,
    with_mcp: bool = True,
    write_limit: int = 10,
    host: str = "127.0.0.1",
    cors_origins: tuple[str, ...] = (),
    auth: AuthMode = "off",
    tools: Collection[str] | None = None,
) -> Starlette:
    """The ASGI app. Pass an open `service`, or a `db_path` that the app opens on start-up.

    `host` is the address served: on loopback, `/mcp` checks Host and Origin against loopback
    (DNS-rebinding protection); on any other address (a team's mesh) it accepts every Host.
    `auth` is what a write without a bearer token may do (`identity.acting`); a valid token
    proves its agent in every mode. `tools`: the MCP tools served at `/mcp` (None: all).
    """
    state: dict[str, Service] = {"service": service} if service is not None else {}

    def current() -> Service:
        return state["service"]

    mcp_app = None
    mcp_server = None
    if with_mcp:
        from .mcp_http_checks import checked_mcp_routes
        from .mcp_server import build_mcp_server

        # `mcp_actor` and `mcp_submission` are defined below with the routes; looked up when a tool writes.
        mcp_server = build_mcp_server(current, read_only=read_only, identify=lambda agent, request: mcp_actor(agent, request),
                                      guard=lambda actor, request, submit: mcp_submission(actor, request, submit),
                                      tools=tools)
        # Stateless: a session per `initialize` let anyone without a token use up every session
        # (max_sessions) for 30 minutes, and a session lives on one server of a team's several.
        mcp_app = mcp_server.streamable_http_app(streamable_http_path="/mcp", host=host, stateless_http=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        owned = service is None
        state["service"] = service if service is not None else await Service.open(db_path or ":memory:", seed=seed)
        try:
            if mcp_server is not None:
                async with mcp_server.session_manager.run():
                    yield
            else:
                yield
        finally:
            if owned:
                await state["service"].close()

    async def create_node(request: Request) -> Response:
        writable()
        body = await read_json(request)
        actor = actor_of(request, body.pop("agent", None) if isinstance(body, dict) else None, auth)
        created = await submission(request, actor, lambda counted: current().create_node(body, actor=actor, submission=counted))
        return JSONResponse(created, status_code=201, headers=TRUST_HEADER)

    async def list_nodes(request: Request) -> Response:
        params = request.query_params
        page = await current().list_nodes(
            ecosystem=params.get("ecosystem"), fields=params.get("fields"),
            limit=int_param(request, "limit"), cursor=params.get("cursor"),
        )
        return JSONResponse(page, headers=TRUST_HEADER)

    async def read_node(request: Request, rest: str) -> Response:
        """/v1/nodes/{ecosystem}/{slug}[.md] and .../versions/{version}[.md]."""
        markdown = rest.endswith(".md")
        if markdown:
            rest = rest[: -len(".md")]
        parts = rest.split("/")
        params = request.query_params
        read = current().read_request(
            env=params.get("env"), solution=params.get("solution"),
            fields=params.get("fields"), include=params.get("include"),
        )
        if len(parts) == 4 and parts[2] == "versions":
            result = await current().read_version(require_node_id("/".join(parts[:2])), parts[3], read)
        else:
            result = await current().read_node(require_node_id(rest), read)
        return read_response(request, result, markdown=markdown)

    async def read_article(request: Request, node: str) -> Response:
        result = await current().read_article(require_node_id(node), include=request.query_params.get("include"))
        return read_response(request, result, markdown=False)

    async def article_history(request: Request, node: str) -> Response:
        body = await current().article_history(require_node_id(node), **wire.query(wire.HistoryQuery, request.query_params))
        return JSONResponse(body, headers=TRUST_HEADER)

    async def edit_body(request: Request, node: str, model: type[Any],
                        codes: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
        node_id = require_node_id(node)
        writable()
        payload = await json_object(request)
        wire.parse(model, payload, codes=codes)
        return node_id, payload

    async def patch_article(request: Request, node: str) -> Response:
        node_id, payload = await edit_body(request, node, wire.ArticlePatch, codes={"ops": "invalid_op"})
        result = await current().patch_article(
            node_id, base_revision=payload.get("base_revision"), ops=payload.get("ops"),
            agent=payload.get("agent"), summary=payload.get("summary"), actor=actor_of(request, payload.get("agent"), auth),
        )
        return JSONResponse(result, headers=TRUST_HEADER)

    async def revise_article(request: Request, node: str) -> Response:
        node_id, payload = await edit_body(request, node, wire.ArticleRevision, codes={"article": "invalid_node"})
        result = await current().revise_article(
            node_id, base_revision=payload.get("base_revision"), article=payload.get("article"),
            agent=payload.get("agent"), summary=payload.get("summary"), actor=actor_of(request, payload.get("agent"), auth),
        )
        return JSONResponse(result, headers=TRUST_HEADER)

    async def solutions_gone(request: Request, node: str) -> Response:
        raise KnowmeshError(410, "gone", "answers are no longer posted separately: add one with PATCH "
                            f"{node}/article (op set, path /content/solutions/-)")

    async def list_failures(request: Request, node: str) -> Response:
        return JSONResponse(await current().list_failures(require_node_id(node)), headers=TRUST_HEADER)

    async def report_failed_attempt(request: Request, node: str) -> Response:
        node_id = require_node_id(node)
        writable()
        payload, notes = await wire_body(request, wire.FailedAttempt, code="invalid_failure", shape="failures")
        if isinstance(payload, dict) and "env" in payload:  # the service's name, either form of the value
            payload = {**payload, "environment": wire.env_object(payload.pop("env"))}
        actor = actor_of(request, agent_field(payload), auth)
        accepted = await submission(request, actor,
                                    lambda counted: current().report_failed_attempt(node_id, payload, submission=counted, actor=actor))
        return JSONResponse({**accepted, **wire.deprecation(notes)}, status_code=202, headers=TRUST_HEADER)

    async def set_status(request: Request, node: str) -> Response:
        """Maintainers: POST {status: verified|draft|deprecated, note}."""
        node_id, payload = await edit_body(request, node, wire.StatusChange)
        result = await current().set_status(node_id, payload.get("status"), note=payload.get("note"),
                                            actor=actor_of(request, agent_field(payload), auth))
        return JSONResponse(result, headers=TRUST_HEADER)

    async def list_feedback(request: Request, node: str) -> Response:
        params = request.query_params
        page = await current().list_feedback(node, after=params.get("after"), limit=params.get("limit"))
        return JSONResponse(page, headers=TRUST_HEADER)

    # Everything under /v1/nodes/{ecosystem}/{slug}: the first suffix that ends the path picks
    # the handlers (a node id holds a slash, so one path route serves them all).
    node_subroutes: tuple[tuple[str, dict[str, Callable[[Request, str], Awaitable[Response]]]], ...] = (
        ("/article/revisions", {"GET": article_history, "POST": revise_article}),
        ("/article", {"GET": read_article, "PATCH": patch_article}),
        ("/solutions", {"POST": solutions_gone}),
        ("/failures", {"GET": list_failures, "POST": report_failed_attempt}),
        ("/feedback", {"GET": list_feedback}),
        ("/status", {"POST": set_status}),
        ("", {"GET": read_node}),
    )

    async def node_routes(request: Request) -> Response:
        rest: str = request.path_params["rest"]
        suffix, handlers = next((suffix, handlers) for suffix, handlers in node_subroutes if rest.endswith(suffix))
        handler = handlers.get("GET" if request.method == "HEAD" else request.method)
        if handler is None:
            raise method_not_allowed(request, ", ".join(("HEAD", *handlers) if "GET" in handlers else handlers))
        return await handler(request, rest.removesuffix(suffix) if suffix else rest)

    async def mcp_actor(agent: Any, request: Any) -> Actor:
        """Who an /mcp tool call acts as: the same rule and the same token as /v1."""
        return actor_of(request if isinstance(request, Request) else None, agent, auth)

    async def mcp_submission(actor: Actor, request: Any, submit: Callable[[Submission], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The same write limit for the /mcp tools, per agent or client address."""
        return await submission(request if isinstance(request, Request) else None, actor, submit)

    def writable() -> None:
        if read_only:
            raise KnowmeshError(403, "read_only", "this server is read-only")

    async def submission(request: Request | None, actor: Actor,
                         submit: Callable[[Submission], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """A write under --write-limit: 429 past the allowance, counted in the write's own transaction."""
        client = request.client.host if request is not None and request.client else None
        return await submit(Submission.of(actor, await current().ip_hash(client), write_limit))

    async def undo(request: Request) -> Response:
        """The undo token is the bearer (the spec's form), or `undo_token` in the body when the
        bearer is the agent's own token (a mesh with auth on)."""
        writable()
        payload = await json_object(request)
        wire.parse(wire.Undo, payload)
        actor = actor_of(request, payload.get("agent"), auth)
        undo_token = payload.get("undo_token") or (None if actor.proof == "token" else bearer(request))
        result = await current().undo_edit(
            request.path_params["revision_id"], undo_token=undo_token,
            agent=payload.get("agent"), summary=payload.get("summary"), actor=actor,
        )
        return JSONResponse(result, headers=TRUST_HEADER)

    async def feedback(request: Request) -> Response:
        writable()
        payload, notes = await wire_body(request, wire.Feedback, code="invalid_feedback", codes={"outcome": "invalid_outcome"},
                                         shape="feedback")
        if isinstance(payload, dict):  # the service's names: node, and env as an object
            payload = {**payload, **({"node": payload.pop("id")} if "id" in payload else {}),
                       **({"env": wire.env_object(payload["env"])} if isinstance(payload.get("env"), str) else {})}
        actor = actor_of(request, agent_field(payload), auth)
        accepted = await submission(request, actor, lambda counted: current().report_outcome(payload, submission=counted, actor=actor))
        return JSONResponse({**accepted, **wire.deprecation(notes)}, status_code=202, headers=TRUST_HEADER)

    async def review_page_of(request: Request) -> dict[str, Any]:
        """One page of the review queue: ?limit=, ?offset= (next_offset of the previous page), ?reason=."""
        return await current().review_queue(**wire.query(wire.ReviewQuery, request.query_params))

    async def review(request: Request) -> Response:
        return JSONResponse(await review_page_of(request), headers=TRUST_HEADER)

    async def review_md(request: Request) -> Response:
        markdown = review_markdown(await review_page_of(request))
        return PlainTextResponse(markdown, media_type="text/markdown; charset=utf-8", headers=TRUST_HEADER)

    async def dedupe_tasks(request: Request) -> Response:
        writable()
        payload, _ = await wire_body(request, wire.DedupeTask, code="invalid_dedupe")
        opened = await current().open_dedupe_task(payload, actor=actor_of(request, agent_field(payload), auth))
        return JSONResponse(opened, status_code=202, headers=TRUST_HEADER)

    async def dedupe_vote(request: Request) -> Response:
        writable()
        payload, _ = await wire_body(request, wire.DedupeVote, code="invalid_dedupe")
        result = await current().vote_dedupe(request.path_params["task_id"], payload,
                                             actor=actor_of(request, agent_field(payload), auth))
        return JSONResponse(result, headers=TRUST_HEADER)

    async def dedupe_list(request: Request) -> Response:
        status = request.query_params.get("status") or "open"
        if status not in ("open", "flagged"):
            raise bad_parameter("status", "status must be open (for agents to vote) or flagged (for maintainers to merge)")
        limit = int_param(request, "limit") or 50
        queue = await (current().flagged_pairs(limit=limit) if status == "flagged" else current().dedupe_queue(limit=limit))
        return JSONResponse(queue, headers=TRUST_HEADER)

    async def dedupe_merge(request: Request) -> Response:
        """Maintainers: POST {canonical_id?, note} confirms a flagged pair as one node."""
        writable()
        payload = await json_object(request)
        wire.parse(wire.MergeConfirmation, payload)
        result = await current().confirm_merge(request.path_params["task_id"], canonical_id=payload.get("canonical_id"),
                                               note=payload.get("note"), actor=actor_of(request, agent_field(payload), auth))
        return JSONResponse(result, headers=TRUST_HEADER)

    async def issue_status(request: Request) -> Response:
        """Maintainers: POST {status: closed|discarded, note}."""
        writable()
        payload = await json_object(request)
        wire.parse(wire.IssueResolution, payload)
        result = await current().resolve_issue(request.path_params["number"], payload.get("status"),
                                               note=payload.get("note"), actor=actor_of(request, agent_field(payload), auth))
        return JSONResponse(result, headers=TRUST_HEADER)

    async def audit(request: Request) -> Response:
        params = request.query_params
        log_page = await current().audit_log(target=params.get("target"), after=params.get("after"), limit=params.get("limit"))
        return JSONResponse(log_page, headers=TRUST_HEADER)

    async def dedupe_md(request: Request) -> Response:
        queue = await current().dedupe_queue()
        return PlainTextResponse(dedupe_markdown(queue), media_type="text/markdown; charset=utf-8", headers=TRUST_HEADER)

    async def changes(request: Request) -> Response:
        page = await current().changes(since=request.query_params.get("since"), limit=int_param(request, "limit"))
        return JSONResponse(page, headers=TRUST_HEADER)

    async def changes_jsonl(request: Request) -> Response:
        page = await current().changes(since=request.query_params.get("since"), limit=int_param(request, "limit"))
        lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in page["changes"])
        headers = {**TRUST_HEADER, "X-Knowmesh-Next-Cursor": page["next_cursor"],
                   "X-Knowmesh-Has-More": "true" if page["has_more"] else "false"}
        return Response(lines, media_type="application/x-ndjson", headers=headers)

    async def issues_post(request: Request) -> Response:
        writable()
        payload, _ = await wire_body(request, wire.Issue, code="invalid_issue")
        actor = actor_of(request, agent_field(payload), auth)
        filed = await submission(request, actor, lambda counted: current().file_issue(payload, submission=counted, actor=actor))
        filed["url"] = str(request.base_url).rstrip("/") + filed["url"]
        return JSONResponse(filed, status_code=202, headers=TRUST_HEADER)

    async def search(request: Request) -> Response:
        params = request.query_params
        wanted = wire.query(wire.SearchQuery, params)
        envelope = await current().search(params.get("q"), env=params.get("env"), ecosystem=params.get("ecosystem"),
                                          limit=wanted.get("limit"))
        return JSONResponse(envelope, headers=TRUST_HEADER)

    async def search_post(request: Request) -> Response:
        """POST /v1/search: the GET's fields as a JSON body, for pasted output too long for a URL."""
        body = search_body(await read_json(request, SEARCH_BODY_BYTES))
        envelope = await current().search(body.get("q"), env=wire.env_text(body.get("env")), ecosystem=body.get("ecosystem"),
                                          limit=body.get("limit"))
        return JSONResponse(envelope, headers=TRUST_HEADER)

    async def health(request: Request) -> Response:
        return JSONResponse(await current().health(auth=auth))

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def llms(request: Request) -> Response:
        return PlainTextResponse(llms_txt(), media_type="text/markdown; charset=utf-8")

    async def on_knowmesh_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, KnowmeshError)
        response = error_response(error)
        if error.status == 301:  # a merged node: the same URL with the canonical id
            response.headers["Location"] = moved_location(request, error.details["merged"], error.top_level["canonical"]["id"])
        if "retry_after_seconds" in error.details:
            response.headers["Retry-After"] = str(error.details["retry_after_seconds"])
        return response

    async def on_http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        if error.status_code == 404 and wants_html(request) and not request.url.path.startswith("/v1/"):
            # a browser on a mistyped page gets a page with the way home; API clients keep the JSON error
            return error_page(404, "Page not found", f"There is no page at {request.url.path}.")
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        response = error_response(KnowmeshError(error.status_code, code, str(error.detail)))
        response.headers.update(error.headers or {})  # Allow on a 405
        return response

    async def on_unexpected(request: Request, error: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(KnowmeshError(500, "internal_error", "unexpected server error; please report it"))

    routes: list[Any] = [
        Route("/llms.txt", llms, methods=["GET"]),
        Route("/v1/openapi.json", openapi, methods=["GET"]),
        Route("/v1/health", health, methods=["GET"]),
        Route("/v1/search", by_method(GET=search, POST=search_post), methods=["GET", "POST"]),
        Route("/v1/issues", issues_post, methods=["POST"]),
        Route("/v1/changes", changes, methods=["GET"]),
        Route("/v1/changes.jsonl", changes_jsonl, methods=["GET"]),
        Route("/v1/feedback", feedback, methods=["POST"]),
        Route("/v1/review", review, methods=["GET"]),
        Route("/review.md", review_md, methods=["GET"]),
        Route("/v1/dedupe/tasks", by_method(GET=dedupe_list, POST=dedupe_tasks), methods=["GET", "POST"]),
        Route("/v1/dedupe/tasks/{task_id}/votes", dedupe_vote, methods=["POST"]),
        Route("/v1/dedupe/tasks/{task_id}/merge", dedupe_merge, methods=["POST"]),
        Route("/v1/issues/{number}/status", issue_status, methods=["POST"]),
        Route("/v1/audit", audit, methods=["GET"]),
        Route("/dedupe.md", dedupe_md, methods=["GET"]),
        Route("/v1/nodes", by_method(GET=list_nodes, POST=create_node), methods=["GET", "POST"]),
        Route("/v1/nodes/{rest:path}", node_routes, methods=EVERY_METHOD),  # node_routes answers 405 with its Allow
        Route("/v1/article-revisions/{revision_id}/undo", undo, methods=["POST"]),
    ]
    routes += page_routes(current)
    if mcp_app is not None:
        routes += checked_mcp_routes(mcp_app.routes)  # a body that is no single message: -32600, as over stdio
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(CrossSiteGuard, loopback=is_loopback(host), cors_origins=cors_origins),
                    *auth_middleware(current)],
        exception_handlers={
            KnowmeshError: on_knowmesh_error,
            HTTPException: on_http_error,
            Exception: on_unexpected,
        },
    )
