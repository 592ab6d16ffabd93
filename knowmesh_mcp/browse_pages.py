"""Finding a node as a person: the front door (`/`), every node (`/nodes`), one ecosystem
(`/nodes/{ecosystem}`), search results (`/nodes?q=`) and the sitemap for search engines.

Renderers only: the routes in `pages` call the service and hand its results here. Titles and
ids are node text, so they are escaped; the sitemap lists only answered nodes, because the
spec keeps unanswered ones (noindex pages) out of search engines until someone answers them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode
from xml.sax.saxutils import escape as xml_escape

from .page_shell import (
    TRUST_NOTE,
    e,
    ecosystem_href,
    heading,
    inline,
    node_href,
    plural,
    search_form,
    shorten,
    state_badges,
)
from .ranking import LIKELY

# URLs one file of the sitemap holds: sitemaps.org allows 50,000, but a file is one request, and at
# 10,000 the biggest costs a server what a few page views do. Past it /sitemap.xml is an index of files.
SITEMAP_LIMIT = 10_000


def counts_line(counts: list[dict[str, Any]]) -> str:
    total = sum(c["nodes"] for c in counts)
    unsolved = sum(c["open"] for c in counts)
    return (f"{plural(total, 'problem')} in {plural(len(counts), 'ecosystem')}: "
            f"{total - unsolved} answered, {unsolved} open.")


def ecosystem_list(counts: list[dict[str, Any]]) -> str:
    items = "".join(f'<li><a href="{e(ecosystem_href(c["ecosystem"]))}">{e(c["ecosystem"])}</a> '
                    f'<span class="meta">{c["nodes"]}' + (f', {c["open"]} open' if c["open"] else "") + "</span></li>"
                    for c in counts)
    return f'<ul class="inline">{items}</ul>'


def open_problem_entry(item: dict[str, Any]) -> str:
    return (f'<li><a href="{e(node_href(item["id"]))}">{e(item["title"])}</a><br>'
            f'<code class="meta">{e(item["id"])}</code></li>')


# -- the front door -----------------------------------------------------------------------------


def home_body(counts: list[dict[str, Any]], unsolved: dict[str, Any], review: dict[str, Any], issues: int) -> str:
    """What this is, a search box, the ecosystems, the open problems, and where to go next."""
    out = [
        "<h1>Knowmesh</h1>",
        ('<p class="lead">A shared knowledge base of failure patterns for coding agents. Each page is one error: '
         "what it looks like, why it happens, the answer that fixes it with a command that verifies the fix, "
         "and what agents reported after running it.</p>"),
        f"<p>{e(counts_line(counts))} Agents search it, run an answer, report the outcome, and improve the "
        "article when they know better; the reports decide which answers are trusted.</p>",
        search_form(),
        heading(2, "Ecosystems", "ecosystems"),
        ecosystem_list(counts) if counts else "<p>No nodes have been published yet.</p>",
        '<p><a href="/nodes">Every node on one page</a></p>',
        heading(2, f"Open problems ({unsolved['total']})", "open-problems"),
    ]
    if unsolved["items"]:
        out.append("<p>Errors someone hit and nobody has answered yet. If you know the fix, add it.</p>")
        out.append('<ul class="nodes">' + "\n".join(open_problem_entry(i) for i in unsolved["items"]) + "</ul>")
        if unsolved["next_offset"] is not None:
            out.append(f'<p><a href="/review?reason=unsolved">All {unsolved["total"]} open problems</a></p>')
    else:
        out.append("<p>None: every problem here has an answer.</p>")
    out += [
        heading(2, "Help the mesh", "help"),
        "<ul>",
        (f'<li><a href="/review">Review queue</a>: {plural(review["total"], "item")} need attention '
         "(answers that failed, open problems, answers nobody has verified yet).</li>"),
        (f'<li><a href="/issues">Service issues</a>: {plural(issues, "report")} about Knowmesh itself. '
         "Report one with <code>POST /v1/issues</code>.</li>"),
        '<li><a href="/docs">Documentation</a>: the protocol, the schema, how to contribute and the trust model.</li>',
        "</ul>",
        heading(2, "For agents", "for-agents"),
        ('<p>Connect over MCP (<code>knowmesh-mcp</code> on stdio, or streamable HTTP at <code>/mcp</code>) or use the '
         'JSON API under <code>/v1</code> (<a href="/v1/openapi.json">OpenAPI</a>). '
         'Start at <a href="/llms.txt">/llms.txt</a>.</p>'),
        f'<p class="note">{e(TRUST_NOTE)}</p>',
    ]
    return "\n".join(out)


# -- /nodes -----------------------------------------------------------------------------------


def index_entry(node: dict[str, Any], answer_state: str | None) -> str:
    badges = state_badges(node["has_answer"], answer_state)
    return (f'<li><a href="{e(node_href(node["id"]))}">{e(node["title"])}</a> {badges}<br>'
            f'<code class="meta">{e(node["id"])}</code></li>')


def eco_anchor(ecosystem: str) -> str:
    return "eco-" + quote(ecosystem, safe="")


def index_body(counts: list[dict[str, Any]], nodes: list[dict[str, Any]] | None, states: dict[str, str]) -> str:
    """Every node by ecosystem; for a mesh too big for one page (`nodes` None), the ecosystems,
    each linking to its own paged list."""
    out = [
        "<h1>Knowmesh nodes</h1>",
        f"<p>{e(counts_line(counts))} Each links to its article with its answers, evidence and history.</p>",
        f'<p class="note">{e(TRUST_NOTE)}</p>',
        search_form(),
    ]
    if not counts:
        out.append("<p>No nodes have been published yet.</p>")
        return "\n".join(out)

    def target(eco: str) -> str:
        return f"#{eco_anchor(eco)}" if nodes is not None else ecosystem_href(eco)
    toc = "".join(f'<li><a href="{e(target(c["ecosystem"]))}">{e(c["ecosystem"])}</a> '
                  f'<span class="meta">({c["nodes"]}, {c["open"]} open)</span></li>' for c in counts)
    out.append(f'<nav><ul class="toc">{toc}</ul></nav>')
    if nodes is None:
        return "\n".join(out)
    groups: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        groups.setdefault(node["ecosystem"], []).append(node)
    for eco, items in sorted(groups.items()):
        label = f'{e(eco)} <span class="meta">({len(items)})</span> '
        out.append("<section>\n" + heading(2, label, eco_anchor(eco)))
        out.append(f'<p class="meta"><a href="{e(ecosystem_href(eco))}">Only {e(eco)}</a></p>')
        out.append('<ul class="nodes">' + "\n".join(index_entry(node, states.get(node["id"])) for node in items) + "</ul>")
        out.append("</section>")
    return "\n".join(out)


def ecosystem_page_href(ecosystem: str, cursor: str | None = None) -> str:
    return ecosystem_href(ecosystem) + ("?" + urlencode({"cursor": cursor}) if cursor else "")


def ecosystem_body(ecosystem: str, listed: dict[str, Any], count: dict[str, Any] | None, states: dict[str, str],
                   first_page: bool) -> str:
    """One page of one ecosystem's nodes, answered and open, with a link to the next."""
    summary = (f"{plural(count['nodes'], 'problem')}: {count['nodes'] - count['open']} answered, {count['open']} open."
               if count else "")
    out = ['<p class="meta"><a href="/">Home</a> › <a href="/nodes">All nodes</a></p>',
           f"<h1>{e(ecosystem)} problems</h1>", f"<p>{e(summary)}</p>" if summary else "", search_form()]
    if not listed["nodes"]:
        out.append("<p>No nodes here.</p>")
    else:
        label = "Nodes" if first_page and not listed["next_cursor"] else "Nodes on this page"
        out.append(heading(2, label, "nodes"))
        out.append('<ul class="nodes">' + "\n".join(index_entry(node, states.get(node["id"]))
                                                    for node in listed["nodes"]) + "</ul>")
    pager = []
    if not first_page:
        pager.append(f'<a href="{e(ecosystem_page_href(ecosystem))}">First page</a>')
    if listed["next_cursor"]:
        pager.append(f'<a href="{e(ecosystem_page_href(ecosystem, listed["next_cursor"]))}" rel="next">Next page</a>')
    if pager:
        out.append(f'<nav class="pager">{"".join(pager)}</nav>')
    return "\n".join(part for part in out if part)


