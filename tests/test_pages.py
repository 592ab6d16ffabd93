"""Pages for people over a real HTTP server: /nodes, /nodes/{id}, /docs, /v1/docs/{doc}.md.

Node text is untrusted: it must come out escaped, pages carry no script and load nothing from
other hosts, unanswered problems are noindex, and bad ids are HTML 404s rather than 500s.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from importlib.resources import files
from typing import Any

import httpx2
import pytest
from markupsafe import escape

from knowmesh_mcp.web import doc_pages
from knowmesh_mcp.web import pages
from knowmesh_mcp.services.import_export import load_documents
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.store import store_dir

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

NODE = "python/module-not-found-venv"
MAC = {"os": "macos-15", "runtime": "python-3.12", "pkg_manager": "pip"}
HOSTILE_TAG = "<script>alert(1)</script>"
HOSTILE_ATTR = '"><img src=x onerror=alert(1)>'
DOC_NAMES = ("protocol", "schema", "contribute", "autonomy", "feedback", "trust", "mcp")


def rust_doc(make_doc) -> dict[str, Any]:
    base = make_doc()
    return make_doc(
        id="rust/borrow-of-moved-value",
        ecosystem="rust",
        title="borrow of moved value in a loop",
        signature={"error": "error[E0382]: borrow of moved value: `items`"},
        content={**base["content"], "solutions": [{
            "id": "clone-or-borrow", "title": "Borrow instead of moving",
            "fix": ["for item in &items { ... }"], "verify": {"command": "cargo build", "expected": "exit 0"},
        }], "failed_attempts": []},
    )


def open_problem(make_doc, **overrides: Any) -> dict[str, Any]:
    base = make_doc()
    document = make_doc(
        id="python/requests-import-fails-after-reinstall",
        title="ImportError for requests after reinstalling inside a pyenv venv",
        error="ImportError: cannot import name 'Session' from partially initialized module 'requests'",
        content={**base["content"], "solutions": [], "failed_attempts": ["pip install --force-reinstall requests"]},
    )
    return {**document, **overrides}


def solved_report(agent: str) -> dict[str, Any]:
    return {"node": NODE, "solution": "venv-macos", "outcome": "solved", "env": MAC, "agent": {"id": agent},
            "evidence": {"verify": ".venv/bin/python -c 'import requests'", "exit_code": 0}}


def escaped(text: str) -> str:
    """`text` as the pages' templates escape it (Jinja2 autoescape: `&#34;` and `&#39;` for quotes)."""
    return str(escape(text))


def robots_noindex(text: str) -> bool:
    return '<meta name="robots" content="noindex">' in text


