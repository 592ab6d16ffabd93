"""Pages for people: the routes. Each handler calls `Mesh` and hands the result to a renderer.

| path | page |
| --- | --- |
| `/` | the front door: what this is, search, ecosystems, open problems, where to go next |
| `/nodes` | every node (or, with `?q=`, search results) |
| `/nodes/{ecosystem}` | one ecosystem's nodes (an id has a slash, an ecosystem has none) |
| `/nodes/{ecosystem}/{slug}` | one node's article, answers with evidence in words, history |
| `/nodes/{id}/history`, `/nodes/{id}/diff?from=&to=` | its revisions, and what changed between two |
| `/review` | the review queue: its size, one page of it, the never-verified answers folded |
| `/issues`, `/issues/{n}` | service issues: HTML for a browser, Markdown for everyone else |
| `/docs`, `/docs/{doc}`, `/v1/docs/{doc}.md` | documentation |
| `/sitemap.xml`, `/robots.txt` | for search engines: answered nodes only |

The routes are a table (`PAGES`) of module-level handlers, each `handler(service, request)`: a
few lines that call `Mesh`, hand the result to the data preparation of its concept
(`browse_pages`, `node_pages`, `queue_pages`, `doc_pages`) and render that with its template
under `templates/` (`page_shell.page`: Jinja2, autoescape on). `page_routes(current)` binds the
table to the app's service getter with `functools.partial`: no handler is a closure. A bad
parameter or an unknown node on a page is an HTML error page with the spec's status, never a
500 and never JSON in a browser.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.core.evidence_words import AnswerEvidence, answers_evidence
from knowmesh_mcp.core.limits import to_int
from knowmesh_mcp.services.issues import issue_markdown, issues_markdown
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.web import browse_pages, doc_pages, node_pages, queue_pages
from knowmesh_mcp.web.doc_pages import DOCS, render_markdown, safe_link
from knowmesh_mcp.web.shell import NODE_HEADERS, PAGE_HEADERS, absolute, ecosystem_href, error_page, node_href, page

# render_markdown and safe_link: older callers import them from here
__all__ = ["PAGES", "node_href", "page_routes", "render_markdown", "safe_link", "wants_html"]

SEARCH_LIMIT = 20
LIST_PAGE = 100
INLINE_LIMIT = 300  # up to this many nodes /nodes lists them all; a bigger mesh pages per ecosystem
ECOSYSTEM_PAGE = 100  # the list route's maximum
CHANGES_PAGE = 1000
FEEDBACK_PAGES = 10  # pages of 500 outcome reports a node page reads for its evidence words
HOME_OPEN_PROBLEMS = 10
TRUST_HEADERS = {"X-Knowmesh-Content-Trust": "untrusted-data"}
MARKDOWN = "text/markdown; charset=utf-8"

Current = Callable[[], Mesh]
Handler = Callable[[Mesh, Request], Awaitable[Response]]


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


async def all_nodes(service: Mesh) -> list[dict[str, Any]]:
    """Every published (non-deprecated) node, walking the list's cursor to the end (small meshes)."""
    nodes: list[dict[str, Any]] = []
    cursor = None
    while True:
        listed = await service.nodes.list_nodes(fields="title,ecosystem,has_answer", limit=LIST_PAGE, cursor=cursor)
        nodes += listed["nodes"]
        cursor = listed["next_cursor"]
        if not cursor:
            return nodes


async def node_states(service: Mesh) -> dict[str, str]:
    """{id: answer state} of every node, from the change feed (one row per node; small meshes)."""
    states: dict[str, str] = {}
    since = None
    while True:
        page_ = await service.feed.changes(since=since, limit=CHANGES_PAGE)
        states.update((entry["id"], entry["answer_state"]) for entry in page_["changes"])
        if not page_["has_more"]:
            return states
        since = page_["next_cursor"]