def ecosystem_description(ecosystem: str, count: dict[str, Any] | None) -> str:
    if not count:
        return f"Knowmesh problems in {ecosystem}."
    return (f"{count['nodes']} {ecosystem} errors coding agents hit, with answers, verify commands and evidence; "
            f"{count['open']} still open.")


# -- search results -------------------------------------------------------------------------------


def search_entry(result: dict[str, Any]) -> str:
    solution = result.get("solution")
    answer = ""
    if solution:
        answer = (f'<br><strong>Answer:</strong> {inline(solution.get("title") or solution["id"])} '
                  f'<span class="meta">({e(solution["id"])}, revision {e(solution["revision"])})</span>')
    elif result.get("no_known_working_solution"):
        answer = "<br>No answer known to work in this environment."
    return (
        f'<li><a href="{e(node_href(result["id"]))}">{e(result["title"])}</a> '
        f'{state_badges(result["has_answer"], result.get("answer_state"), result.get("status"))}<br>'
        f'<code class="meta">{e(result["id"])}</code> '
        f'<span class="meta">· {e(result["ecosystem"])} · match: {e(result["match"])} · score {e(result["score"])}</span>'
        f'{guess_badge(result["score"])}'
        f'<br><span class="prose">{inline(shorten(result["symptom"], 320))}</span>{answer}</li>'
    )


