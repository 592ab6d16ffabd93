"""The starter corpus: what a new user sees first."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from knowmesh_mcp.environment import scopes_overlap, solution_scope
from knowmesh_mcp.model import validate_node
from knowmesh_mcp.normalize import quoted_values, signature_hash
from knowmesh_mcp.publishing import check_overlaps
from knowmesh_mcp.service import Service, load_documents
from knowmesh_mcp.store import store_dir

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
    service = await Service.open(tmp_path / "seeded.db")
    try:
        assert await service.store.count_nodes() == len(DOCUMENTS)
        mac = await service.read_node("shell/sed-in-place-bsd-vs-gnu", service.read_request(env="macos-15"))
        linux = await service.read_node("shell/sed-in-place-bsd-vs-gnu", service.read_request(env="ubuntu-24.04"))
        assert mac.body["content"]["solutions"][0]["id"] != linux.body["content"]["solutions"][0]["id"]
        statuses = {json.loads(json.dumps(d))["status"] async for d in service.export_documents()}
        assert statuses == {"draft", "verified"}
    finally:
        await service.close()
