"""`GET /v1/openapi.json`: it names every route, the spec's example requests fit its request
models, and Schemathesis fuzzing a running `serve --http` against it finds no 5xx, no
undocumented status, content type or header, no response off its schema and no hang."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import httpx2
import pytest
from jsonschema import Draft202012Validator
from starlette.routing import Route

from knowmesh_mcp.api import bodies
from knowmesh_mcp.api.routes import ByMethod
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.api.openapi import OPERATIONS, openapi_document
from knowmesh_mcp.services.mesh import Mesh

from conftest import free_port

FUZZ_CHECKS = ",".join((
    "not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance",
    "response_headers_conformance", "unsupported_method", "allow_header_conformance", "missing_required_header",
))


def test_every_route_of_the_app_is_documented():
    app = build_app(db_path=":memory:", with_mcp=False)
    documented = {(op.path, op.method) for op in OPERATIONS}
    routed = set()
    for route in app.routes:
        assert isinstance(route, Route)
        path = re.sub(r"\{(\w+):segment\}", r"{\1}", route.path)  # a node id whole, or its parts, as documented:
        for whole in ("{node:path}", "{node:node}", "{rest:path}"):
            path = path.replace(whole, "{ecosystem}/{slug}")
        by_method = getattr(route.endpoint, "__self__", None)  # a node route takes every method and answers 405 itself
        methods = set(by_method.handlers) if isinstance(by_method, ByMethod) else route.methods - {"HEAD"}
        routed |= {(path, method) for method in methods}
    assert routed <= documented, sorted(routed - documented)
    node_routes = {(path, method) for path, method in documented if path.startswith("/v1/nodes/{")}
    assert len(node_routes) == 13 and node_routes <= routed  # the node routes' suffixes, with .md and pinned versions


@pytest.mark.anyio
async def test_every_documented_operation_is_routed(service: Mesh):
    """No documented operation falls through to the router's 404 or 405 for a real node."""
    app = build_app(service=service, with_mcp=False)
    values = {"ecosystem": "python", "slug": "module-not-found-venv", "version": "sha256:0", "revision_id": "rev_0",
              "task_id": "1", "number": "1", "name": "protocol.md"}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        for op in OPERATIONS:
            path = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], op.path)
            if op.path == "/docs/{name}":
                path = "/docs/protocol"
            response = await client.request(op.method, path, json={} if op.method != "GET" else None)
            assert response.status_code != 405, (op.method, path)
            if response.status_code == 404 and op.media != "text/html":  # a 404 of ours names what is missing, never the route
                assert response.json()["error"]["code"] != "not_found", (op.method, path)


@pytest.mark.anyio
async def test_the_document_is_served_and_is_openapi_3_1(service: Mesh):
    app = build_app(service=service, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        response = await client.get("/v1/openapi.json")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    document = response.json()
    assert document == json.loads(json.dumps(openapi_document()))
    assert document["openapi"] == "3.1.0"
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            assert operation["responses"], (method, path)
            for status, answer in operation["responses"].items():
                for media in answer.get("content", {}).values():
                    Draft202012Validator.check_schema(media["schema"])
    assert document["paths"]["/v1/nodes"]["post"]["responses"]["201"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CreatedNode"}


@pytest.mark.anyio
async def test_405_names_the_methods_a_path_takes(service: Mesh):
    app = build_app(service=service, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        for method, path, allowed in [
            ("DELETE", "/v1/nodes", "GET, POST"),
            ("PUT", "/v1/search", "GET, POST"),
            ("POST", "/v1/nodes/python/module-not-found-venv", "HEAD, GET"),
            ("POST", "/v1/nodes/python/module-not-found-venv/article", "HEAD, GET, PATCH"),
            ("PATCH", "/v1/nodes/python/module-not-found-venv/article/revisions", "HEAD, GET, POST"),
            ("DELETE", "/v1/nodes/python/module-not-found-venv/failures", "HEAD, GET, POST"),
            ("GET", "/v1/nodes/python/module-not-found-venv/solutions", "POST"),
        ]:
            response = await client.request(method, path)
            assert response.status_code == 405, (method, path)
            assert response.json()["error"]["code"] == "method_not_allowed"
            assert set(response.headers["allow"].split(", ")) >= set(allowed.split(", ")) - {"HEAD"}, (method, path)


SPEC_REQUESTS = Path(__file__).parent / "fixtures" / "spec_requests.json"


def test_the_specs_example_requests_fit_the_request_models():
    """Every example request of the reference specification is valid for its documented model."""
    models = {
        ("POST", "/v1/feedback"): bodies.Feedback,
        ("POST", "/v1/nodes"): bodies.NewNode,
        ("POST", "/failures"): bodies.FailedAttempt,
        ("PATCH", "/article"): bodies.ArticlePatch,
        ("POST", "/undo"): bodies.Undo,
        ("POST", "/v1/issues"): bodies.Issue,
    }
    checked = set()
    for request in json.loads(SPEC_REQUESTS.read_text())["requests"]:
        if request["path"].endswith("/article/revisions"):
            continue  # its article is elided ("...": "complete node document")
        key = next(key for key in models if key[0] == request["method"] and request["path"].endswith(key[1]))
        models[key].model_validate(request["body"])
        checked.add(key)
    assert checked == set(models)


@pytest.fixture
def running_server(tmp_path):
    """`knowmesh-mcp serve --http` in a subprocess (write limit off, so fuzzed writes get past it)."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "knowmesh_mcp.cli.main", "serve", "--http", "--port", str(port), "--db", str(tmp_path / "k.db"),
         "--write-limit", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/v1/openapi.json", timeout=5):
                break
        except OSError:
            assert server.poll() is None, server.communicate()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
    try:
        yield url
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
        assert b"Traceback" not in stderr, stderr.decode()[-4000:]


@pytest.mark.slow
def test_schemathesis_finds_nothing_against_a_running_server(running_server, tmp_path):
    schemathesis = shutil.which("schemathesis") or pytest.fail("schemathesis is a test dependency: pip install -e '.[test]'")
    result = subprocess.run(
        [schemathesis, "run", f"{running_server}/v1/openapi.json", "--checks", FUZZ_CHECKS,
         "--max-examples", "40", "--seed", "20261201", "--request-timeout", "10", "--max-response-time", "5",
         "--no-color"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    print(result.stdout[-3000:])
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-4000:]
    # Schemathesis leaves out the document's own URL.
    assert f"Tested: {len(OPERATIONS) - 1}" in result.stdout and "Stateful" in result.stdout
    generated = int(re.search(r"(\d+) generated", result.stdout).group(1))
    assert generated > 1000, result.stdout[-3000:]
