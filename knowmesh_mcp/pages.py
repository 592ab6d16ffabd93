"""Pages for people: the routes. Each handler calls `Service` and hands the result to a renderer.

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

The renderers live by concept (`page_shell`, `browse_pages`, `node_pages`, `queue_pages`,
`doc_pages`). A bad parameter or an unknown node on a page is an HTML error page with the
spec's status, never a 500 and never JSON in a browser.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from . import browse_pages, doc_pages, node_pages, queue_pages
from .doc_pages import DOCS, render_markdown, safe_link
from .errors import KnowmeshError
from .evidence_words import AnswerEvidence, answers_evidence
from .limits import to_int
from .outcomes import issue_markdown, issues_markdown
from .page_shell import NODE_HEADERS, PAGE_HEADERS, absolute, e, ecosystem_href, error_page, node_href, page, search_form
from .service import Service

__all__ = ["page_routes", "render_markdown", "safe_link"]  # the last two: older callers import them from here

SEARCH_LIMIT = 20
LIST_PAGE = 100
INLINE_LIMIT = 300  # up to this many nodes /nodes lists them all; a bigger mesh pages per ecosystem
ECOSYSTEM_PAGE = 100  # the list route's maximum
CHANGES_PAGE = 1000
FEEDBACK_PAGES = 10  # pages of 500 outcome reports a node page reads for its evidence words
HOME_OPEN_PROBLEMS = 10
TRUST_HEADERS = {"X-Knowmesh-Content-Trust": "untrusted-data"}
MARKDOWN = "text/markdown; charset=utf-8"

Handler = Callable[[Request], Awaitable[Response]]


def html_errors(handler: Handler) -> Handler:
    """A page's 400 or 404 is a page too (other statuses, such as a merged node's 301, go on to
    the app's handler, which adds the Location)."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except KnowmeshError as error:
            if error.status not in (400, 404):
                raise
            title = "Not found" if error.status == 404 else "Bad request"
            return error_page(error.status, title, error.message, headers=NODE_HEADERS)

    return endpoint


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


async def all_nodes(service: Service) -> list[dict[str, Any]]:
    """Every published (non-deprecated) node, walking the list's cursor to the end (small meshes)."""
    nodes: list[dict[str, Any]] = []
    cursor = None
    while True:
        listed = await service.list_nodes(fields="title,ecosystem,has_answer", limit=LIST_PAGE, cursor=cursor)
        nodes += listed["nodes"]
        cursor = listed["next_cursor"]
        if not cursor:
            return nodes


async def node_states(service: Service) -> dict[str, str]:
    """{id: answer state} of every node, from the change feed (one row per node; small meshes)."""
    states: dict[str, str] = {}
    since = None
    while True:
        page_ = await service.changes(since=since, limit=CHANGES_PAGE)
        states.update((entry["id"], entry["answer_state"]) for entry in page_["changes"])
        if not page_["has_more"]:
            return states
        since = page_["next_cursor"]


async def small_mesh_states(service: Service, counts: list[dict[str, Any]]) -> dict[str, str] | None:
    """Answer states for the badges of a list, when the mesh is small enough to read them all."""
    return await node_states(service) if sum(c["nodes"] for c in counts) <= INLINE_LIMIT else None


async def evidence_of(service: Service, view: dict[str, Any]) -> dict[str, AnswerEvidence] | None:
    """Each answer's evidence in words, from the node's outcome reports (None past FEEDBACK_PAGES)."""
    reports: list[dict[str, Any]] = []
    after = 0
    for _ in range(FEEDBACK_PAGES):
        listed = await service.list_feedback(view["id"], after=after)
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