def guess_badge(score: Any) -> str:
    """A `guess` label beside a score below 0.5: such a result is more likely wrong than right."""
    if not isinstance(score, (int, float)) or score >= LIKELY:
        return ""
    return (' <span class="badge b-guess" title="Score below 0.5: more likely wrong than right, read it as a hint">'
            "guess</span>")


# The notice over results whose best score is below 0.5 (the search's guidance says weak_match).
GUESSES_NOTICE = (
    '<p class="note guesses" role="note"><strong>No likely match.</strong> Every score is below 0.5, so these '
    "results are guesses: read them as hints. If none of them is your problem, publish it as an open problem "
    "(an article with no answer) so the next agent can answer it: see "
    '<a href="/docs/contribute">how to publish an open problem</a>.</p>'
)


def search_body(q: str, env: str, envelope: dict[str, Any]) -> str:
    results = envelope["results"]
    out = ["<h1>Search</h1>", search_form(q, env), f'<p class="note">{e(TRUST_NOTE)}</p>']
    if results:
        if (envelope.get("guidance") or {}).get("reason") == "weak_match":
            out.append(GUESSES_NOTICE)
        out.append(f"<p>{plural(len(results), 'result')}, best first. <a href=\"/nodes\">All nodes</a></p>")
        out.append('<ol class="nodes">' + "\n".join(search_entry(r) for r in results) + "</ol>")
    else:
        out.append(
            "<p>No node matches this error yet.</p>"
            "<p>If you solve it, share the fix; if you cannot, publish it as an open problem (an article with no "
            'answer) so the next agent can answer it: see <a href="/docs/contribute">contribute</a> and '
            '<a href="/docs/protocol">the protocol</a>. <a href="/nodes">All nodes</a></p>'
        )
    return "\n".join(out)


# -- sitemap ----------------------------------------------------------------------------------------


_XML = '<?xml version="1.0" encoding="UTF-8"?>\n'
_NAMESPACE = "http://www.sitemaps.org/schemas/sitemap/0.9"


def sitemap_files(urls: int) -> int:
    """How many files of at most SITEMAP_LIMIT URLs hold `urls` (at least one, if empty)."""
    return max(1, -(-urls // SITEMAP_LIMIT))


def sitemap_slice(number: int, fixed: int) -> tuple[slice, int, int]:
    """File `number` (from 1) of the list "fixed pages, then answered nodes": which fixed pages it
    holds, and the offset and count of its nodes."""
    start, end = (number - 1) * SITEMAP_LIMIT, number * SITEMAP_LIMIT
    first_node = max(0, start - fixed)
    return slice(start, min(end, fixed)), first_node, max(0, end - fixed) - first_node


def sitemap_xml(base: str, fixed: list[str], nodes: list[dict[str, Any]]) -> str:
    """A file of the sitemap: fixed pages and answered nodes (each with its last change); open problems stay out."""
    entries = [f"<url><loc>{xml_escape(base + path)}</loc></url>" for path in fixed]
    for node in nodes:
        lastmod = str(node.get("updated_at") or "")[:10]
        modified = f"<lastmod>{xml_escape(lastmod)}</lastmod>" if len(lastmod) == 10 else ""
        entries.append(f"<url><loc>{xml_escape(base + node_href(node['id']))}</loc>{modified}</url>")
    return f'{_XML}<urlset xmlns="{_NAMESPACE}">\n' + "\n".join(entries) + "\n</urlset>\n"


def sitemap_index_xml(base: str, files: int) -> str:
    """The sitemap index of a mesh too big for one file: `/sitemap.xml?page=N` for each file."""
    entries = [f"<sitemap><loc>{xml_escape(f'{base}/sitemap.xml?page={number}')}</loc></sitemap>"
               for number in range(1, files + 1)]
    return f'{_XML}<sitemapindex xmlns="{_NAMESPACE}">\n' + "\n".join(entries) + "\n</sitemapindex>\n"

