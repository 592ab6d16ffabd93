"""Documentation for people: `/docs`, `/docs/{doc}` (HTML) over the Markdown of `/v1/docs/{doc}.md`.

The docs are Markdown shipped in the package (`knowmesh_mcp/docs/`), rendered with
markdown-it-py with raw HTML disabled and script or data URLs refused, so a doc (or a Markdown
body rendered the same way) can never put markup of its own on a page. That rendered HTML is
the one thing the `doc.html` template is handed as `Markup`; everything else it and
`docs_index.html` show is escaped. Headings get ids and a `#` link, so a section can be linked to.
"""

from __future__ import annotations

import re
from importlib.resources import files
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.web.shell import slug

# The documents of protocol.md's Discovery section, in reading order.
DOCS = ("protocol", "schema", "contribute", "autonomy", "feedback", "trust", "mcp")


def load_doc(name: str) -> str | None:
    """The Markdown of one allow-listed doc shipped in the package, or None."""
    if name not in DOCS:
        return None
    try:
        return (files("knowmesh_mcp") / "docs" / f"{name}.md").read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError, OSError, UnicodeDecodeError):
        return None


def doc_title(name: str, markdown: str | None) -> str:
    for line in (markdown or "").splitlines():
        if line.startswith("# "):
            return line[2:].strip() or name
    return name


def doc_summary(markdown: str | None) -> str:
    """The first paragraph of a doc that is not a heading: its meta description."""
    for block in (markdown or "").split("\n\n"):
        text = block.strip()
        if text and not text.startswith(("#", "```", "|", "-", "<")):
            return text
    return "Knowmesh documentation"


_DOC_LINK = re.compile(r"^(?:\./|/v1/docs/|docs/|/docs/)?(?P<name>[a-z]+)\.md(?P<fragment>#[^\s]*)?$")


def _rewrite_doc_links(tokens: list[Token]) -> None:
    """Links between docs (`schema.md`, `/v1/docs/schema.md`) point at their HTML pages."""
    for token in tokens:
        if token.children:
            _rewrite_doc_links(token.children)
        if token.type == "link_open":
            match = _DOC_LINK.match(str(token.attrGet("href") or ""))
            if match and match["name"] in DOCS:
                token.attrSet("href", f"/docs/{match['name']}{match['fragment'] or ''}")


def _anchor_headings(tokens: list[Token]) -> None:
    """Each heading gets an id from its text (unique on the page) and a trailing `#` link to it."""
    used: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token.type != "heading_open" or index + 1 >= len(tokens):
            continue
        content = tokens[index + 1]
        base = slug(content.content)
        used[base] = used.get(base, 0) + 1
        anchor_id = base if used[base] == 1 else f"{base}-{used[base]}"
        token.attrSet("id", anchor_id)
        link = Token("link_open", "a", 1)
        link.attrs = {"class": "anchor", "href": f"#{anchor_id}", "aria-label": "Link to this section"}
        mark = Token("text", "", 0)
        mark.content = "#"
        content.children = [*(content.children or []), link, mark, Token("link_close", "a", -1)]


# Schemes a link or image may never point at: they run script or smuggle a document (markdown-it's own
# check lets data:image/... through; no page here needs it).
_UNSAFE_SCHEME = re.compile(r"^(?:javascript|vbscript|data|file):")
_URL_NOISE = re.compile(r"[\x00-\x20\x7f-\x9f]+")


def safe_link(url: str) -> bool:
    """False for a `javascript:`, `vbscript:`, `data:` or `file:` URL however it is spelled (case,
    whitespace and control characters are dropped first, as browsers do)."""
    return not _UNSAFE_SCHEME.match(_URL_NOISE.sub("", url).lower())


def render_markdown(markdown: str, *, anchors: bool = True) -> str:
    """Markdown to HTML; raw HTML in the source is shown as text, never passed through, and no
    link or image points at a script or data URL."""
    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    renderer.validateLink = safe_link  # type: ignore[method-assign]
    tokens = renderer.parse(markdown)
    _rewrite_doc_links(tokens)
    if anchors:
        _anchor_headings(tokens)
    return renderer.renderer.render(tokens, renderer.options, {})


def docs_index() -> dict[str, Any]:
    """The installed docs, in reading order, as (name, title)."""
    return {"docs": [(name, doc_title(name, markdown)) for name in DOCS if (markdown := load_doc(name)) is not None]}


def doc(name: str, markdown: str) -> dict[str, Any]:
    """A doc's page: its HTML from `render_markdown` (sanitized: raw HTML off, unsafe links refused) as `Markup`."""
    return {"name": name, "article": Markup(render_markdown(markdown))}  # sanitized by render_markdown


def doc_not_found(name: str) -> KnowmeshError:
    return KnowmeshError(404, "doc_not_found", f"no doc {name!r}; docs: {', '.join(DOCS)}", docs=list(DOCS))
