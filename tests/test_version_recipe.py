"""A node's `version` can be checked by a client: the document a read returns hashes to it.

The recipe (docs/version.md) is written here again on its own, not taken from the server: the six
keys id, ecosystem, title, license, signature and content of the read's `article` (each solution
without its server-managed `revision`), as canonical JSON (keys sorted, no spaces, UTF-8, non-ASCII
as itself), SHA-256, prefixed `sha256:`. Checked for a node with a non-ASCII title, answers scoped
to environments and an alias, over the real HTTP server, the service's read and MCP `read_article`
(in-process and through a remote mesh), after an edit, and on a pinned version; and the five-line
example of docs/version.md is run as written against the live server.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from conftest import BASE_DOCUMENT, opened, serving
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

DOCS = Path(__file__).resolve().parent.parent / "docs" / "version.md"
NODE = "python/module-not-found-venv"
VERSION_KEYS = ("id", "ecosystem", "title", "license", "signature", "content")
TITLE = "ModuleNotFoundError: „requests“ fehlt – 模块未找到 🐍"


def recomputed(article: dict[str, Any]) -> str:
    """The version of a read's `article`, by the recipe of docs/version.md."""
    document = {key: article[key] for key in VERSION_KEYS}
    content = document["content"]
    document["content"] = {**content, "solutions": [{key: value for key, value in solution.items() if key != "revision"}
                                                    for solution in content["solutions"]]}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def submitted() -> dict[str, Any]:
    """What a client sends: a non-ASCII title (padded with spaces), an ecosystem alias, no licence, no
    template, an alias, two answers scoped to disjoint environments (one with no `expected`)."""
    document = copy.deepcopy(BASE_DOCUMENT)
    document["title"] = f"  {TITLE} "
    document["ecosystem"] = "py"
    document["signature"]["aliases"] = ["ImportError: No module named requests", "Kein Modul namens „requests“"]
    del document["content"]["solutions"][1]["verify"]["expected"]
    return document


@pytest.fixture
async def mesh(backend, request, tmp_path) -> AsyncIterator[Mesh]:
    """An empty mesh on the test's backend (this module's own, not conftest's `service`)."""
    target = tmp_path / "test.db" if backend == "sqlite" else request.getfixturevalue("pg_database")
    async with opened(target) as service:
        yield service


@pytest.fixture
async def client(mesh: Mesh) -> AsyncIterator[httpx2.AsyncClient]:
    async with serving(build_app(service=mesh)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=10) as http:
            yield http


def assert_the_recipe_holds(article: dict[str, Any], version: str) -> None:
    # The document is exactly the six keys beside the two server-managed ones; a new top-level key
    # would have to be named in the recipe (and here) first.
    assert set(article) == {*VERSION_KEYS, "status", "version"}, sorted(article)
    assert article["version"] == version
    assert recomputed(article) == version


async def test_the_document_read_over_http_hashes_to_its_version(client: httpx2.AsyncClient):
    created = await client.post("/v1/nodes", json=submitted())
    assert created.status_code == 201, created.text
    version = created.json()["version"]

    read = await client.get(f"/v1/nodes/{NODE}", params={"fields": "article"})
    assert read.status_code == 200
    body = read.json()
    assert body["version"] == version == read.headers["x-knowmesh-node-version"]
    article = body["article"]
    assert article["title"] == TITLE and article["ecosystem"] == "python" and article["license"] == "CC0-1.0"
    assert [s["env"] for s in article["content"]["solutions"]] == [["macos"], ["linux"]]
    assert len(article["signature"]["aliases"]) == 2
    assert_the_recipe_holds(article, version)

    edit_form = (await client.get(f"/v1/nodes/{NODE}/article")).json()
    assert_the_recipe_holds(edit_form["article"], version)


async def test_an_edit_and_a_pinned_version_hash_too(client: httpx2.AsyncClient):
    first = (await client.post("/v1/nodes", json=submitted())).json()["version"]
    edited = await client.patch(f"/v1/nodes/{NODE}/article", json={
        "base_revision": 1, "agent": {"id": "agent-v"}, "summary": "a non-ASCII edit",
        "ops": [{"op": "set", "path": "/content/solutions/venv-linux/notes", "value": "Déjà vu: „the other python“."},
                {"op": "set", "path": "/content/solutions/venv-linux/fix", "value": ["python3 -m venv .venv",
                                                                              ".venv/bin/pip install requests"]}],
    })
    assert edited.status_code == 200, edited.text
    second = edited.json()["version"]
    assert second != first
    current = (await client.get(f"/v1/nodes/{NODE}", params={"fields": "article"})).json()
    assert current["version"] == second and current["article"]["content"]["solutions"][1]["revision"] == 2
    assert_the_recipe_holds(current["article"], second)
    pinned = await client.get(f"/v1/nodes/{NODE}/versions/{first}", params={"fields": "article"})
    assert pinned.status_code == 200, pinned.text
    assert_the_recipe_holds(pinned.json()["article"], first)


async def test_the_service_read_and_mcp_read_article_hash_to_the_version(mesh: Mesh, mcp_connect):
    version = (await mesh.creation.create_node(submitted()))["version"]
    read = await mesh.nodes.read_node(NODE, mesh.nodes.read_request(fields="article"))
    assert read.body["version"] == version
    assert_the_recipe_holds(read.body["article"], version)

    async with mcp_connect(mesh, "auto") as mcp:
        result = await mcp.call_tool("read_article", {"id": NODE, "fields": "article"})
    assert not result.is_error, result.content
    body = result.structured_content
    assert body["truncated"] == [] and body["version"] == version
    assert_the_recipe_holds(body["article"], version)
    assert_the_recipe_holds(json.loads(result.content[0].text)["article"], version)  # the text form a client sees


async def test_the_example_of_docs_version_md_runs_as_written(client: httpx2.AsyncClient):
    """The docs' five lines, against the live server (its address swapped in), in a thread of their own."""
    created = await client.post("/v1/nodes", json=submitted())
    assert created.status_code == 201, created.text
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "docs/version.md has its Python example"
    example = blocks[0]
    assert len(example.strip().splitlines()) == 5, example
    assert "http://127.0.0.1:8765" in example and NODE in example
    code = example.replace("http://127.0.0.1:8765", str(client.base_url).rstrip("/"))
    scope: dict[str, Any] = {}
    await anyio.to_thread.run_sync(exec, code, scope)  # its last line asserts the version
    assert scope["read"]["version"] == created.json()["version"]
