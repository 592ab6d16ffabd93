"""Finding a node as a person: the front door (`/`), every node (`/nodes`), one ecosystem
(`/nodes/{ecosystem}`), search results (`/nodes?q=`) and the sitemap for search engines.

Data for the templates (`home.html`, `nodes.html`, `ecosystem.html`, `search.html`) only: the
routes in `pages` call the service and hand its results here. The sitemap lists only answered
nodes, because the spec keeps unanswered ones (noindex pages) out of search engines until
someone answers them.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import quote, urlencode

from knowmesh_mcp.search.ranking import LIKELY
from knowmesh_mcp.web.shell import PageLink, ecosystem_href, node_href, plural, render

# URLs one file of the sitemap holds: sitemaps.org allows 50,000, but a file is one request, and at
# 10,000 the biggest costs a server what a few page views do. Past it /sitemap.xml is an index of files.
SITEMAP_LIMIT = 10_000


def counts_line(counts: list[dict[str, Any]]) -> str:
    total = sum(c["nodes"] for c in counts)
    unsolved = sum(c["open"] for c in counts)
    return (
        f"{plural(total, 'problem')} in {plural(len(counts), 'ecosystem')}: "
        f"{total - unsolved} answered, {unsolved} open."
    )


# -- the front door -----------------------------------------------------------------------------


def home(counts: list[dict[str, Any]], unsolved: dict[str, Any], review_total: int, issues: int) -> dict[str, Any]:
    """What this is, a search box, the ecosystems, the open problems, and where to go next."""
    return {
        "counts": counts,
        "counts_line": counts_line(counts),
        "unsolved": unsolved,
        "review_total": review_total,
        "issues": issues,
    }


# -- /nodes -----------------------------------------------------------------------------------


def eco_anchor(ecosystem: str) -> str:
    return "eco-" + quote(ecosystem, safe="")


def index(counts: list[dict[str, Any]], nodes: list[dict[str, Any]] | None, states: dict[str, str]) -> dict[str, Any]:
    """Every node by ecosystem; for a mesh too big for one page (`nodes` None), the ecosystems,
    each linking to its own paged list."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for node in nodes or []:
        groups.setdefault(node["ecosystem"], []).append(node)
    return {
        "counts": [{**c, "anchor": eco_anchor(c["ecosystem"])} for c in counts],
        "counts_line": counts_line(counts),
        "groups": None
        if nodes is None
        else [{"ecosystem": eco, "anchor": eco_anchor(eco), "nodes": items} for eco, items in sorted(groups.items())],
        "states": states,
    }


def ecosystem_page_href(ecosystem: str, cursor: str | None = None) -> str:
    return ecosystem_href(ecosystem) + ("?" + urlencode({"cursor": cursor}) if cursor else "")


def ecosystem(
    name: str, listed: dict[str, Any], count: dict[str, Any] | None, states: dict[str, str], first_page: bool
) -> dict[str, Any]:
    """One page of one ecosystem's nodes, answered and open, with a link to the next."""
    pages: list[PageLink] = []
    if not first_page:
        pages.append(PageLink(ecosystem_page_href(name), None, "First page"))
    if listed["next_cursor"]:
        pages.append(PageLink(ecosystem_page_href(name, listed["next_cursor"]), "next", "Next page"))
    return {
        "ecosystem": name,
        "listed": listed,
        "count": count,
        "states": states,
        "first_page": first_page,
        "pages": pages,
    }


def ecosystem_description(ecosystem: str, count: dict[str, Any] | None) -> str:
    if not count:
        return f"Knowmesh problems in {ecosystem}."
    return (
        f"{count['nodes']} {ecosystem} errors coding agents hit, with answers, verify commands and evidence; "
        f"{count['open']} still open."
    )


# -- search results -------------------------------------------------------------------------------


def is_guess(score: Any) -> bool:
    """A score below 0.5 (`guess` beside it): such a result is more likely wrong than right."""
    return isinstance(score, (int, float)) and score < LIKELY


def search(q: str, env: str, envelope: dict[str, Any] | None, error: str | None = None) -> dict[str, Any]:
    """The form with the query kept, then the results best first (or the search's error message)."""
    results = [{**result, "guess": is_guess(result["score"])} for result in (envelope or {}).get("results", [])]
    weak = ((envelope or {}).get("guidance") or {}).get("reason") == "weak_match"
    return {"q": q, "env": env, "results": results, "weak": weak, "error": error}


# -- sitemap ----------------------------------------------------------------------------------------


def sitemap_files(urls: int) -> int:
    """How many files of at most SITEMAP_LIMIT URLs hold `urls` (at least one, if empty)."""
    return max(1, -(-urls // SITEMAP_LIMIT))


class SitemapSlice(NamedTuple):
    """What one sitemap file holds: a slice of the fixed pages, then `limit` answered nodes from `offset`."""

    pages: slice
    offset: int
    limit: int


def sitemap_slice(number: int, fixed: int) -> SitemapSlice:
    """File `number` (from 1) of the list "fixed pages, then answered nodes": which fixed pages it
    holds, and the offset and count of its nodes."""
    start, end = (number - 1) * SITEMAP_LIMIT, number * SITEMAP_LIMIT
    first_node = max(0, start - fixed)
    return SitemapSlice(slice(start, min(end, fixed)), first_node, max(0, end - fixed) - first_node)


def sitemap_xml(base: str, fixed: list[str], nodes: list[dict[str, Any]]) -> str:
    """A file of the sitemap (`sitemap.xml`): fixed pages and answered nodes (each with its last
    change); open problems stay out."""
    entries = [{"loc": base + path, "lastmod": None} for path in fixed]
    for node in nodes:
        lastmod = str(node.get("updated_at") or "")[:10]
        entries.append({"loc": base + node_href(node["id"]), "lastmod": lastmod if len(lastmod) == 10 else None})
    return render("sitemap.xml", entries=entries)


def sitemap_index_xml(base: str, files: int) -> str:
    """The sitemap index of a mesh too big for one file (`sitemap_index.xml`): `/sitemap.xml?page=N` for each file."""
    return render("sitemap_index.xml", files=[f"{base}/sitemap.xml?page={number}" for number in range(1, files + 1)])