class Tags(HTMLParser):
    """Every start tag of a page with its attributes, as a browser's tokenizer sees them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def elsewhere(url: str | None) -> bool:
    return bool(re.match(r"^\s*(?:[a-z][a-z0-9+.-]*:|//|\\\\)", url or "", re.IGNORECASE))


def origin(response: httpx2.Response) -> str:
    return f"{response.request.url.scheme}://{response.request.url.netloc.decode()}"


def canonical_of(response: httpx2.Response) -> str | None:
    links = [attrs.get("href") for tag, attrs in Tags(response.text).tags if tag == "link" and attrs.get("rel") == "canonical"]
    assert len(links) <= 1, links
    return links[0] if links else None


def description_of(response: httpx2.Response) -> str | None:
    found = [attrs.get("content") for tag, attrs in Tags(response.text).tags
             if tag == "meta" and attrs.get("name") == "description"]
    assert len(found) == 1, found
    return found[0]


def has_heading(text: str, label: str, level: int = 2) -> bool:
    """A heading with its anchor: an id and a `#` link to it."""
    return re.search(rf'<h{level} id="([^"]+)">{re.escape(label)}<a class="anchor" href="#\1"', text) is not None


def assert_safe_page(response: httpx2.Response, *, docs: bool = False) -> None:
    """A page for people: HTML, no script, nothing loaded from elsewhere, the CSP header, phone-ready,
    a meta description, and (a page that is not an error) one canonical link on this site."""
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    text = response.text
    assert text.startswith("<!doctype html>")
    assert '<meta charset="utf-8">' in text
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    assert "<script" not in text.lower() and "@import" not in text and "url(" not in text
    assert description_of(response)
    canonical = canonical_of(response)
    assert canonical is not None or response.status_code >= 400
    assert canonical is None or canonical.startswith(origin(response) + "/"), canonical
    for tag, attrs in Tags(text).tags:
        assert tag not in {"script", "iframe", "object", "embed", "img", "base", "frame"}, (tag, attrs)
        assert tag != "link" or attrs.get("rel") == "canonical", (tag, attrs)  # a stylesheet would load something
        if tag == "link":
            continue
        assert not any(name.startswith("on") or name in {"style", "srcset"} for name in attrs), (tag, attrs)
        for name in ("src", "action", "formaction", "data", "poster"):
            assert name not in attrs or not elsewhere(attrs[name]), (tag, attrs)
        if "href" in attrs:
            # Our pages link only within the site; a doc may link out (https), never to a script URL.
            external = elsewhere(attrs["href"])
            assert not external or (docs and tag == "a" and attrs["href"].startswith("https://")), (tag, attrs)
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "base-uri 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"


async def test_index_lists_every_node_grouped_by_ecosystem(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc())
    await service.creation.create_node(open_problem(make_doc))
    await service.creation.create_node(rust_doc(make_doc))
    for agent in ("agent-s1", "agent-s2"):
        await service.outcomes.report_outcome(solved_report(agent))

    response = await http.get("/nodes")
    assert response.status_code == 200
    assert_safe_page(response)
    assert response.headers["x-knowmesh-content-trust"] == "untrusted-data"
    text = response.text
    assert not robots_noindex(text)
    assert "3 problems in 2 ecosystems: 2 answered, 1 open" in text
    python_at, rust_at = text.index('<h2 id="eco-python">'), text.index('<h2 id="eco-rust">')
    assert canonical_of(response) == origin(response) + "/nodes"
    assert python_at < rust_at
    python_section, rust_section = text[python_at:rust_at], text[rust_at:]
    assert f'href="/nodes/{NODE}"' in python_section
    assert 'href="/nodes/python/requests-import-fails-after-reinstall"' in python_section
    assert 'href="/nodes/rust/borrow-of-moved-value"' in rust_section and "/nodes/python/" not in rust_section
    assert 'href="#eco-python"' in text and 'href="#eco-rust"' in text

    def entry(node_id: str) -> str:
        start = text.index(f'href="/nodes/{node_id}"')
        return text[start:text.index("</li>", start)]

    verified = entry(NODE)
    assert escaped(make_doc()["title"]) in verified and "answered" in verified and "verified" in verified
    unsolved = entry("python/requests-import-fails-after-reinstall")
    assert "open problem" in unsolved and "verified" not in unsolved
    assert "draft" in entry("rust/borrow-of-moved-value")


async def test_index_walks_every_page_of_the_list(service: Mesh, http: httpx2.AsyncClient, make_doc):
    base = make_doc()
    def word(n: int) -> str:  # numbers are values to the normalizer; distinct words are distinct errors
        return "".join("abcdefghij"[int(digit)] for digit in f"{n:03d}")

    documents = [make_doc(id=f"python/many-{n:03d}", title=f"Many {n:03d}", error=f"ValueError: widget{word(n)} broke",
                          content={**base["content"], "solutions": base["content"]["solutions"][:1]})
                 for n in range(pages.LIST_PAGE + 5)]
    report = await service.documents.import_documents([(f"doc-{n}", d) for n, d in enumerate(documents)])
    assert len(report.created) == len(documents)
    text = (await http.get("/nodes")).text
    assert all(f'href="/nodes/python/many-{n:03d}"' in text for n in range(len(documents)))


async def test_a_big_mesh_pages_per_ecosystem(service: Mesh, http: httpx2.AsyncClient, make_doc, monkeypatch):
    monkeypatch.setattr(pages, "INLINE_LIMIT", 2)
    monkeypatch.setattr(pages, "ECOSYSTEM_PAGE", 1)
    await service.creation.create_node(make_doc())
    await service.creation.create_node(open_problem(make_doc))
    await service.creation.create_node(rust_doc(make_doc))

    index = (await http.get("/nodes")).text
    assert "3 problems in 2 ecosystems: 2 answered, 1 open" in index
    assert 'href="/nodes/python"' in index and "(2, 1 open)" in index
    assert f'href="/nodes/{NODE}"' not in index, "a big mesh lists ecosystems, not every node"

    first = await http.get("/nodes/python")
    assert_safe_page(first)
    assert canonical_of(first) == origin(first) + "/nodes/python"
    older = await http.get("/nodes", params={"ecosystem": "py"})  # the older address, by an alias: the same page
    assert older.status_code == 200 and canonical_of(older) == origin(first) + "/nodes/python"
    assert f'href="/nodes/{NODE}"' in first.text and "requests-import-fails" not in first.text
    [next_href] = re.findall(r'href="([^"]+)" rel="next"', first.text)
    second = (await http.get(html.unescape(next_href))).text
    assert 'href="/nodes/python/requests-import-fails-after-reinstall"' in second and "open problem" in second
    assert 'rel="next"' not in second
    assert canonical_of(await http.get(html.unescape(next_href))) == origin(first) + html.unescape(next_href)
    bad = await http.get("/nodes/python", params={"cursor": "!!!"})
    assert bad.status_code == 400 and bad.headers["content-type"].startswith("text/html")
    assert_safe_page(bad)


async def test_index_of_an_empty_mesh(http: httpx2.AsyncClient):
    response = await http.get("/nodes")
    assert response.status_code == 200 and "No nodes have been published yet." in response.text


async def test_search_form_shows_results_instead_of_the_list(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc())
    await service.creation.create_node(rust_doc(make_doc))
    listing = await http.get("/nodes")
    assert '<form method="get" action="/nodes" role="search">' in listing.text
    assert 'name="q"' in listing.text and 'name="env"' in listing.text

    query = "ModuleNotFoundError: No module named 'requests'"
    response = await http.get("/nodes", params={"q": query, "env": "macos-15,python-3.12,pip"})
    assert response.status_code == 200
    assert_safe_page(response)
    text = response.text
    assert robots_noindex(text)  # result pages are not for search engines
    assert f'href="/nodes/{NODE}"' in text and "rust/borrow-of-moved-value" not in text
    assert "Use the venv interpreter (macOS)" in text  # the one answer for this environment
    assert escaped(query) in text and 'value="macos-15,python-3.12,pip"' in text  # the form keeps the query
    assert '<h2 id="eco-python">' not in text

    nothing = await http.get("/nodes", params={"q": "zzqx wobble frobnicate"})
    assert nothing.status_code == 200 and "No node matches this error yet." in nothing.text
    assert 'href="/docs/contribute"' in nothing.text
    blank = await http.get("/nodes", params={"q": "   "})
    assert '<h2 id="eco-python">' in blank.text  # a blank query is the whole list

    hostile = await http.get("/nodes", params={"q": HOSTILE_ATTR + HOSTILE_TAG, "env": HOSTILE_ATTR})
    assert hostile.status_code == 200
    assert_safe_page(hostile)
    assert "<img" not in hostile.text and escaped(HOSTILE_ATTR) in hostile.text


async def test_node_page_shows_the_article_answers_states_and_history(
    service: Mesh, http: httpx2.AsyncClient, make_doc
):
    document = make_doc()
    await service.creation.create_node(document, agent={"id": "agent-author", "model": "model-x"})
    for agent in ("agent-s1", "agent-s2"):
        await service.outcomes.report_outcome(solved_report(agent))
    await service.articles.patch_article(NODE, base_revision=1, agent={"id": "agent-editor"}, summary="Name the interpreter check",
                                ops=[{"op": "set", "path": "/content/root_cause",
                                      "value": "pip installed into a different interpreter; compare `pip -V` and `python -V`."}])
    await service.failures.report_failed_attempt(NODE, {
        "environment": {"os": "windows-11", "runtime": "python-3.12", "pkg_manager": "pip"},
        "summary": "Reinstalled with the system pip.", "steps": ["pip install requests", "python app.py"],
        "reason": "Installed into another interpreter.", "agent": {"id": "agent-w"},
    })

    response = await http.get(f"/nodes/{NODE}")
    assert response.status_code == 200
    assert_safe_page(response)
    assert response.headers["x-knowmesh-content-trust"] == "untrusted-data"
    assert response.headers["x-knowmesh-has-answer"] == "true"
    text = response.text
    content = document["content"]
    for expected in (document["title"], NODE, "Status: draft", content["symptom"], content["context"],
                     document["signature"]["error"],
                     document["signature"]["aliases"][0], "python>=3.8"):
        assert escaped(expected) in text, expected
    assert "compare <code>pip -V</code> and <code>python -V</code>." in text  # code spans in prose, escaped first
    for heading in ("Error", "Symptom", "Context", "Root cause", "Answers (2)", "Outcome reports", "Alternatives",
                    "Failed attempts", "Boundaries", "History"):
        assert has_heading(text, heading), heading

    macos = text[text.index('id="answer-venv-macos"'):text.index('id="answer-venv-linux"')]
    assert "<h3>Use the venv interpreter (macOS)<a" in macos and "Environment: <code>macos</code>" in macos
    steps = macos[macos.index('<ol class="steps">'):macos.index("</ol>", macos.index('<ol class="steps">'))]
    assert steps.count("<li>") == 2
    assert steps.index("python3 -m venv .venv") < steps.index(".venv/bin/python -m pip install requests")
    assert "<pre><code>python3 -m venv .venv</code></pre>" in steps
    assert f"<pre><code>{escaped(content['solutions'][0]['verify']['command'])}</code></pre>" in macos
    assert "Expected: <code>exit 0</code>" in macos
    assert re.search(r'class="badge b-verified"[^>]*>verified</span>', macos)
    assert "<li>Worked for 2 agents on macos · python 3 · pip (verified there).</li>" in macos
    linux = text[text.index('id="answer-venv-linux"'):]
    assert "Environment: <code>linux</code>" in linux and "No agent has reported running this revision" in linux
    assert "2 report(s) on the current answers · solved 2 · failed 0" in text

    assert escaped(content["failed_attempts"][0]) in text  # the article's dead ends, kept for reference
    assert "Reinstalled with the system pip." in text and "Installed into another interpreter." in text
    assert "<pre><code>python app.py</code></pre>" in text
    assert escaped(content["boundaries"][0]) in text and escaped(content["alternatives"][0]) in text

    history = text[text.index('<h2 id="history">'):]
    assert history.index("Revision 2") < history.index("Revision 1")  # newest first
    assert "agent-editor" in history and "Name the interpreter check" in history
    assert "agent-author (model-x)" in history and "Create node" in history
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d UTC</time>', history)

    assert 'href="/nodes"' in text
    assert f'href="/v1/nodes/{NODE}"' in text and f'href="/v1/nodes/{NODE}.md"' in text
    assert (await http.get(f"/v1/nodes/{NODE}.md")).status_code == 200
    assert not robots_noindex(text)


async def test_hostile_node_text_is_escaped_everywhere(service: Mesh, http: httpx2.AsyncClient, make_doc):
    base = make_doc()
    solution = {**base["content"]["solutions"][0], "title": HOSTILE_ATTR, "applies_to": HOSTILE_TAG,
                "env": ["macos", HOSTILE_ATTR], "fix": [f"echo '{HOSTILE_TAG}'", HOSTILE_ATTR],
                "verify": {"command": HOSTILE_TAG, "expected": HOSTILE_ATTR}, "notes": [HOSTILE_TAG]}
    document = make_doc(
        id="python/hostile-text",
        title=f"Broken {HOSTILE_TAG} page",
        error=f"RuntimeError: {HOSTILE_TAG} {HOSTILE_ATTR}",
        signature={"error": f"RuntimeError: {HOSTILE_TAG} {HOSTILE_ATTR}", "environment": [HOSTILE_ATTR],
                   "aliases": [HOSTILE_TAG]},
        content={"symptom": HOSTILE_ATTR, "context": f"</p>{HOSTILE_TAG}", "root_cause": f"</pre>{HOSTILE_TAG}",
                 "solutions": [solution], "alternatives": [HOSTILE_TAG, {"note": HOSTILE_ATTR}],
                 "failed_attempts": [HOSTILE_TAG], "boundaries": [HOSTILE_ATTR]},
    )
    await service.creation.create_node(document)
    await service.articles.patch_article("python/hostile-text", base_revision=1, agent={"id": "agent-x"},
                                summary=f"{HOSTILE_TAG} {HOSTILE_ATTR}",
                                ops=[{"op": "set", "path": "/content/boundaries", "value": [HOSTILE_TAG]}])

    # An open problem whose title and symptom are hostile (it shows on the front door and the review
    # queue), and a hostile service issue: every kind of page shows some attacker text.
    await service.creation.create_node(open_problem(make_doc, title=f"Open {HOSTILE_ATTR} {HOSTILE_TAG}",
                                           content={**base["content"], "solutions": [], "symptom": HOSTILE_ATTR}))
    await service.issues.file_issue({"title": f"Issue {HOSTILE_ATTR} {HOSTILE_TAG}", "body": HOSTILE_ATTR,
                              "endpoint": HOSTILE_TAG, "labels": [HOSTILE_ATTR]})
    browser = {"accept": "text/html"}
    pages_shown = (  # (path, query, status, the hostile texts the page must show escaped)
        ("/", None, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/nodes", None, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/nodes/python", None, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/nodes", {"q": "RuntimeError broken page"}, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/nodes", {"q": HOSTILE_ATTR + HOSTILE_TAG, "env": HOSTILE_ATTR}, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/nodes/python/hostile-text", None, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/nodes/python/hostile-text/history", None, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/nodes/python/hostile-text/diff", None, 200, (HOSTILE_TAG,)),
        ("/nodes/python/requests-import-fails-after-reinstall", None, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/review", None, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/review", {"reason": "unsolved"}, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/issues", None, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/issues/1", None, 200, (HOSTILE_TAG, HOSTILE_ATTR)),
        ("/docs", None, 200, ()),
        ("/docs/" + HOSTILE_ATTR + HOSTILE_TAG, None, 404, (HOSTILE_TAG,)),
        ("/nodes/" + HOSTILE_TAG, None, 404, (HOSTILE_TAG,)),
        ("/nodes/python/" + HOSTILE_ATTR, None, 404, (HOSTILE_ATTR,)),
    )
    for path, params, status, shown in pages_shown:
        response = await http.get(path, params=params, headers=browser)
        where = (path, params)
        assert response.status_code == status, where
        assert_safe_page(response, docs=path == "/docs")
        text = response.text
        assert "<img" not in text and "<script" not in text and "onerror=alert(1)>" not in text, where
        for hostile in shown:
            assert escaped(hostile) in text, (where, hostile)
    page_text = (await http.get("/nodes/python/hostile-text")).text
    assert escaped(HOSTILE_ATTR) in page_text
    assert f"<title>Broken {escaped(HOSTILE_TAG)} page · Knowmesh</title>" in page_text
    assert page_text.count(escaped(HOSTILE_TAG)) >= 8  # title, error, alias, prose, steps, verify, notes, history


async def test_noindex_on_unsolved_nodes_only(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc())
    await service.creation.create_node(open_problem(make_doc))
    unsolved = await http.get("/nodes/python/requests-import-fails-after-reinstall")
    assert unsolved.status_code == 200 and robots_noindex(unsolved.text)
    assert unsolved.headers["x-knowmesh-has-answer"] == "false"
    assert "No answer yet: this problem is open." in unsolved.text and has_heading(unsolved.text, "Answers")
    assert "pip install --force-reinstall requests" in unsolved.text  # its failed attempts are the point
    solved = await http.get(f"/nodes/{NODE}")
    assert solved.status_code == 200 and "noindex" not in solved.text

    await service.articles.patch_article(NODE, base_revision=1, agent={"id": "agent-e"}, summary="Remove the answers",
                                ops=[{"op": "set", "path": "/content/solutions", "value": []}])
    assert robots_noindex((await http.get(f"/nodes/{NODE}")).text)  # unanswered again: noindex again


async def test_unknown_and_invalid_ids_are_html_404s(http: httpx2.AsyncClient):
    for path in ("/nodes/python/nothing-here", "/nodes/Python/x", "/nodes/python/..x", "/nodes/python/a/b",
                 "/nodes/%3Cscript%3E/x", "/nodes/python/x.md", "/nodes/" + "a" * 300 + "/b"):
        response = await http.get(path)
        assert response.status_code == 404, path
        assert_safe_page(response)
        assert robots_noindex(response.text) and "Node not found" in response.text
        assert "<script" not in response.text
    assert (await http.get("/nodes/", follow_redirects=False)).headers["location"] == "/nodes"
    assert (await http.post("/nodes")).status_code == 405


async def test_an_address_with_a_trailing_slash_leads_to_its_page(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc(), agent={"id": "agent-author"})
    for path, target in (("/nodes/python/", "/nodes/python"), (f"/nodes/{NODE}/", f"/nodes/{NODE}"),
                         (f"/nodes/{NODE}/history//", f"/nodes/{NODE}/history"),
                         ("/nodes/python/?q=pip", "/nodes/python?q=pip"),
                         ("/nodes/%3Cscript%3E/", "/nodes/%3Cscript%3E")):
        moved = await http.get(path, follow_redirects=False)
        assert moved.status_code == 308 and moved.headers["location"] == target, path
    page = await http.get(f"/nodes/{NODE}/", follow_redirects=True)
    assert page.status_code == 200 and str(page.url).endswith(f"/nodes/{NODE}")
    assert (await http.get("/nodes/python/nothing-here/", follow_redirects=True)).status_code == 404


async def test_docs_markdown_and_html(http: httpx2.AsyncClient):
    assert pages.DOCS == DOC_NAMES  # protocol.md's Discovery list
    index = await http.get("/docs")
    assert index.status_code == 200
    assert_safe_page(index, docs=True)
    links: set[str] = set()
    for name in DOC_NAMES:
        shipped = (files("knowmesh_mcp") / "docs" / f"{name}.md").read_text(encoding="utf-8")
        markdown = await http.get(f"/v1/docs/{name}.md")
        assert markdown.status_code == 200, name
        assert markdown.headers["content-type"] == "text/markdown; charset=utf-8"
        assert markdown.text == shipped and markdown.text.strip()
        rendered = await http.get(f"/docs/{name}")
        assert rendered.status_code == 200, name
        assert_safe_page(rendered, docs=True)
        assert re.search(r'<h[12] id="([^"]+)">.*?<a class="anchor" href="#\1"', rendered.text), name  # anchored
        assert f'href="/v1/docs/{name}.md"' in rendered.text
        assert f'href="/docs/{name}"' in index.text and f'href="/v1/docs/{name}.md"' in index.text
        links.update(attrs["href"].split("#")[0] for tag, attrs in Tags(rendered.text).tags
                     if tag == "a" and (attrs.get("href") or "").startswith("/"))
    assert "/docs/schema" in links  # links between docs point at their HTML pages
    for link in sorted(links):
        assert (await http.get(link)).status_code == 200, link  # no broken links inside the docs


async def test_autonomy_doc_is_served(http: httpx2.AsyncClient):
    response = await http.get("/docs/autonomy")
    assert response.status_code == 200 and "<article>" in response.text
    assert (await http.get("/v1/docs/autonomy.md")).text.strip()


async def test_an_unknown_page_is_an_html_404_for_a_browser_and_json_for_a_client(http: httpx2.AsyncClient):
    browser = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    for path in ("/foo", "/nope/deeper", "/%3Cscript%3Ealert(1)%3C/script%3E"):
        page = await http.get(path, headers=browser)
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html"), path
        assert_safe_page(page)
        assert "Page not found" in page.text and 'href="/"' in page.text and "<script>alert" not in page.text
        assert (await http.get(path)).json()["error"]["code"] == "not_found", path
    api = await http.get("/v1/nope", headers=browser)  # the API answers JSON whoever asks
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


async def test_unknown_docs_are_404s(http: httpx2.AsyncClient):
    for path in ("/v1/docs/nope.md", "/v1/docs/protocol", "/v1/docs/protocol.txt", "/v1/docs/..%2Fpages.py.md",
                 "/v1/docs/%2e%2e.md", "/v1/docs/PROTOCOL.md"):
        response = await http.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] in ("doc_not_found", "not_found"), path
    assert (await http.get("/v1/docs/nope.md")).json()["error"]["code"] == "doc_not_found"
    for path in ("/docs/nope", "/docs/protocol.md", "/docs/%3Cscript%3E"):
        response = await http.get(path)
        assert response.status_code == 404, path
        assert_safe_page(response)
        assert "Doc not found" in response.text


async def test_doc_rendering_drops_raw_html_and_links_docs_to_their_pages(
    http: httpx2.AsyncClient, tmp_path, monkeypatch
):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "protocol.md").write_text(
        "# Protocol\n\n<script>alert(1)</script>\n\n<img src=https://evil.example/x.png>\n\n"
        "See [the schema](schema.md#fields), [trust](/v1/docs/trust.md), [bad](javascript:alert(1)) and "
        "[elsewhere](https://example.org/).\n\n| a | b |\n| --- | --- |\n| `x` | y |\n\n```sh\ncurl -sS $KNOWMESH_URL/v1/search\n```\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(doc_pages, "files", lambda package: tmp_path)
    response = await http.get("/docs/protocol")
    assert response.status_code == 200
    assert_safe_page(response, docs=True)
    text = response.text
    assert "<title>Protocol · Knowmesh</title>" in text
    assert "<img" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert 'href="/docs/schema#fields"' in text and 'href="/docs/trust"' in text
    assert "javascript:" not in text.replace("[bad](javascript:alert(1))", "")
    assert "<table>" in text and "<pre><code class=\"language-sh\">curl -sS $KNOWMESH_URL/v1/search" in text
    index = await http.get("/docs")
    assert 'href="/docs/protocol">Protocol</a>' in index.text and 'href="/docs/schema"' not in index.text
    assert (await http.get("/v1/docs/schema.md")).status_code == 404  # allow-listed but not installed
    assert (await http.get("/docs/schema")).status_code == 404


# -- the front door, ecosystems, history, diff, review, issues, sitemap ---------------------------

async def starter(service: Mesh) -> int:
    """The starter corpus, as a fresh install has it; returns how many nodes it holds."""
    report = await service.documents.import_documents(load_documents([store_dir() / "starter"]), summary="Starter corpus")
    return len(report.created)


def anchored_headings(text: str) -> list[str]:
    """The ids of the h2/h3 headings that carry an id and a `#` link to it."""
    return re.findall(r'<h[23] id="([^"]+)">.*?<a class="anchor" href="#\1"', text)


async def test_front_door(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc())
    await service.creation.create_node(open_problem(make_doc, title=f"Open {HOSTILE_TAG} problem"))
    await service.creation.create_node(rust_doc(make_doc))
    await service.issues.file_issue({"title": "A page is slow", "body": "It takes 3 s."})

    response = await http.get("/")
    assert response.status_code == 200
    assert_safe_page(response)
    assert canonical_of(response) == origin(response) + "/"
    assert description_of(response).startswith("Error messages coding agents hit")
    text = response.text
    assert not robots_noindex(text)
    assert "3 problems in 2 ecosystems: 2 answered, 1 open." in text
    assert '<form method="get" action="/nodes" role="search">' in text and 'name="q"' in text
    assert '<a href="/nodes/python">python</a> <span class="meta">2, 1 open</span>' in text
    assert '<a href="/nodes/rust">rust</a> <span class="meta">1</span>' in text
    assert has_heading(text, "Open problems (1)")
    assert 'href="/nodes/python/requests-import-fails-after-reinstall"' in text
    assert f"Open {escaped(HOSTILE_TAG)} problem" in text and "<script>" not in text
    for href in ('href="/review"', 'href="/issues"', 'href="/docs"', 'href="/llms.txt"'):
        assert href in text, href
    assert "1 report</a>" not in text and "1 report about Knowmesh itself" in text
    assert {"ecosystems", "open-problems", "help", "for-agents"} <= set(anchored_headings(text))
    assert (await http.head("/")).status_code == 200
    assert (await http.post("/")).status_code == 405


async def test_front_door_of_an_empty_mesh(http: httpx2.AsyncClient):
    response = await http.get("/")
    assert response.status_code == 200 and "0 problems in 0 ecosystems" in response.text
    assert "None: every problem here has an answer." in response.text


async def test_ecosystem_page_lists_that_ecosystem(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc())
    await service.creation.create_node(open_problem(make_doc))
    await service.creation.create_node(rust_doc(make_doc))

    response = await http.get("/nodes/python")
    assert response.status_code == 200
    assert_safe_page(response)
    assert canonical_of(response) == origin(response) + "/nodes/python"
    assert "2 python errors" in description_of(response)
    text = response.text
    assert "<h1>python problems</h1>" in text and "2 problems: 1 answered, 1 open." in text
    assert f'href="/nodes/{NODE}"' in text and 'href="/nodes/python/requests-import-fails-after-reinstall"' in text
    assert "rust/borrow-of-moved-value" not in text
    assert "open problem" in text and "answered" in text
    alias = await http.get("/nodes/py")  # an alias folds to its ecosystem: one page, one canonical address
    assert alias.status_code == 200 and canonical_of(alias) == origin(response) + "/nodes/python"
    for path in ("/nodes/cobol", "/nodes/%3Cscript%3Ealert(1)"):
        missing = await http.get(path)
        assert missing.status_code == 404, path
        assert_safe_page(missing)
        assert robots_noindex(missing.text) and "<script>" not in missing.text
        assert 'href="/nodes/python"' in missing.text  # the ecosystems there are


async def test_pages_mark_an_id_no_token_proved(service: Mesh, make_doc):
    """On `--auth optional` an edit without a token is kept under the id it claims: its page must
    not read like the token holder's own (the JSON said `proven: false`; the page did not)."""
    from knowmesh_mcp.api.app import build_app

    from conftest import serving

    token = (await service.tokens.add_token("mia", role="maintainer"))["token"]
    await service.creation.create_node(make_doc())
    async with serving(build_app(service=service, auth="optional", write_limit=0, with_mcp=False)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
            def edit(value: str) -> dict[str, Any]:
                return {"summary": value, "agent": {"id": "mia"},
                        "ops": [{"op": "set", "path": "/content/context", "value": value}]}
            proven = await client.patch(f"/v1/nodes/{NODE}/article", json={"base_revision": 1, **edit("by mia")},
                                        headers={"authorization": f"Bearer {token}"})
            forged = await client.patch(f"/v1/nodes/{NODE}/article", json={"base_revision": 2, **edit("not mia")})
            attempt = {"environment": {"os": "linux"}, "summary": "tried", "steps": ["pip install x"],
                       "reason": "same error", "agent": {"id": "mia"}}
            await service.creation.create_node(open_problem(make_doc))
            failure = await client.post("/v1/nodes/python/requests-import-fails-after-reinstall/failures", json=attempt)
            history = (await client.get(f"/nodes/{NODE}/history")).text
            problem = (await client.get("/nodes/python/requests-import-fails-after-reinstall")).text
    assert (proven.status_code, forged.status_code, failure.status_code) == (200, 200, 202)
    starts = {number: history.index(f'id="revision-{number}"') for number in (2, 3)}
    entries = {number: history[start:history.index("</li>", start)] for number, start in starts.items()}
    assert "mia" in entries[2] and "unproven" not in entries[2]
    assert "mia" in entries[3] and "(claimed, unproven)" in entries[3]
    assert "mia" in problem and "(claimed, unproven)" in problem


async def test_history_and_diff_pages(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc(), agent={"id": "agent-author"})
    await service.articles.patch_article(NODE, base_revision=1, agent={"id": "agent-editor"}, summary=f"Warn {HOSTILE_TAG}",
                                ops=[{"op": "set", "path": "/content/root_cause", "value": f"Two interpreters {HOSTILE_ATTR}"},
                                     {"op": "set", "path": "/content/solutions/venv-macos/fix/1",
                                      "value": ".venv/bin/python -m pip install --upgrade requests"}])

    history = await http.get(f"/nodes/{NODE}/history")
    assert history.status_code == 200
    assert_safe_page(history)
    assert robots_noindex(history.text) and canonical_of(history) == origin(history) + f"/nodes/{NODE}/history"
    text = history.text
    assert text.index('id="revision-2"') < text.index('id="revision-1"')  # newest first
    assert "agent-editor" in text and escaped(f"Warn {HOSTILE_TAG}") in text and "<script>" not in text
    assert f'href="/nodes/{NODE}/diff?from=1&amp;to=2"' in text
    assert "<code>/content/root_cause</code>" in text  # which fields each revision changed
    assert f'action="/nodes/{NODE}/diff"' in text and 'name="from"' in text and 'name="to"' in text
    assert f'href="/nodes/{NODE}/history"' in (await http.get(f"/nodes/{NODE}")).text

    diff = await http.get(f"/nodes/{NODE}/diff", params={"from": 1, "to": 2})
    assert diff.status_code == 200
    assert_safe_page(diff)
    text = diff.text
    assert "<h1>Revision 1 → 2 of" in text and "2 fields changed." in text
    assert has_heading(text, "<code>/content/root_cause</code> changed")
    assert '<span class="del">- pip installed into a different interpreter than the one running the script.</span>' in text
    assert f'<span class="add">+ Two interpreters {escaped(HOSTILE_ATTR)}</span>' in text
    assert '<span class="del">- 2. .venv/bin/python -m pip install requests</span>' in text
    assert '<span class="add">+ 2. .venv/bin/python -m pip install --upgrade requests</span>' in text
    assert "<img" not in text
    default = await http.get(f"/nodes/{NODE}/diff")  # no numbers: the last edit
    assert default.status_code == 200 and "<h1>Revision 1 → 2 of" in default.text
    same = await http.get(f"/nodes/{NODE}/diff", params={"from": 2, "to": 2})
    assert same.status_code == 200 and "The two revisions have the same content." in same.text

    for params in ({"from": "x"}, {"to": 3}, {"from": 0}, {"from": "9" * 30}, {"to": "-1"}):
        bad = await http.get(f"/nodes/{NODE}/diff", params=params)
        assert bad.status_code == 400, params
        assert_safe_page(bad)
    for path in ("/nodes/python/nothing/history", "/nodes/python/nothing/diff", "/nodes/Python/x/history"):
        missing = await http.get(path)
        assert missing.status_code == 404, path
        assert_safe_page(missing)


async def test_each_answer_shows_its_evidence_in_words(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc())
    for agent in ("agent-s1", "agent-s2", "agent-s3"):
        await service.outcomes.report_outcome(solved_report(agent))
    await service.outcomes.report_outcome({**solved_report("agent-f1"), "outcome": "failed", "reason": "Still missing."})
    linux = {"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"}
    for agent in ("agent-l1", "agent-l2"):
        await service.outcomes.report_outcome({"node": NODE, "solution": "venv-linux", "outcome": "failed", "env": linux,
                                      "agent": {"id": agent}, "reason": "Wrong interpreter again."})

    text = (await http.get(f"/nodes/{NODE}")).text
    macos = text[text.index('id="answer-venv-macos"'):text.index('id="answer-venv-linux"')]
    assert "<li>Worked for 3 agents on macos · python 3 · pip, failed for 1.</li>" in macos
    linux_part = text[text.index('id="answer-venv-linux"'):]
    assert "<li>Failed for 2 agents on linux · python 3 · pip (known to fail there).</li>" in linux_part

    await service.articles.patch_article(NODE, base_revision=1, agent={"id": "agent-e"}, summary="Another step",
                                ops=[{"op": "set", "path": "/content/solutions/venv-linux/fix/-", "value": "hash -r"}])
    linux_part = (await http.get(f"/nodes/{NODE}")).text.split('id="answer-venv-linux"', 1)[1]
    assert "No agent has reported running this revision of the answer yet." in linux_part
    assert "2 reports on earlier revisions of this answer" in linux_part


async def test_evidence_words_of_a_node_with_more_reports_than_a_page_reads(
    service: Mesh, http: httpx2.AsyncClient, make_doc, monkeypatch
):
    monkeypatch.setattr(pages, "FEEDBACK_PAGES", 0)  # as if the node had more reports than the page reads
    await service.creation.create_node(make_doc())
    for agent in ("agent-s1", "agent-s2"):
        await service.outcomes.report_outcome(solved_report(agent))
    text = (await http.get(f"/nodes/{NODE}")).text
    macos = text[text.index('id="answer-venv-macos"'):text.index('id="answer-venv-linux"')]
    assert "<li>Worked for 2 agents (all environments together).</li>" in macos


async def test_status_and_answer_state_are_explained_side_by_side(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.documents.import_documents([("doc", {**make_doc(), "status": "verified"})])
    await service.creation.create_node(open_problem(make_doc))

    text = (await http.get(f"/nodes/{NODE}")).text
    [lines] = re.findall(r'<ul class="states">(.*?)</ul>', text)
    status, answers = re.findall(r"<li>(.*?)</li>", lines)
    assert status.startswith("<strong>Status: verified</strong> — a maintainer reviewed this article")
    assert "maintainers set the status" in status
    assert answers.startswith("<strong>Answer state: draft</strong> — no answer has been reported solved by two")
    assert "outcome reports set this" in answers
    unsolved = (await http.get("/nodes/python/requests-import-fails-after-reinstall")).text
    assert "<strong>Status: draft</strong> — published as submitted" in unsolved
    assert "<strong>Answer state: none</strong> — no answer yet" in unsolved


async def test_headings_carry_anchors(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc())
    text = (await http.get(f"/nodes/{NODE}")).text
    ids = anchored_headings(text)
    assert {"error", "symptom", "context", "root-cause", "answers", "outcome-reports", "failed-attempts",
            "boundaries", "history"} <= set(ids)
    assert len(ids) == len(set(ids))
    assert re.findall(r"<h2(?: [^>]*)?>", text) == re.findall(r'<h2 id="[^"]+">', text)  # every h2 has one
    assert 'href="#answer-venv-macos"' in text and 'id="answer-venv-macos"' in text


async def test_review_queue_of_a_fresh_install_counts_and_pages(service: Mesh, http: httpx2.AsyncClient):
    size = await starter(service)
    first = (await http.get("/v1/review")).json()
    assert first["total"] == size and first["total_exact"] is True and first["offset"] == 0
    assert first["counts"]["unsolved"] + first["counts"]["stale"] == size
    assert first["never_verified"] == first["counts"]["stale"]
    assert len(first["items"]) == 50 and first["next_offset"] == 50
    seen = [item["id"] for item in first["items"]]
    offset = first["next_offset"]
    while offset is not None:
        page_ = (await http.get("/v1/review", params={"offset": offset, "limit": 50})).json()
        assert page_["total"] == size and page_["offset"] == offset
        seen += [item["id"] for item in page_["items"]]
        offset = page_["next_offset"]
    assert len(seen) == size == len(set(seen))  # every item once, in priority order
    stale = [item for item in first["items"] if item["reason"] == "stale"]
    assert stale and all(item["last_verified"] is None and item["solution"] for item in stale)
    past = (await http.get("/v1/review", params={"offset": size + 10})).json()
    assert past["items"] == [] and past["next_offset"] is None and past["total"] == size
    only = (await http.get("/v1/review", params={"reason": "unsolved"})).json()
    assert only["total"] == first["counts"]["unsolved"] and {i["reason"] for i in only["items"]} == {"unsolved"}
    for params in ({"offset": -1}, {"offset": "x"}, {"reason": "nope"}, {"limit": 0}, {"offset": "9" * 30}):
        bad = await http.get("/v1/review", params=params)
        assert bad.status_code == 400 and bad.json()["error"]["field"] in ("offset", "reason", "limit"), params

    markdown = (await http.get("/review.md")).text
    assert f"{size} items need attention" in markdown and "Items 1–50" in markdown
    assert markdown.count("## Never verified") == 1 and "**stale**" not in markdown
    assert f"## Never verified (46 on this page, {first['never_verified']} in all)" in markdown
    assert "Next page: `GET $KNOWMESH_URL/review.md?offset=50&limit=50`" in markdown
    assert "Items 51–100" in (await http.get("/review.md", params={"offset": 50})).text

    response = await http.get("/review")
    assert response.status_code == 200
    assert_safe_page(response)
    text = response.text
    assert f"{size} items need attention" in text and "Items 1–50, highest priority first." in text
    assert text.count('id="never-verified"') == 1 and has_heading(text, "unsolved <span class=\"meta\">(4 here, 4 in all)</span> ")
    assert text.count("badge b-stale") == 0  # folded, not one line each
    [next_href] = re.findall(r'href="([^"]+)" rel="next"', text)
    assert html.unescape(next_href) == "/review?offset=50&limit=50"
    second = (await http.get(html.unescape(next_href))).text
    assert "Items 51–100" in second and 'rel="prev"' in second
    assert 'href="/review?reason=unsolved"' in text
    for params in ({"offset": "x"}, {"limit": "201"}, {"reason": HOSTILE_TAG}):
        bad = await http.get("/review", params=params)
        assert bad.status_code == 400, params
        assert_safe_page(bad)
        assert "<script>" not in bad.text


async def test_review_page_lists_urgent_items_with_their_requests(service: Mesh, http: httpx2.AsyncClient, make_doc):
    await service.creation.create_node(make_doc(title=f"Hostile {HOSTILE_TAG}"))
    for agent in ("agent-f1", "agent-f2"):
        await service.outcomes.report_outcome({**solved_report(agent), "outcome": "failed", "reason": "No."})
    text = (await http.get("/review")).text
    assert has_heading(text, 'failed_answer <span class="meta">(1 here, 1 in all)</span> ')
    assert "Two independent agents reported the current answer failed." in text
    assert "<code>POST /v1/feedback</code>" in text and f"<code>PATCH /v1/nodes/{NODE}/article</code>" in text
    assert escaped(f"Hostile {HOSTILE_TAG}") in text and "<script>" not in text
    assert 'id="reasons"' in text  # the legend


async def test_mcp_review_tool_still_answers_with_the_total(service: Mesh, make_doc):
    from mcp import Client

    from knowmesh_mcp.mcp.server import build_mcp_server

    await service.creation.create_node(open_problem(make_doc))
    async with Client(build_mcp_server(lambda: service)) as client:
        result = await client.call_tool("review_queue", {"limit": 1})
    assert not result.is_error
    assert result.structured_content["total"] == 1 and result.structured_content["next_offset"] is None


async def test_issues_are_html_pages_for_a_browser(service: Mesh, http: httpx2.AsyncClient):
    await service.issues.file_issue({"title": f"Search {HOSTILE_TAG}", "body": f"Line one\n{HOSTILE_ATTR}\nline three",
                              "endpoint": "/v1/search", "labels": ["search", HOSTILE_TAG]})
    browser = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    listing = await http.get("/issues", headers=browser)
    assert listing.status_code == 200
    assert_safe_page(listing)
    assert 'href="/issues/1"' in listing.text and escaped(f"Search {HOSTILE_TAG}") in listing.text
    assert "1 issue, 1 open" in listing.text and "badge b-open" in listing.text
    one = await http.get("/issues/1", headers=browser)
    assert one.status_code == 200
    assert_safe_page(one)
    assert f'<p class="prose">Line one\n{escaped(HOSTILE_ATTR)}\nline three</p>' in one.text
    assert "<dt>endpoint</dt>" in one.text and "<img" not in one.text and "<script>" not in one.text
    assert "# Service issues" not in listing.text  # a page, not Markdown shown in a browser
    missing = await http.get("/issues/99", headers=browser)
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    markdown = await http.get("/issues")  # agents still get Markdown
    assert markdown.headers["content-type"].startswith("text/markdown") and "#1 [open]" in markdown.text
    assert (await http.get("/issues/99")).json()["error"]["code"] == "issue_not_found"


async def test_sitemap_lists_answered_nodes_only(service: Mesh, http: httpx2.AsyncClient, make_doc):
    from xml.etree import ElementTree

    await service.creation.create_node(make_doc())
    await service.creation.create_node(open_problem(make_doc))
    await service.creation.create_node(rust_doc(make_doc))
    response = await http.get("/sitemap.xml")
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/xml")
    namespace = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    root = ElementTree.fromstring(response.content)
    urls = {url.findtext("s:loc", namespaces=namespace): url.findtext("s:lastmod", namespaces=namespace)
            for url in root.findall("s:url", namespace)}
    base = origin(response)
    assert f"{base}/nodes/{NODE}" in urls and f"{base}/nodes/rust/borrow-of-moved-value" in urls
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", urls[f"{base}/nodes/{NODE}"])
    assert not any("requests-import-fails-after-reinstall" in url for url in urls)  # the open problem stays out
    assert {f"{base}/", f"{base}/nodes", f"{base}/nodes/python", f"{base}/docs/protocol"} <= set(urls)
    node_urls = [url for url in urls if url.count("/") == 5 and "/nodes/" in url]
    assert sorted(node_urls) == sorted([f"{base}/nodes/{NODE}", f"{base}/nodes/rust/borrow-of-moved-value"])
    for url in urls:  # every listed page is indexable
        page_ = await http.get(url.removeprefix(base))
        assert page_.status_code == 200 and not robots_noindex(page_.text), url
    robots = await http.get("/robots.txt")
    assert robots.status_code == 200 and f"Sitemap: {base}/sitemap.xml" in robots.text


async def test_a_sitemap_too_big_for_one_file_is_an_index_of_files_that_hold_every_answered_node(
        service: Mesh, http: httpx2.AsyncClient, make_doc, monkeypatch):
    """Before, the sitemap read at most 50,000 nodes, whole documents a page at a time (2.7 s at
    100,000 nodes), and left every answered node past them out of it."""
    from xml.etree import ElementTree

    from knowmesh_mcp.web import browse_pages
    from knowmesh_mcp.core.identity import Actor

    namespace = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    answered = [f"python/sitemap-node-{n:02d}" for n in range(12)]
    for node_id in answered:
        await service.creation.create_node(make_doc(id=node_id, error=f"ModuleNotFoundError: No module named 'sitemap_{'abcdefghijkl'[int(node_id[-2:])]}'"))
    await service.creation.create_node(open_problem(make_doc))
    await service.maintenance.set_status(answered[3], "deprecated", note="merged elsewhere", actor=Actor("mia", "token", role="maintainer"))
    listed = answered[:3] + answered[4:]  # answered and published: 11 nodes

    whole = await http.get("/sitemap.xml")  # a small mesh: one file, as before
    single = [loc.text for loc in ElementTree.fromstring(whole.content).iterfind("s:url/s:loc", namespace)]
    fixed = [url for url in single if "/sitemap-node-" not in url]
    assert len(single) == len(fixed) + len(listed)

    monkeypatch.setattr(browse_pages, "SITEMAP_LIMIT", 5)
    index = await http.get("/sitemap.xml")
    assert index.status_code == 200 and index.headers["content-type"].startswith("application/xml")
    root = ElementTree.fromstring(index.content)
    assert root.tag == "{http://www.sitemaps.org/schemas/sitemap/0.9}sitemapindex"
    files = [loc.text for loc in root.iterfind("s:sitemap/s:loc", namespace)]
    base = origin(index)
    assert files == [f"{base}/sitemap.xml?page={n}" for n in range(1, -(-len(single) // 5) + 1)]
    urls = []
    for url in files:
        part = await http.get(url.removeprefix(base))
        entries = [loc.text for loc in ElementTree.fromstring(part.content).iterfind("s:url/s:loc", namespace)]
        assert part.status_code == 200 and 1 <= len(entries) <= 5, url
        urls += entries
    assert urls == single  # the fixed pages first, then each answered node once, in id order
    assert urls[len(fixed):] == [f"{base}/nodes/{node_id}" for node_id in listed]
    for page in ("0", str(len(files) + 1), "x", "-1"):
        wrong = await http.get(f"/sitemap.xml?page={page}")
        assert wrong.status_code == 400 and wrong.json()["error"]["field"] == "page", page


@pytest.mark.parametrize("path", [
    "/?q=%3Cscript%3E", "/nodes/%00", "/nodes/%ff%fe", "/nodes/python/x/history/extra", "/nodes/python/x/diff?from=%C2%B2",
    "/nodes/a%2Fb/history", "/review?offset=%00", "/review?limit=", "/review?reason=", "/nodes/python?cursor=%00",
    "/nodes/" + "x" * 5000, "/nodes/python/" + "y" * 5000 + "/diff",
])
async def test_hostile_page_addresses_are_never_a_500(service: Mesh, http: httpx2.AsyncClient, make_doc, path):
    await service.creation.create_node(make_doc())
    response = await http.get(path)
    assert response.status_code in (200, 400, 404), (path, response.status_code)
    assert response.headers["content-type"].startswith("text/html"), path
    assert "<script>" not in response.text


# -- a search whose best result is only a guess ----------------------------------------------------

GUESSES = '<p class="note guesses" role="note"><strong>No likely match.</strong>'


async def test_search_page_says_when_every_result_is_a_guess(service: Mesh, http: httpx2.AsyncClient):
    await starter(service)
    weak_query = "TypeError: Cannot read properties of undefined (reading 'map')"  # no starter node is about it
    envelope = await service.searching.search(weak_query)
    assert envelope["results"] and envelope["results"][0]["score"] < 0.5, envelope["results"][:1]

    weak = await http.get("/nodes", params={"q": weak_query})
    assert weak.status_code == 200
    assert_safe_page(weak)
    notice = re.search(re.escape(GUESSES) + r"(.*?)</p>", weak.text)
    assert notice, weak.text
    assert "Every score is below 0.5, so these results are guesses" in notice.group(1)
    assert '<a href="/docs/contribute">how to publish an open problem</a>' in notice.group(1)
    assert weak.text.index(GUESSES) < weak.text.index('<ol class="nodes">')  # above the results
    best = weak.text.split('<ol class="nodes">')[1].split("</li>")[0]
    assert f'href="{pages.node_href(envelope["results"][0]["id"])}"' in best
    assert re.search(r'class="badge b-guess"[^>]*>guess</span>', best), best  # the score says it is a guess

    likely = await http.get("/nodes", params={"q": "ModuleNotFoundError: No module named 'requests'"})
    assert likely.status_code == 200
    assert_safe_page(likely)
    assert "No likely match" not in likely.text and 'class="note guesses"' not in likely.text
    best = likely.text.split('<ol class="nodes">')[1].split("</li>")[0]
    assert 'href="/nodes/python/' in best and "b-guess" not in best  # a likely match carries no guess label