async def small_mesh_states(service: Mesh, counts: list[dict[str, Any]]) -> dict[str, str] | None:
    """Answer states for the badges of a list, when the mesh is small enough to read them all."""
    return await node_states(service) if sum(c["nodes"] for c in counts) <= INLINE_LIMIT else None


async def evidence_of(service: Mesh, view: dict[str, Any]) -> dict[str, AnswerEvidence] | None:
    """Each answer's evidence in words, from the node's outcome reports (None past FEEDBACK_PAGES)."""
    reports: list[dict[str, Any]] = []
    after = 0
    for _ in range(FEEDBACK_PAGES):
        listed = await service.outcomes.list_feedback(view["id"], after=after)
        reports += listed["feedback"]
        if not listed["has_more"]:
            revisions = {s["id"]: s.get("revision", 1) for s in view["content"].get("solutions", [])}
            return answers_evidence(reports, revisions)
        after = listed["next_after"]
    return None


def revision_param(request: Request, name: str, newest: int) -> int | None:
    """`?from=` or `?to=` of a diff page: a revision of the article (400 otherwise), or None."""
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    return to_int(value, name, lowest=1, highest=newest, what="a revision number")


# -- the handlers: each `handler(service, request)` ---------------------------------------------


async def home(service: Mesh, request: Request) -> Response:
    counts = await service.nodes.ecosystem_counts()
    unsolved = await service.review.review_queue(reason="unsolved", limit=HOME_OPEN_PROBLEMS)
    issues = len(await service.issues.list_issues())
    return page(
        "home.html",
        title="A shared knowledge base of failure patterns",
        description="Error messages coding agents hit, each with the answer that fixed it, a command that "
        "verifies the fix, and what agents reported after running it.",
        canonical=absolute(request, "/"),
        headers=NODE_HEADERS,
        **browse_pages.home(counts, unsolved, sum(unsolved["counts"].values()), issues),
    )


async def search_results(service: Mesh, request: Request, q: str, env: str) -> Response:
    try:
        envelope = await service.searching.search(q, env=env or None, limit=SEARCH_LIMIT)
    except KnowmeshError as error:
        return page(
            "search.html",
            title="Search",
            description="Search Knowmesh",
            noindex=True,
            status=error.status,
            headers=NODE_HEADERS,
            **browse_pages.search(q, env, None, error.message),
        )
    return page(
        "search.html",
        title="Search",
        description=f"Knowmesh results for {q}",
        canonical=absolute(request, "/nodes"),
        noindex=True,
        headers=NODE_HEADERS,
        **browse_pages.search(q, env, envelope),
    )


async def nodes_index(service: Mesh, request: Request) -> Response:
    """/nodes: every node by ecosystem, or with `?q=` search results."""
    params = request.query_params
    q = params.get("q", "")
    if q.strip():
        return await search_results(service, request, q, params.get("env", ""))
    ecosystem = params.get("ecosystem", "").strip()
    if ecosystem:  # the older address of an ecosystem's list: the same page (its canonical is /nodes/{ecosystem})
        return await ecosystem_list(service, request, ecosystem)
    counts = await service.nodes.ecosystem_counts()
    small = sum(c["nodes"] for c in counts) <= INLINE_LIMIT
    nodes, states = (await all_nodes(service), await node_states(service)) if small else (None, {})
    return page(
        "nodes.html",
        title="Nodes",
        description=f"{browse_pages.counts_line(counts)} Every error in Knowmesh, by ecosystem.",
        canonical=absolute(request, "/nodes"),
        headers=NODE_HEADERS,
        **browse_pages.index(counts, nodes, states),
    )


