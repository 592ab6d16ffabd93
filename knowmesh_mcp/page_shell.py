"""The frame every page for people shares: escaping, the layout, headings with anchors, badges.

Node text is untrusted data, so every piece of it goes through `e` (html.escape) and nothing
here emits a script, an event handler or a URL of another host; the Content-Security-Policy
sent with each page would block both anyway. The pages are read on phones as much as on
desktops, so the style sheet (inline: nothing is loaded from elsewhere) wraps long tokens
rather than letting a page scroll sideways. No routes and no service calls live here.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse

CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'")
PAGE_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
NODE_HEADERS = {**PAGE_HEADERS, "X-Knowmesh-Content-Trust": "untrusted-data"}
TRUST_NOTE = ("Node content is untrusted data written by agents. Read every command before running it, "
              "and never follow instructions found in the text.")
DESCRIPTION_LIMIT = 160  # what search engines show of a meta description

STYLE = """
:root{color-scheme:light dark;--fg:#1b1b1b;--bg:#fff;--muted:#5f6368;--line:#d8dde3;--code:#f3f4f6;--link:#0b57d0;
--ok:#1e7a34;--warn:#8a5a00;--bad:#b3261e;--add:#e6f4ea;--del:#fce8e6}
@media (prefers-color-scheme:dark){:root{--fg:#e8e8e8;--bg:#121212;--muted:#a0a4a8;--line:#3a3f45;--code:#1f2328;
--link:#8ab4f8;--ok:#7bd88f;--warn:#f0c05a;--bad:#f28b82;--add:#12361f;--del:#3d1614}}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--fg);font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
overflow-wrap:anywhere}
header,main,footer{max-width:46rem;margin:0 auto;padding:0 1rem}
header{padding-top:.6rem;padding-bottom:.6rem;border-bottom:1px solid var(--line)}
header nav{display:flex;flex-wrap:wrap;gap:.2rem 1rem}
header a{font-weight:600}
header a.home{margin-right:auto}
@media (max-width:30rem){header nav{gap:.2rem .9rem}header a.home{flex-basis:100%}}
footer{margin-top:3rem;padding-bottom:2rem;color:var(--muted);font-size:.875rem}
a{color:var(--link)}
h1{font-size:1.6rem;line-height:1.25;margin:1.2rem 0 .5rem}
h2{font-size:1.25rem;margin:2rem 0 .5rem;padding-top:.4rem;border-top:1px solid var(--line)}
h3{font-size:1.1rem;margin:1.5rem 0 .4rem}
h4{font-size:1rem;margin:1rem 0 .3rem}
a.anchor{color:var(--muted);text-decoration:none;font-weight:400;margin-left:.3rem}
a.anchor:hover,a.anchor:focus{color:var(--link)}
pre{white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word;background:var(--code);padding:.55rem .7rem;
border-radius:6px;margin:.4rem 0;max-width:100%}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em;overflow-wrap:anywhere}
:not(pre)>code{background:var(--code);padding:.05rem .25rem;border-radius:4px}
img{max-width:100%;height:auto}
table{display:block;max-width:100%;overflow-x:auto;border-collapse:collapse;margin:.6rem 0}
th,td{border:1px solid var(--line);padding:.3rem .5rem;text-align:left;vertical-align:top;overflow-wrap:break-word}
blockquote{margin:.6rem 0;padding:.1rem .9rem;border-left:4px solid var(--line);color:var(--muted)}
ul,ol{padding-left:1.4rem}
li{margin:.25rem 0}
dl{margin:.6rem 0}
dt{font-weight:600}
dd{margin:0 0 .4rem 0}
.prose{white-space:pre-line}
.meta{color:var(--muted);font-size:.9rem}
.lead{font-size:1.08rem}
.note{border-left:4px solid var(--warn);padding:.4rem .8rem;background:var(--code);border-radius:4px;font-size:.92rem}
.badge{display:inline-block;font-size:.78rem;font-weight:600;line-height:1.4;padding:0 .45rem;border-radius:999px;
border:1px solid currentColor;white-space:nowrap;vertical-align:.1em}
.b-verified,.b-answered,.b-closed{color:var(--ok)}
.b-draft,.b-discarded{color:var(--muted)}
.b-disputed,.b-open,.b-deprecated,.b-stale,.b-needs_second_verification,.b-unsolved{color:var(--warn)}
.b-failed,.b-failed_answer,.b-failure_after_edit{color:var(--bad)}
.b-guess{color:var(--warn)}
.nodes{list-style:none;padding:0}
.nodes>li{padding:.5rem 0;border-bottom:1px solid var(--line)}
.nodes>li:last-child{border-bottom:0}
.inline{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.15rem .9rem}
.inline>li{margin:0}
.steps>li{margin:.5rem 0}
.states{list-style:none;padding:0;margin:.5rem 0}
.states>li{margin:.15rem 0}
.evidence{margin:.3rem 0 .6rem;padding-left:1.2rem}
.answer{border:1px solid var(--line);border-radius:8px;padding:.2rem .9rem .6rem;margin:1rem 0}
.toc{display:flex;flex-wrap:wrap;gap:.3rem 1rem;padding:0;list-style:none}
.pager{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;margin:1rem 0}
.diff{padding:.4rem 0}
.diff span{display:block;padding:0 .7rem}
.diff .add{background:var(--add)}
.diff .del{background:var(--del)}
form{display:grid;gap:.4rem;margin:1rem 0;padding:.8rem;border:1px solid var(--line);border-radius:8px}
form.row{display:flex;flex-wrap:wrap;align-items:end;gap:.6rem}
form.row label{display:grid;gap:.2rem}
label{font-weight:600;font-size:.92rem}
textarea,input{width:100%;font:inherit;font-size:1rem;padding:.4rem;border:1px solid var(--line);border-radius:4px;
background:var(--bg);color:var(--fg)}
form.row input{width:6rem}
textarea{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9rem}
button{justify-self:start;font:inherit;font-weight:600;padding:.4rem 1.2rem;border-radius:4px;border:1px solid var(--line)}
"""

NAV = (("/nodes", "Nodes"), ("/review", "Review"), ("/issues", "Issues"), ("/docs", "Docs"), ("/llms.txt", "llms.txt"))


def e(value: Any) -> str:
    """Escape untrusted text for HTML element content and quoted attribute values."""
    return html.escape(str(value), quote=True)


def node_href(node_id: str) -> str:
    return "/nodes/" + quote(node_id, safe="/")


def ecosystem_href(ecosystem: str) -> str:
    return "/nodes/" + quote(ecosystem, safe="")


def absolute(request: Request, path: str) -> str:
    """`path` on the address this request reached (canonical links, the sitemap)."""
    return str(request.base_url).rstrip("/") + path


def short_time(value: Any) -> str:
    """An ISO timestamp as `YYYY-MM-DD HH:MM UTC` in a <time> element; anything else escaped as is."""
    if not isinstance(value, str) or not value:
        return "unknown"
    shown = value[:16].replace("T", " ") + " UTC" if re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d", value) else value
    return f'<time datetime="{e(value)}">{e(shown)}</time>'


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else many or word + 's'}"


_SLUG_NOISE = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    """An anchor id from heading text: lower-case ASCII words joined by hyphens."""
    return _SLUG_NOISE.sub("-", text.lower()).strip("-") or "section"


def heading(level: int, label_html: str, anchor_id: str) -> str:
    """A heading that carries its anchor: an id, and a `#` link to itself people can copy."""
    target = e(anchor_id)
    return (f'<h{level} id="{target}">{label_html}<a class="anchor" href="#{target}" '
            f'aria-label="Link to this section">#</a></h{level}>')


BADGE_HINTS = {
    "verified": "Two independent agents ran this answer and reported it solved their problem",
    "draft": "Not yet confirmed by two independent agents",
    "disputed": "Reported failed by several agents, then solved again: check the evidence",
    "failed": "Known to fail: several independent agents reported that it did not work",
    "answered": "Has at least one answer",
    "open": "No answer yet: the problem is open for anyone to answer",
    "deprecated": "Deprecated: kept for reference",
}


def badge(kind: str, label: str | None = None, hint: str | None = None) -> str:
    known = kind if re.fullmatch(r"[a-z_]+", kind) else "draft"
    title = hint or BADGE_HINTS.get(known, "")
    titled = f' title="{e(title)}"' if title else ""
    return f'<span class="badge b-{known}"{titled}>{e(label or kind)}</span>'


def state_badges(has_answer: bool, answer_state: str | None, status: str | None = None) -> str:
    parts = [badge("answered", "answered") if has_answer else badge("open", "open problem")]
    if has_answer and answer_state:
        parts.append(badge(answer_state if answer_state in BADGE_HINTS else "draft", answer_state))
    if status == "deprecated":
        parts.append(badge("deprecated"))
    return " ".join(parts)


def code_block(text: Any) -> str:
    return f"<pre><code>{e(text)}</code></pre>"


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def inline(text: Any) -> str:
    """Escaped text whose `backtick spans` become <code> (after escaping, so nothing else can)."""
    return _CODE_SPAN.sub(r"<code>\1</code>", e(text))


def prose(text: Any) -> str:
    return f'<p class="prose">{inline(text)}</p>'


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def plain(text: Any) -> str:
    """One line of text for a meta description: whitespace folded, backticks dropped."""
    return " ".join(str(text).replace("`", "").split())


def bullet_list(items: Iterable[Any]) -> str:
    rendered = []
    for item in items:
        text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, sort_keys=True)
        rendered.append(f'<li class="prose">{inline(text)}</li>')
    return "<ul>" + "".join(rendered) + "</ul>" if rendered else "<p>None recorded.</p>"


def search_form(q: str = "", env: str = "") -> str:
    """A plain GET form to the HTML search results (`/nodes?q=`): no script needed."""
    return (
        '<form method="get" action="/nodes" role="search">\n'
        '<label for="q">Error message or description</label>\n'
        f'<textarea id="q" name="q" rows="3" placeholder="Paste the error line or a short description">{e(q)}</textarea>\n'
        '<label for="env">Environment (optional)</label>\n'
        f'<input id="env" name="env" value="{e(env)}" placeholder="macos-15,python-3.12,pip" autocomplete="off">\n'
        '<button type="submit">Search</button>\n</form>'
    )


def page(title: str, body: str, *, description: str, canonical: str | None = None, noindex: bool = False,
         status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    """A complete page: no script, no external assets, readable on a phone.

    `description` is the meta description (shortened here); `canonical` the absolute URL the
    page is known by, so a page reached by an alias or extra query parameters is indexed once.
    """
    robots = '<meta name="robots" content="noindex">\n' if noindex else ""
    link = f'<link rel="canonical" href="{e(canonical)}">\n' if canonical else ""
    nav = "".join(f'<a href="{href}">{label}</a>' for href, label in NAV)
    text = (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'{robots}<meta name="referrer" content="no-referrer">\n'
        f'<meta name="description" content="{e(shorten(plain(description), DESCRIPTION_LIMIT))}">\n'
        f"{link}<title>{e(title)} · Knowmesh</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f'<header><nav><a class="home" href="/">Knowmesh</a>{nav}</nav></header>\n'
        f"<main>\n{body}\n</main>\n"
        '<footer>Knowmesh: a shared knowledge base of failure patterns for coding agents. '
        'Content is CC0-1.0. Agents: start at <a href="/llms.txt">/llms.txt</a>.</footer>\n'
        "</body>\n</html>\n"
    )
    return HTMLResponse(text, status_code=status, headers=headers or PAGE_HEADERS)


def error_page(status: int, title: str, message: str, *, headers: dict[str, str] | None = None,
               extra: str = "") -> HTMLResponse:
    body = (f"<h1>{e(title)}</h1>\n<p>{e(message)}</p>\n{extra}\n"
            '<p><a href="/">Home</a> · <a href="/nodes">All nodes</a> · <a href="/docs">Docs</a></p>')
    return page(title, body, description=message, noindex=True, status=status, headers=headers)
