"""The starter corpus: what a new user sees first."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from knowmesh_mcp.core.environment import scopes_overlap, solution_scope
from knowmesh_mcp.core.model import validate_node
from knowmesh_mcp.core.normalize import quoted_values, signature_hash
from knowmesh_mcp.services.publishing import check_overlaps
from knowmesh_mcp.services.import_export import load_documents
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.store import STARTER_CORPUS, open_store, store_dir

from conftest import opened

pytestmark = pytest.mark.backends("sqlite", "postgres")

DOCUMENTS = [raw for _, raw in load_documents([store_dir() / "starter"])]


def test_size_and_spread():
    assert len(DOCUMENTS) >= 40
    ecosystems = Counter(validate_node(raw).ecosystem for raw in DOCUMENTS)
    for required in ("python", "node", "typescript", "go", "rust", "shell", "git", "docker", "postgres"):
        assert ecosystems[required] >= 1, required


@pytest.mark.parametrize("raw", DOCUMENTS, ids=[raw["id"] for raw in DOCUMENTS])
def test_every_document_is_valid_with_one_answer_per_scope(raw):
    document = validate_node(raw)
    check_overlaps(document)
    for solution in document.content.solutions:
        assert solution.fix and solution.verify.command.strip()


def test_ids_and_signatures_are_unique():
    ids = [raw["id"] for raw in DOCUMENTS]
    assert len(ids) == len(set(ids))
    keys = [(signature_hash(raw["signature"]["error"]), tuple(quoted_values(raw["signature"]["error"]))) for raw in DOCUMENTS]
    assert len(keys) == len(set(keys)), "two starter nodes would be duplicate_node of each other"


def test_environment_specific_answers_and_open_problems():
    per_os = []
    for raw in DOCUMENTS:
        document = validate_node(raw)
        scopes = [solution_scope(s.env, document.signature.environment) for s in document.content.solutions]
        if len(scopes) >= 2 and all(scope.os_families for scope in scopes):
            assert not any(scopes_overlap(a, b) for i, a in enumerate(scopes) for b in scopes[i + 1:])
            per_os.append(document.id)
    assert len(per_os) >= 5
    open_problems = [raw["id"] for raw in DOCUMENTS if raw["content"]["solutions"] == []]
    assert len(open_problems) >= 3


@pytest.mark.anyio
async def test_seeded_database_serves_the_sed_node_per_os(tmp_path):
    service = await Mesh.open(tmp_path / "seeded.db")
    try:
        assert await service.store.count_nodes() == len(DOCUMENTS)
        mac = await service.nodes.read_node("shell/sed-in-place-bsd-vs-gnu", service.nodes.read_request(env="macos-15"))
        linux = await service.nodes.read_node("shell/sed-in-place-bsd-vs-gnu", service.nodes.read_request(env="ubuntu-24.04"))
        assert mac.body["content"]["solutions"][0]["id"] != linux.body["content"]["solutions"][0]["id"]
        statuses = {json.loads(json.dumps(d))["status"] async for d in service.documents.export_documents()}
        assert statuses == {"draft", "verified"}
    finally:
        await service.close()


@pytest.fixture
def new_mesh(backend, request, tmp_path) -> str:
    """Where a new mesh is to be made: a SQLite file, or an empty PostgreSQL database."""
    return str(tmp_path / "new.db") if backend == "sqlite" else request.getfixturevalue("pg_database")


@pytest.mark.slow
@pytest.mark.anyio
async def test_processes_opening_a_new_mesh_at_once_each_find_its_starter_corpus(new_mesh):
    """Each agent session starts its own stdio server: four processes opening one new mesh at once
    (three used to find nothing: they opened it while the first was still loading the corpus)."""
    command = [sys.executable, "-m", "knowmesh_mcp.cli.main", "search", "--json", "--db", new_mesh,
               "ModuleNotFoundError: No module named 'requests'"]
    searches = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for search in searches:
        out, err = search.communicate(timeout=120)
        assert search.returncode == 0, err
        assert json.loads(out)["results"][0]["id"] == "python/module-not-found-venv"
    store = await open_store(new_mesh)
    try:
        assert await store.count_nodes() == len(DOCUMENTS)
        assert await store.count_rows("article_revisions") == len(DOCUMENTS), "each node created once"
        assert await store.get_meta(STARTER_CORPUS) == "loaded"
    finally:
        await store.close()


@pytest.mark.anyio
async def test_a_load_that_died_half_way_is_finished_by_the_next_open(new_mesh):
    store = await open_store(new_mesh)  # the mesh made, then its process gone after ten documents
    await Mesh(store).documents.import_documents(load_documents([store_dir() / "starter"])[:10], summary="Starter corpus")
    await store.close()
    async with opened(new_mesh, seed=True) as service:
        assert await service.store.count_nodes() == len(DOCUMENTS)
        assert await service.store.count_rows("article_revisions") == len(DOCUMENTS)


@pytest.mark.anyio
async def test_a_mesh_made_empty_stays_empty(new_mesh):
    async with opened(new_mesh, seed=False):
        pass
    async with opened(new_mesh, seed=True) as service:
        assert await service.store.count_nodes() == 0
        assert await service.store.get_meta(STARTER_CORPUS) == "declined"