async def ecosystem_list(service: Mesh, request: Request, ecosystem: str) -> Response:
    cursor = request.query_params.get("cursor") or None
    listed = await service.nodes.list_nodes(
        ecosystem=ecosystem, fields="title,ecosystem,has_answer", limit=ECOSYSTEM_PAGE, cursor=cursor
    )
    name = listed["ecosystem"]
    counts = await service.nodes.ecosystem_counts()
    count = next((c for c in counts if c["ecosystem"] == name), None)
    if count is None and not listed["nodes"]:
        return error_page(
            404,
            "No such ecosystem",
            f"No node has the ecosystem {ecosystem!r}.",
            headers=NODE_HEADERS,
            ecosystems=counts,
        )
    states = await small_mesh_states(service, counts) or {}
    return page(
        "ecosystem.html",
        title=f"{name} problems",
        description=browse_pages.ecosystem_description(name, count),
        canonical=absolute(request, browse_pages.ecosystem_page_href(name, cursor)),
        headers=NODE_HEADERS,
        **browse_pages.ecosystem(name, listed, count, states, cursor is None),
    )


async def ecosystem_page(service: Mesh, request: Request) -> Response:
    """/nodes/{ecosystem}."""
    return await ecosystem_list(service, request, request.path_params["ecosystem"])


def node_id_of(request: Request) -> str:
    return f"{request.path_params['ecosystem']}/{request.path_params['slug']}"


async def node_page(service: Mesh, request: Request) -> Response:
    """/nodes/{ecosystem}/{slug}: the article, its answers with their evidence, its history."""
    node_id = node_id_of(request)
    try:
        result = await service.nodes.read_node(
            node_id, service.nodes.read_request(include="archived_failures,alternatives")
        )
    except KnowmeshError as error:
        if error.status in (400, 404):
            return error_page(
                404, "Node not found", f"There is no node {node_id!r}.", headers=NODE_HEADERS, search=True
            )
        raise
    view = result.body
    history = await service.articles.article_history(node_id)
    shared = (await service.failures.list_failures(node_id))["failures"]
    evidence = await evidence_of(service, view) or {}
    indexable = view["has_answer"] and view["status"] != "deprecated"
    headers = {
        **NODE_HEADERS,
        "X-Knowmesh-Has-Answer": "true" if view["has_answer"] else "false",
        "X-Knowmesh-Article-Revision": str(view["revision"]),
    }
    return page(
        "node.html",
        title=view["title"],
        description=node_pages.node_description(view),
        canonical=absolute(request, view["html_path"]),
        noindex=not indexable,
        headers=headers,
        **node_pages.node(view, history, shared, evidence),
    )


async def node_view(service: Mesh, node_id: str) -> dict[str, Any]:
    """The node a history or diff page is about (404 page when there is none)."""
    try:
        return (await service.nodes.read_node(node_id, service.nodes.read_request())).body
    except KnowmeshError as error:
        if error.status == 400:
            raise KnowmeshError(404, "node_not_found", f"There is no node {node_id!r}.") from None
        raise


async def history_page(service: Mesh, request: Request) -> Response:
    """/nodes/{ecosystem}/{slug}/history."""
    view = await node_view(service, node_id_of(request))
    history = await service.articles.article_history(view["id"])
    return page(
        "history.html",
        title=f"History of {view['title']}",
        description=f"Every revision of the Knowmesh article {view['title']}: who changed what, and when.",
        canonical=absolute(request, node_pages.history_href(view["id"])),
        noindex=True,
        headers=NODE_HEADERS,
        **node_pages.history_page(view, history),
    )


async def diff_page(service: Mesh, request: Request) -> Response:
    """/nodes/{ecosystem}/{slug}/diff?from=&to= (by default the last edit)."""
    view = await node_view(service, node_id_of(request))
    newest = view["revision"]
    last = revision_param(request, "to", newest)
    last = newest if last is None else last
    first = revision_param(request, "from", newest)
    first = max(1, last - 1) if first is None else first
    diff = await service.articles.article_history(view["id"], from_revision=first, to_revision=last)
    return page(
        "diff.html",
        title=f"Revision {first} → {last} of {view['title']}",
        description=f"What changed in the Knowmesh article {view['title']} from revision {first} to {last}.",
        canonical=absolute(request, node_pages.diff_href(view["id"], first, last)),
        noindex=True,
        headers=NODE_HEADERS,
        **node_pages.diff_page(view, diff),
    )


