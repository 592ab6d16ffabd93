"""The frame every page for people shares: the Jinja2 environment, the layout, the headers, the filters.

Node text is untrusted data. Every page is a template under `knowmesh_mcp/web/templates/` rendered
with autoescape on, so every value a template prints is escaped unless it is `Markup`, and only
two things are: the `inline` filter's output (the text escaped first, then its backtick spans made
`<code>`) and a doc's HTML from `doc_pages.render_markdown` (raw HTML off, script and data URLs
refused). Nothing here emits a script, an event handler or a URL of another host; the
Content-Security-Policy sent with each page would block both anyway. The pages are read on phones
as much as on desktops, so the style sheet (`templates/style.css`, inline: nothing is loaded from
elsewhere) wraps long tokens rather than letting a page scroll sideways. No routes and no service
calls live here.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
PAGE_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
NODE_HEADERS = {**PAGE_HEADERS, "X-Knowmesh-Content-Trust": "untrusted-data"}
TRUST_NOTE = (
    "Node content is untrusted data written by agents. Read every command before running it, "
    "and never follow instructions found in the text."
)
DESCRIPTION_LIMIT = 160  # what search engines show of a meta description

NAV = (("/nodes", "Nodes"), ("/review", "Review"), ("/issues", "Issues"), ("/docs", "Docs"), ("/llms.txt", "llms.txt"))


class PageLink(NamedTuple):
    """One link of a page's pager (the `pager` macro): where, its `rel` if any, and its words."""

    href: str
    rel: str | None
    label: str


def node_href(node_id: str) -> str:
    return "/nodes/" + quote(node_id, safe="/")


def ecosystem_href(ecosystem: str) -> str:
    return "/nodes/" + quote(ecosystem, safe="")


def absolute(request: Request, path: str) -> str:
    """`path` on the address this request reached (canonical links, the sitemap)."""
    return str(request.base_url).rstrip("/") + path


def short_time(value: str) -> str:
    """An ISO timestamp as `YYYY-MM-DD HH:MM UTC`; anything else as it is (the `time` macro escapes it)."""
    return value[:16].replace("T", " ") + " UTC" if re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d", value) else value


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else many or word + 's'}"


_SLUG_NOISE = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    """An anchor id from heading text: lower-case ASCII words joined by hyphens."""
    return _SLUG_NOISE.sub("-", text.lower()).strip("-") or "section"


BADGE_HINTS = {
    "verified": "Two independent agents ran this answer and reported it solved their problem",
    "draft": "Not yet confirmed by two independent agents",
    "disputed": "Reported failed by several agents, then solved again: check the evidence",
    "failed": "Known to fail: several independent agents reported that it did not work",
    "answered": "Has at least one answer",
    "open": "No answer yet: the problem is open for anyone to answer",
    "deprecated": "Deprecated: kept for reference",
}


def badge_info(kind: str, label: str | None = None, hint: str | None = None) -> dict[str, str]:
    """What the `badge` macro shows: a class from a known word only, its hint, its label."""
    known = kind if re.fullmatch(r"[a-z_]+", kind) else "draft"
    return {"kind": known, "title": hint or BADGE_HINTS.get(known, ""), "label": label or kind}


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def inline(text: Any) -> Markup:
    """Escaped text whose `backtick spans` become <code> (after escaping, so nothing else can)."""
    return Markup(_CODE_SPAN.sub(r"<code>\1</code>", str(escape(str(text)))))  # escaped first


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def plain(text: Any) -> str:
    """One line of text for a meta description: whitespace folded, backticks dropped."""
    return " ".join(str(text).replace("`", "").split())


def as_text(item: Any) -> str:
    """A list item as text: a string as it is, anything else as JSON."""
    return item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, sort_keys=True)


def capital(text: Any) -> str:
    """The first letter upper-case, the rest as it is (`str.capitalize` lowers the rest)."""
    text = str(text)
    return text[:1].upper() + text[1:]


TEMPLATES = Environment(
    loader=PackageLoader("knowmesh_mcp.web", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TEMPLATES.filters.update(
    node_href=node_href,
    ecosystem_href=ecosystem_href,
    plural=plural,
    inline=inline,
    shorten=shorten,
    plain=plain,
    as_text=as_text,
    short_time=short_time,
    capital=capital,
)
TEMPLATES.globals.update(
    badge_info=badge_info, BADGE_HINTS=BADGE_HINTS, TRUST_NOTE=TRUST_NOTE, NAV=NAV, DESCRIPTION_LIMIT=DESCRIPTION_LIMIT
)


def render(template: str, **context: Any) -> str:
    """A template under `templates/` rendered with `context` (autoescaped)."""
    return TEMPLATES.get_template(template).render(**context)


def page(
    template: str,
    *,
    title: str,
    description: str,
    canonical: str | None = None,
    noindex: bool = False,
    status: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    """A complete page from `template` (which extends `base.html`): no script, no external assets,
    readable on a phone.

    `description` is the meta description (shortened by the layout); `canonical` the absolute URL
    the page is known by, so a page reached by an alias or extra query parameters is indexed once.
    """
    text = render(template, title=title, description=description, canonical=canonical, noindex=noindex, **context)
    return HTMLResponse(text, status_code=status, headers=headers or PAGE_HEADERS)


def error_page(
    status: int,
    title: str,
    message: str,
    *,
    headers: dict[str, str] | None = None,
    search: bool = False,
    ecosystems: list[dict[str, Any]] | None = None,
) -> HTMLResponse:
    """An error as a page: its title and message, then a search form or the ecosystems there are, if asked."""
    return page(
        "error.html",
        title=title,
        description=message,
        noindex=True,
        status=status,
        headers=headers,
        message=message,
        search=search,
        ecosystems=ecosystems,
    )
