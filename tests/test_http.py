"""The HTTP routes against a real uvicorn server: bodies, headers, conditional reads, bad input."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import httpx2
import pytest

from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

NODE = "/v1/nodes/python/module-not-found-venv"


async def snapshot(service: Mesh) -> list[dict]:
    return [document async for document in service.documents.export_documents()]


async def test_create_then_read_json_and_markdown(http: httpx2.AsyncClient, make_doc):
    created = await http.post("/v1/nodes", json={**make_doc(), "agent": {"id": "agent-a1", "model": "m"}})
    assert created.status_code == 201, created.text
    assert created.headers["x-knowmesh-content-trust"] == "untrusted-data"
    body = created.json()
    assert set(body) >= {"id", "version", "status", "trust", "path", "html_path", "similar"}

    read = await http.get(NODE, params={"env": "macos-15,python-3.12,pip"})
    assert read.status_code == 200
    assert [s["id"] for s in read.json()["content"]["solutions"]] == ["venv-macos"]
    for header in ("etag", "cache-control", "x-knowmesh-article-revision", "x-knowmesh-node-version",
                   "x-knowmesh-has-answer", "x-knowmesh-content-trust", "x-knowmesh-stale"):
        assert header in read.headers, header
    assert read.headers["cache-control"] == "public, max-age=300"
    assert read.headers["x-knowmesh-node-version"] == body["version"]

    markdown = await http.get(NODE + ".md", params={"fields": "symptom,fix,verify,failed"})
    assert markdown.status_code == 200
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert "## Symptom" in markdown.text and "## Root cause" not in markdown.text


async def test_if_none_match_gives_304(http: httpx2.AsyncClient, make_doc):
    await http.post("/v1/nodes", json=make_doc())
    first = await http.get(NODE)
    again = await http.get(NODE, headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == first.headers["etag"]
    other_view = await http.get(NODE, params={"env": "linux"}, headers={"If-None-Match": first.headers["etag"]})
    assert other_view.status_code == 200


async def test_pinned_version_routes(http: httpx2.AsyncClient, make_doc):
    version = (await http.post("/v1/nodes", json=make_doc())).json()["version"]
    pinned = await http.get(f"{NODE}/versions/{version}")
    assert pinned.status_code == 200 and pinned.json()["version"] == version
    assert "immutable" in pinned.headers["cache-control"]
    markdown = await http.get(f"{NODE}/versions/{version}.md")
    assert markdown.status_code == 200 and f'version: "{version}"' in markdown.text
    missing = await http.get(f"{NODE}/versions/sha256:{'1' * 64}")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "version_not_found"


async def test_list_route(http: httpx2.AsyncClient, make_doc):
    await http.post("/v1/nodes", json=make_doc())
    page = await http.get("/v1/nodes", params={"ecosystem": "py", "fields": "title", "limit": 10})
    assert page.status_code == 200
    assert page.json()["nodes"] == [{"id": "python/module-not-found-venv", "title": make_doc()["title"]}]
    assert (await http.get("/v1/nodes", params={"limit": "many"})).json()["error"]["field"] == "limit"


async def test_llms_txt(http: httpx2.AsyncClient):
    response = await http.get("/llms.txt")
    assert response.status_code == 200 and "untrusted data" in response.text and "/v1/nodes" in response.text


async def test_errors_are_json_with_codes(http: httpx2.AsyncClient):
    missing = await http.get("/v1/nodes/python/nothing-here")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "node_not_found"
    unknown_route = await http.get("/v2/whatever")
    assert unknown_route.status_code == 404 and unknown_route.json()["error"]["code"] == "not_found"
    wrong_method = await http.delete("/v1/nodes")
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == "method_not_allowed"


BAD_BODIES = [
    (b"{not json", "invalid_json"),
    (b"", "invalid_json"),
    (b"\xff\xfe\x00", "invalid_json"),
    (b"[1, 2, 3]", "invalid_node"),
    (b'"a string"', "invalid_node"),
    (b"null", "invalid_node"),
]


@pytest.mark.parametrize(("raw", "code"), BAD_BODIES)
async def test_malformed_bodies_are_400_and_write_nothing(http, service, raw, code):
    response = await http.post("/v1/nodes", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == code
    assert await snapshot(service) == []


async def test_invalid_documents_are_400_invalid_node_and_write_nothing(http, service, invalid_documents):
    for label, document, field in invalid_documents:
        response = await http.post("/v1/nodes", json=document)
        assert response.status_code == 400, label
        error = response.json()["error"]
        assert error["code"] == "invalid_node", label
        assert field in [p["field"] for p in error["problems"]], (label, error)
    assert await snapshot(service) == []


async def test_an_invalid_document_is_explained_in_plain_words(http, service, make_doc):
    document = make_doc()
    document["signature"]["aliases"] = ["x"] * 101
    response = await http.post("/v1/nodes", json=document)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["problems"] == [{"field": "/signature/aliases", "rule": "too_long",
                                  "message": "must have at most 100 items (it has 101)"}], error
    assert error["message"].startswith("/signature/aliases: must have at most 100 items"), error
    assert await snapshot(service) == []


@pytest.mark.parametrize(
    ("path", "code"),
    [("/v1/nodes/Python/x", "invalid_id"), ("/v1/nodes/python//x", "invalid_id"), ("/v1/nodes/python/../x", "invalid_id"),
     ("/v1/nodes/python/%2E%2E", "invalid_id"), ("/v1/nodes/python", "invalid_id"), ("/v1/nodes/a/b/c/d/e", "invalid_id"),
     ("/v1/nodes/python/x?fields=bogus", "invalid_parameter"), ("/v1/nodes/python/x?include=bogus", "invalid_parameter")],
)
async def test_bad_read_requests_are_400(http: httpx2.AsyncClient, path, code):
    response = await http.get(path)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == code


async def test_oversized_body_is_413_and_writes_nothing(http, service, make_doc):
    document = make_doc()
    document["content"]["context"] = "x" * 1_100_000
    response = await http.post("/v1/nodes", content=json.dumps(document), headers={"content-type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"

    async def chunks():  # no content-length: the limit is enforced while streaming
        yield b'{"id": "python/x", "pad": "'
        for _ in range(20):
            yield b"y" * 65536
        yield b'"}'

    streamed = await http.post("/v1/nodes", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    assert await snapshot(service) == []


async def test_conflicts_over_http(http: httpx2.AsyncClient, make_doc):
    assert (await http.post("/v1/nodes", json=make_doc())).status_code == 201
    exists = await http.post("/v1/nodes", json=make_doc())
    assert exists.status_code == 409 and exists.json()["error"]["code"] == "node_exists"
    duplicate = await http.post("/v1/nodes", json=make_doc(id="py/dup"))
    assert duplicate.status_code == 409
    body = duplicate.json()
    assert body["error"]["code"] == "duplicate_node"
    assert body["canonical"]["id"] == "python/module-not-found-venv"
    assert body["next"]["edit_article"]["path"] == "/v1/nodes/python/module-not-found-venv/article"


ROUTE_ENDINGS = ("article", "revisions", "solutions", "failures", "feedback", "status", "versions")


async def test_a_node_whose_slug_is_a_route_ending_is_read_at_its_path(http: httpx2.AsyncClient, make_doc):
    """An id is `{ecosystem}/{slug}` (schema.md), so `/v1/nodes/python/article` is the node
    python/article, not the article of a node `python`; its own routes follow its whole id."""
    for slug in ROUTE_ENDINGS:
        created = await http.post("/v1/nodes", json=make_doc(id=f"python/{slug}", error=f"ValueError: {slug} broke"))
        assert created.status_code == 201, created.text
    for slug in ROUTE_ENDINGS:
        path = f"/v1/nodes/python/{slug}"
        read = await http.get(path)
        assert read.status_code == 200 and read.json()["id"] == f"python/{slug}", (path, read.text)
        markdown = await http.get(path + ".md")
        assert markdown.status_code == 200 and f"ValueError: {slug} broke" in markdown.text, path
        article = await http.get(path + "/article")
        assert article.status_code == 200 and article.json()["id"] == f"python/{slug}", (path, article.text)
        history = await http.get(path + "/article/revisions")
        assert history.status_code == 200 and history.json()["id"] == f"python/{slug}", (path, history.text)
        failures = await http.get(path + "/failures")
        assert failures.status_code == 200, (path, failures.text)
        assert (await http.post(path, json={})).status_code == 405  # a node's path is read, never written


@pytest.mark.anyio
async def test_read_only_server_refuses_every_write(service: Mesh):
    from knowmesh_mcp.api.app import build_app

    app = build_app(service=service, with_mcp=False, read_only=True)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        for method, path in [("POST", "/v1/nodes"), ("POST", "/v1/feedback"), ("POST", "/v1/issues"),
                             ("POST", "/v1/nodes/python/x/failures"), ("PATCH", "/v1/nodes/python/x/article"),
                             ("POST", "/v1/dedupe/tasks"), ("POST", "/v1/article-revisions/rev_x/undo")]:
            response = await client.request(method, path, json={})
            assert (response.status_code, response.json()["error"]["code"]) == (403, "read_only"), path
        assert (await client.get("/v1/nodes")).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "status", "allow", "error"),
    [("DELETE", "/v1/nodes/python/x", 405, "HEAD, GET", None),
     ("POST", "/v1/nodes/python/x/article", 405, "HEAD, GET, PATCH", None),
     ("PUT", "/v1/nodes/python/x/article/revisions", 405, "HEAD, GET, POST", None),
     ("GET", "/v1/nodes/python/x/status", 405, "POST", None),
     ("GET", "/v1/nodes/python/x/solutions", 405, "POST", None),
     ("PATCH", "/v1/nodes/python/x/versions/sha256:0.md", 405, "HEAD, GET", None),
     ("GET", "/v1/nodes/python/x/article/x", 400, None, ("invalid_id", "python/x/article/x")),
     ("GET", "/v1/nodes/a/b/c/failures", 400, None, ("invalid_id", "a/b/c/failures")),  # a suffix follows a whole id only
     ("GET", "/v1/nodes//s/versions/v", 400, None, ("invalid_id", "/s")),  # a pinned version: exactly four segments
     ("GET", "/v1/nodes/python/x/versions/a/b", 400, None, ("invalid_id", "python/x/versions/a/b")),
     ("GET", "/v1/nodes/python/x.md.md", 400, None, ("invalid_id", "python/x.md")),
     ("POST", "/v1/nodes/python/x/solutions", 410, None, ("gone", None)),
     ("POST", "/v1/nodes/x/solutions", 405, "HEAD, GET", None)],  # the node x/solutions, not x's solutions
)
async def test_node_routes_match_by_suffix_and_answer_405_with_allow(service: Mesh, method, path, status, allow, error):
    """Under /v1/nodes/ the first route whose path matches answers every method: a method it does
    not serve is its 405 with its Allow, a malformed id its 400 naming the id."""
    from knowmesh_mcp.api.app import build_app

    app = build_app(service=service, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        response = await client.request(method, path, json={} if method in ("POST", "PUT", "PATCH") else None)
    assert response.status_code == status, response.text
    assert response.headers.get("allow") == allow
    body = response.json()["error"]
    if status == 405:
        assert body == {"code": "method_not_allowed", "message": f"{method} is not allowed here; use {allow}"}
    else:
        assert (body["code"], body.get("id")) == error


# -- the adapters' shape (issue 49): module-level handlers, no function over 80 lines -----------------

PACKAGE = Path(__file__).resolve().parent.parent / "knowmesh_mcp"


def shape_problems(path: Path) -> list[str]:
    """Functions defined inside another function, and functions over 80 lines, in one module."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    problems = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, functions):
            continue
        if node.end_lineno - node.lineno + 1 > 80:
            problems.append(f"{path.name}:{node.lineno} {node.name} is {node.end_lineno - node.lineno + 1} lines")
        problems += [f"{path.name}:{inner.lineno} {inner.name} is defined inside {node.name}"
                     for inner in ast.walk(node) if inner is not node and isinstance(inner, functions)]
    return problems


# The middleware and the transport wrap an ASGI `send`/`receive` or a stream in a closure, as
# middleware does; every other adapter module holds handlers, which are module-level.
TRANSPORT = {"api/guard.py", "mcp/http_checks.py", "mcp/stdio.py"}


@pytest.mark.parametrize("module", sorted(
    module for adapter in ("api", "mcp", "web", "cli") for path in (PACKAGE / adapter).rglob("*.py")
    if (module := path.relative_to(PACKAGE).as_posix()) not in TRANSPORT
))
def test_adapters_define_no_function_inside_another_and_none_over_80_lines(module):
    assert shape_problems(PACKAGE / module) == []


def test_every_v1_route_is_a_module_level_handler():
    from knowmesh_mcp.api import routes as api_routes

    for route in api_routes.ROUTES:
        by_method = getattr(route.endpoint, "__self__", None)
        handlers = by_method.handlers.values() if isinstance(by_method, api_routes.ByMethod) else [route.endpoint]
        for handler in handlers:
            assert handler.__module__ == "knowmesh_mcp.api.routes" and handler.__qualname__ == handler.__name__, route.path
            assert getattr(api_routes, handler.__name__) is handler, route.path