async def under_nodes(service: Mesh, request: Request) -> Response:
    """Any other address under /nodes/: with a trailing slash, the page itself; otherwise no such node."""
    rest: str = request.path_params["rest"]
    if not rest.strip("/"):
        return RedirectResponse("/nodes", status_code=308)
    if rest.endswith("/"):  # a copied or hand-typed address with a trailing slash: the page itself
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(node_href(rest.rstrip("/")) + query, status_code=308)
    return error_page(404, "Node not found", f"There is no node {rest!r}.", headers=NODE_HEADERS, search=True)


async def review_page(service: Mesh, request: Request) -> Response:
    params = request.query_params
    limit = params.get("limit")
    queue = await service.review.review_queue(
        limit=None if not limit else to_int(limit, "limit", lowest=1, highest=200),
        offset=params.get("offset") or None,
        reason=params.get("reason") or None,
    )
    path = "/review" + (
        queue_pages.review_page_query(queue, queue["offset"]) if queue["offset"] or queue["reason"] else ""
    )
    return page(
        "review.html",
        title="Review queue",
        description=f"What needs attention in Knowmesh: {queue_pages.review_summary(queue)}",
        canonical=absolute(request, path),
        noindex=True,
        headers=NODE_HEADERS,
        **queue_pages.review(queue),
    )


async def issues_index(service: Mesh, request: Request) -> Response:
    issues = await service.issues.list_issues()
    if not wants_html(request):
        return PlainTextResponse(issues_markdown(issues), media_type=MARKDOWN, headers=TRUST_HEADERS)
    return page(
        "issues.html",
        title="Service issues",
        description="Reports about the Knowmesh service itself, open and resolved.",
        canonical=absolute(request, "/issues"),
        headers={**TRUST_HEADERS, **PAGE_HEADERS},
        **queue_pages.issues(issues),
    )


async def issue_page(service: Mesh, request: Request) -> Response:
    try:
        issue = await service.issues.get_issue(request.path_params["number"])
    except KnowmeshError as error:
        if not wants_html(request) or error.status != 404:
            raise
        return error_page(404, "Issue not found", error.message, headers={**TRUST_HEADERS, **PAGE_HEADERS})
    if not wants_html(request):
        return PlainTextResponse(issue_markdown(issue), media_type=MARKDOWN, headers=TRUST_HEADERS)
    return page(
        "issue.html",
        title=f"Issue {issue['number']}",
        description=f"Knowmesh service issue #{issue['number']} ({issue['status']}): {issue['title']}",
        canonical=absolute(request, f"/issues/{int(issue['number'])}"),
        noindex=True,
        headers={**TRUST_HEADERS, **PAGE_HEADERS},
        **queue_pages.issue(issue),
    )


async def sitemap(service: Mesh, request: Request) -> Response:
    """The fixed pages and every answered node; past SITEMAP_LIMIT URLs, an index of files
    (`?page=N`), each read from the store alone."""
    counts = await service.nodes.ecosystem_counts()
    fixed = [
        "/",
        "/nodes",
        *(ecosystem_href(c["ecosystem"]) for c in counts if c["nodes"] > c["open"]),
        "/docs",
        *(f"/docs/{name}" for name in DOCS if doc_pages.load_doc(name) is not None),
    ]
    files = browse_pages.sitemap_files(len(fixed) + sum(c["nodes"] - c["open"] for c in counts))
    asked = request.query_params.get("page")
    if asked is None and files > 1:
        xml = browse_pages.sitemap_index_xml(absolute(request, ""), files)
    else:
        number = 1 if asked is None else to_int(asked, "page", lowest=1, highest=files, what="a sitemap file number")
        pages, offset, limit = browse_pages.sitemap_slice(number, len(fixed))
        nodes = await service.nodes.answered_nodes(offset=offset, limit=limit) if limit else []
        xml = browse_pages.sitemap_xml(absolute(request, ""), fixed[pages], nodes)
    return Response(xml, media_type="application/xml", headers={"X-Content-Type-Options": "nosniff"})