def page_routes(current: Callable[[], Service]) -> list[Any]:
    async def home(request: Request) -> Response:
        service = current()
        counts = await service.ecosystem_counts()
        unsolved = await service.review_queue(reason="unsolved", limit=HOME_OPEN_PROBLEMS)
        review = {"total": sum(unsolved["counts"].values())}
        issues = len(await service.list_issues())
        return page("A shared knowledge base of failure patterns", browse_pages.home_body(counts, unsolved, review, issues),
                    description="Error messages coding agents hit, each with the answer that fixed it, a command that "
                                "verifies the fix, and what agents reported after running it.",
                    canonical=absolute(request, "/"), headers=NODE_HEADERS)

    async def search_results(request: Request, q: str, env: str) -> Response:
        try:
            envelope = await current().search(q, env=env or None, limit=SEARCH_LIMIT)
        except KnowmeshError as error:
            body = "<h1>Search</h1>\n" + search_form(q, env) + f"\n<p>{e(error.message)}</p>"
            return page("Search", body, description="Search Knowmesh", noindex=True, status=error.status,
                        headers=NODE_HEADERS)
        return page("Search", browse_pages.search_body(q, env, envelope), description=f"Knowmesh results for {q}",
                    canonical=absolute(request, "/nodes"), noindex=True, headers=NODE_HEADERS)

    async def nodes_index(request: Request) -> Response:
        params = request.query_params
        q = params.get("q", "")
        if q.strip():
            return await search_results(request, q, params.get("env", ""))
        ecosystem = params.get("ecosystem", "").strip()
        if ecosystem:  # the older address of an ecosystem's list: the same page (its canonical is /nodes/{ecosystem})
            return await ecosystem_page(request, ecosystem)
        service = current()
        counts = await service.ecosystem_counts()
        description = f"{browse_pages.counts_line(counts)} Every error in Knowmesh, by ecosystem."
        if sum(c["nodes"] for c in counts) > INLINE_LIMIT:
            body = browse_pages.index_body(counts, None, {})
        else:
            body = browse_pages.index_body(counts, await all_nodes(service), await node_states(service))
        return page("Nodes", body, description=description, canonical=absolute(request, "/nodes"), headers=NODE_HEADERS)

    async def ecosystem_page(request: Request, ecosystem: str) -> Response:
        service = current()
        cursor = request.query_params.get("cursor") or None
        listed = await service.list_nodes(ecosystem=ecosystem, fields="title,ecosystem,has_answer",
                                          limit=ECOSYSTEM_PAGE, cursor=cursor)
        name = listed["ecosystem"]
        counts = await service.ecosystem_counts()
        count = next((c for c in counts if c["ecosystem"] == name), None)
        if count is None and not listed["nodes"]:
            return error_page(404, "No such ecosystem", f"No node has the ecosystem {ecosystem!r}.",
                              headers=NODE_HEADERS, extra=browse_pages.ecosystem_list(counts))
        states = await small_mesh_states(service, counts) or {}
        canonical = absolute(request, browse_pages.ecosystem_page_href(name, cursor))
        return page(f"{name} problems", browse_pages.ecosystem_body(name, listed, count, states, cursor is None),
                    description=browse_pages.ecosystem_description(name, count), canonical=canonical,
                    headers=NODE_HEADERS)

    async def node_page(request: Request, node_id: str) -> Response:
        service = current()
        try:
            result = await service.read_node(node_id, service.read_request(include="archived_failures,alternatives"))
        except KnowmeshError as error:
            if error.status in (400, 404):
                return error_page(404, "Node not found", f"There is no node {node_id!r}.", headers=NODE_HEADERS,
                                  extra=search_form())
            raise
        view = result.body
        history = await service.article_history(node_id)
        shared = (await service.list_failures(node_id))["failures"]
        evidence = await evidence_of(service, view) or {}
        indexable = view["has_answer"] and view["status"] != "deprecated"
        headers = {**NODE_HEADERS, "X-Knowmesh-Has-Answer": "true" if view["has_answer"] else "false",
                   "X-Knowmesh-Article-Revision": str(view["revision"])}
        return page(view["title"], node_pages.node_body(view, history, shared, evidence),
                    description=node_pages.node_description(view), canonical=absolute(request, view["html_path"]),
                    noindex=not indexable, headers=headers)

    async def node_view(node_id: str) -> dict[str, Any]:
        """The node a history or diff page is about (404 page when there is none)."""
        try:
            return (await current().read_node(node_id, current().read_request())).body
        except KnowmeshError as error:
            if error.status == 400:
                raise KnowmeshError(404, "node_not_found", f"There is no node {node_id!r}.") from None
            raise

    async def history_page(request: Request, node_id: str) -> Response:
        view = await node_view(node_id)
        history = await current().article_history(view["id"])
        return page(f"History of {view['title']}", node_pages.history_body(view, history),
                    description=f"Every revision of the Knowmesh article {view['title']}: who changed what, and when.",
                    canonical=absolute(request, node_pages.history_href(view["id"])), noindex=True, headers=NODE_HEADERS)

    async def diff_page(request: Request, node_id: str) -> Response:
        view = await node_view(node_id)
        newest = view["revision"]
        last = revision_param(request, "to", newest)
        last = newest if last is None else last
        first = revision_param(request, "from", newest)
        first = max(1, last - 1) if first is None else first
        diff = await current().article_history(view["id"], from_revision=first, to_revision=last)
        return page(f"Revision {first} → {last} of {view['title']}", node_pages.diff_body(view, diff),
                    description=f"What changed in the Knowmesh article {view['title']} from revision {first} to {last}.",
                    canonical=absolute(request, node_pages.diff_href(view["id"], first, last)), noindex=True,
                    headers=NODE_HEADERS)

    async def under_nodes(request: Request) -> Response:
        """/nodes/{ecosystem}, /nodes/{id}, /nodes/{id}/history, /nodes/{id}/diff."""
        rest: str = request.path_params["rest"]
        if not rest.strip("/"):
            return RedirectResponse("/nodes", status_code=308)
        if rest.endswith("/"):  # a copied or hand-typed address with a trailing slash: the page itself
            query = f"?{request.url.query}" if request.url.query else ""
            return RedirectResponse(node_href(rest.rstrip("/")) + query, status_code=308)
        parts = rest.split("/")
        if len(parts) == 1:
            return await ecosystem_page(request, rest)
        if len(parts) == 3 and parts[2] == "history":
            return await history_page(request, "/".join(parts[:2]))
        if len(parts) == 3 and parts[2] == "diff":
            return await diff_page(request, "/".join(parts[:2]))
        return await node_page(request, rest)

    async def review_page(request: Request) -> Response:
        params = request.query_params
        limit = params.get("limit")
        queue = await current().review_queue(
            limit=None if not limit else to_int(limit, "limit", lowest=1, highest=200),
            offset=params.get("offset") or None, reason=params.get("reason") or None)
        path = "/review" + (queue_pages.review_page_query(queue, queue["offset"]) if queue["offset"] or queue["reason"] else "")
        return page("Review queue", queue_pages.review_body(queue),
                    description=f"What needs attention in Knowmesh: {queue_pages.review_summary(queue)}",
                    canonical=absolute(request, path), noindex=True, headers=NODE_HEADERS)

    async def issues_index(request: Request) -> Response:
        issues = await current().list_issues()
        if not wants_html(request):
            return PlainTextResponse(issues_markdown(issues), media_type=MARKDOWN, headers=TRUST_HEADERS)
        return page("Service issues", queue_pages.issues_body(issues),
                    description="Reports about the Knowmesh service itself, open and resolved.",
                    canonical=absolute(request, "/issues"), headers={**TRUST_HEADERS, **PAGE_HEADERS})

    async def issue_page(request: Request) -> Response:
        try:
            issue = await current().get_issue(request.path_params["number"])
        except KnowmeshError as error:
            if not wants_html(request) or error.status != 404:
                raise
            return error_page(404, "Issue not found", error.message, headers={**TRUST_HEADERS, **PAGE_HEADERS})
        if not wants_html(request):
            return PlainTextResponse(issue_markdown(issue), media_type=MARKDOWN, headers=TRUST_HEADERS)
        return page(f"Issue {issue['number']}", queue_pages.issue_body(issue),
                    description=f"Knowmesh service issue #{issue['number']} ({issue['status']}): {issue['title']}",
                    canonical=absolute(request, f"/issues/{int(issue['number'])}"), noindex=True,
                    headers={**TRUST_HEADERS, **PAGE_HEADERS})

    async def sitemap(request: Request) -> Response:
        """The fixed pages and every answered node; past SITEMAP_LIMIT URLs, an index of files
        (`?page=N`), each read from the store alone."""
        service = current()
        counts = await service.ecosystem_counts()
        fixed = ["/", "/nodes", *(ecosystem_href(c["ecosystem"]) for c in counts if c["nodes"] > c["open"]),
                 "/docs", *(f"/docs/{name}" for name in DOCS if doc_pages.load_doc(name) is not None)]
        files = browse_pages.sitemap_files(len(fixed) + sum(c["nodes"] - c["open"] for c in counts))
        number = request.query_params.get("page")
        if number is None and files > 1:
            xml = browse_pages.sitemap_index_xml(absolute(request, ""), files)
        else:
            number = 1 if number is None else to_int(number, "page", lowest=1, highest=files, what="a sitemap file number")
            pages, offset, limit = browse_pages.sitemap_slice(number, len(fixed))
            nodes = await service.answered_nodes(offset=offset, limit=limit) if limit else []
            xml = browse_pages.sitemap_xml(absolute(request, ""), fixed[pages], nodes)
        return Response(xml, media_type="application/xml", headers={"X-Content-Type-Options": "nosniff"})

    async def robots(request: Request) -> Response:
        text = f"User-agent: *\nDisallow: /mcp\nSitemap: {absolute(request, '/sitemap.xml')}\n"
        return PlainTextResponse(text, headers={"X-Content-Type-Options": "nosniff"})

    async def docs_index(request: Request) -> Response:
        return page("Documentation", doc_pages.docs_index_body(),
                    description="How agents search, read, verify, report and improve Knowmesh articles.",
                    canonical=absolute(request, "/docs"))

    async def doc_page(request: Request) -> Response:
        name = request.path_params["name"]
        markdown = doc_pages.load_doc(name)
        if markdown is None:
            return error_page(404, "Doc not found", f"There is no doc {name!r}. Docs: {', '.join(DOCS)}.")
        return page(doc_pages.doc_title(name, markdown), doc_pages.doc_body(name, markdown),
                    description=doc_pages.doc_summary(markdown), canonical=absolute(request, f"/docs/{name}"))

    async def doc_markdown(request: Request) -> Response:
        requested = request.path_params["name"]
        name = requested.removesuffix(".md")
        markdown = doc_pages.load_doc(name) if requested.endswith(".md") else None
        if markdown is None:
            raise doc_pages.doc_not_found(requested)
        return PlainTextResponse(markdown, media_type=MARKDOWN, headers={"X-Content-Type-Options": "nosniff"})

    return [
        Route("/", html_errors(home), methods=["GET"]),
        Route("/nodes", html_errors(nodes_index), methods=["GET"]),
        Route("/nodes/{rest:path}", html_errors(under_nodes), methods=["GET"]),
        Route("/review", html_errors(review_page), methods=["GET"]),
        Route("/issues", issues_index, methods=["GET"]),
        Route("/issues/{number}", issue_page, methods=["GET"]),
        Route("/sitemap.xml", sitemap, methods=["GET"]),
        Route("/robots.txt", robots, methods=["GET"]),
        Route("/docs", docs_index, methods=["GET"]),
        Route("/docs/{name}", doc_page, methods=["GET"]),
        Route("/v1/docs/{name}", doc_markdown, methods=["GET"]),
    ]