async def robots(service: Mesh, request: Request) -> Response:
    text = f"User-agent: *\nDisallow: /mcp\nSitemap: {absolute(request, '/sitemap.xml')}\n"
    return PlainTextResponse(text, headers={"X-Content-Type-Options": "nosniff"})


async def docs_index(service: Mesh, request: Request) -> Response:
    return page(
        "docs_index.html",
        title="Documentation",
        description="How agents search, read, verify, report and improve Knowmesh articles.",
        canonical=absolute(request, "/docs"),
        **doc_pages.docs_index(),
    )


async def doc_page(service: Mesh, request: Request) -> Response:
    name = request.path_params["name"]
    markdown = doc_pages.load_doc(name)
    if markdown is None:
        return error_page(404, "Doc not found", f"There is no doc {name!r}. Docs: {', '.join(DOCS)}.")
    return page(
        "doc.html",
        title=doc_pages.doc_title(name, markdown),
        description=doc_pages.doc_summary(markdown),
        canonical=absolute(request, f"/docs/{name}"),
        **doc_pages.doc(name, markdown),
    )


async def doc_markdown(service: Mesh, request: Request) -> Response:
    requested = request.path_params["name"]
    name = requested.removesuffix(".md")
    markdown = doc_pages.load_doc(name) if requested.endswith(".md") else None
    if markdown is None:
        raise doc_pages.doc_not_found(requested)
    return PlainTextResponse(markdown, media_type=MARKDOWN, headers={"X-Content-Type-Options": "nosniff"})


# -- the table ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageRoute:
    """A page's address, its handler, and whether its 400 or 404 is an HTML page (the node pages)."""

    path: str
    handler: Handler
    html_errors: bool = False


PAGES = (
    PageRoute("/", home, html_errors=True),
    PageRoute("/nodes", nodes_index, html_errors=True),
    PageRoute("/nodes/{ecosystem}", ecosystem_page, html_errors=True),
    PageRoute("/nodes/{ecosystem}/{slug}", node_page, html_errors=True),
    PageRoute("/nodes/{ecosystem}/{slug}/history", history_page, html_errors=True),
    PageRoute("/nodes/{ecosystem}/{slug}/diff", diff_page, html_errors=True),
    PageRoute("/nodes/{rest:path}", under_nodes, html_errors=True),
    PageRoute("/review", review_page, html_errors=True),
    PageRoute("/issues", issues_index),
    PageRoute("/issues/{number}", issue_page),
    PageRoute("/sitemap.xml", sitemap),
    PageRoute("/robots.txt", robots),
    PageRoute("/docs", docs_index),
    PageRoute("/docs/{name}", doc_page),
    PageRoute("/v1/docs/{name}", doc_markdown),
)


async def endpoint(route: PageRoute, current: Current, request: Request) -> Response:
    """Every page route's endpoint: its handler over the app's service. On a route with
    `html_errors`, a 400 or 404 is a page too (other statuses, such as a merged node's 301, go on
    to the app's handler, which adds the Location)."""
    try:
        return await route.handler(current(), request)
    except KnowmeshError as error:
        if not route.html_errors or error.status not in (400, 404):
            raise
        title = "Not found" if error.status == 404 else "Bad request"
        return error_page(error.status, title, error.message, headers=NODE_HEADERS)


def page_routes(current: Current) -> list[Route]:
    """The table's routes, each bound to `current` (the app's service getter)."""
    return [
        Route(route.path, partial(endpoint, route, current), methods=["GET"], name=route.handler.__name__)
        for route in PAGES
    ]
