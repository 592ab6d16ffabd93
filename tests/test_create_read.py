"""Create and read through the service: the 201 body, conflicts, similarity, env selection, fields."""

from __future__ import annotations

import pytest

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]


async def test_create_returns_the_201_body_and_forces_draft(service: Mesh, make_doc):
    created = await service.creation.create_node(make_doc(status="verified", license="MIT"))
    assert created["id"] == "python/module-not-found-venv"
    assert created["status"] == "draft"
    assert created["trust"] == "untrusted-data"
    assert created["path"] == "/v1/nodes/python/module-not-found-venv"
    assert created["html_path"] == "/nodes/python/module-not-found-venv"
    assert created["version"].startswith("sha256:")
    assert created["similar"] == []
    read = await service.nodes.read_node(created["id"])
    assert read.body["license"] == "CC0-1.0"
    assert read.body["version"] == created["version"]
    assert read.body["revision"] == 1


async def test_node_exists(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    with pytest.raises(KnowmeshError) as caught:
        await service.creation.create_node(make_doc(error="something else entirely"))
    assert (caught.value.status, caught.value.code) == (409, "node_exists")
    assert caught.value.top_level["next"]["edit_article"]["body"]["base_revision"] == 1


async def test_duplicate_node_needs_same_signature_and_same_quoted_values(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    with pytest.raises(KnowmeshError) as caught:
        # Same error from another path and line number: still the same problem.
        await service.creation.create_node(make_doc(id="py/again", error="  modulenotfounderror: No module named 'requests'  "))
    body = caught.value.to_body()
    assert (caught.value.status, body["error"]["code"]) == (409, "duplicate_node")
    assert body["canonical"] == {"id": "python/module-not-found-venv", "path": "/v1/nodes/python/module-not-found-venv",
                                 "html_path": "/nodes/python/module-not-found-venv"}
    edit = body["next"]["edit_article"]
    assert edit["method"] == "PATCH" and edit["tool"] == "patch_article"
    assert edit["arguments"]["id"] == "python/module-not-found-venv"
    # Another module is a sibling, not a duplicate.
    sibling = await service.creation.create_node(make_doc(id="python/numpy-missing", error="ModuleNotFoundError: No module named 'numpy'"))
    assert sibling["similar"][0]["id"] == "python/module-not-found-venv"


async def test_similar_lists_same_ecosystem_first_and_never_blocks(service: Mesh, make_doc):
    await service.creation.create_node(make_doc(id="node/module-not-found", ecosystem="node",
                                       error="ModuleNotFoundError: No module named 'requestsjs'",
                                       title="ModuleNotFoundError although the package is installed"))
    await service.creation.create_node(make_doc(id="python/module-missing-2", error="ModuleNotFoundError: No module named 'lxml'",
                                       title="ModuleNotFoundError after upgrading"))
    created = await service.creation.create_node(make_doc(error="ModuleNotFoundError: No module named 'pandas'"))
    ids = [item["id"] for item in created["similar"]]
    assert ids[0] == "python/module-missing-2"
    assert "node/module-not-found" in ids
    assert len(ids) <= 3


async def test_overlapping_answers_are_refused(service: Mesh, make_doc):
    raw = make_doc()
    raw["content"]["solutions"][1]["env"] = []  # no OS: covers macOS too
    with pytest.raises(KnowmeshError) as caught:
        await service.creation.create_node(raw)
    assert (caught.value.status, caught.value.code) == (409, "overlapping_answer")
    assert caught.value.details["conflicting_answers"][0]["solutions"] == ["venv-macos", "venv-linux"]
    assert await service.store.count_nodes() == 0


async def test_disjoint_runtime_ranges_are_allowed(service: Mesh, make_doc):
    raw = make_doc()
    raw["content"]["solutions"][0]["env"] = ["python<3.12"]
    raw["content"]["solutions"][1]["env"] = ["python>=3.12"]
    await service.creation.create_node(raw)
    old = await service.nodes.read_node(raw["id"], service.nodes.read_request(env="linux,python-3.11"))
    new = await service.nodes.read_node(raw["id"], service.nodes.read_request(env="linux,python-3.12"))
    assert [s["id"] for s in old.body["content"]["solutions"]] == ["venv-macos"]
    assert [s["id"] for s in new.body["content"]["solutions"]] == ["venv-linux"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [("macos-15,python-3.12,pip", "venv-macos"), ("darwin", "venv-macos"), ("ubuntu-24.04,python-3.12", "venv-linux"),
     ("python-3.12,linux,pip,arm64", "venv-linux")],
)
async def test_env_selects_exactly_one_answer(service: Mesh, make_doc, env, expected):
    await service.creation.create_node(make_doc())
    read = await service.nodes.read_node("python/module-not-found-venv", service.nodes.read_request(env=env))
    assert [s["id"] for s in read.body["content"]["solutions"]] == [expected]
    assert read.body["no_known_working_solution"] is False
    assert "next" not in read.body


async def test_without_env_every_slot_and_revision_is_returned(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    read = await service.nodes.read_node("python/module-not-found-venv")
    assert [(s["id"], s["revision"]) for s in read.body["content"]["solutions"]] == [("venv-macos", 1), ("venv-linux", 1)]
    assert read.body["answer_state"] == "draft"
    assert read.body["stats"]["sample_size"] == 0


async def test_env_without_a_slot_says_so_and_carries_next(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    read = await service.nodes.read_node("python/module-not-found-venv", service.nodes.read_request(env="windows-11,python-3.12"))
    body = read.body
    assert body["content"]["solutions"] == []
    assert body["has_answer"] is True and body["no_known_working_solution"] is True
    assert body["next"]["patch_article"]["body"]["base_revision"] == 1
    assert body["next"]["report_failed_attempt"]["body"]["environment"]["os"] == "windows-11"
    assert "No usable answer for this environment." in read.markdown()


async def test_open_problem_read(service: Mesh, make_doc):
    raw = make_doc()
    raw["content"]["solutions"] = []
    await service.creation.create_node(raw)
    read = await service.nodes.read_node(raw["id"])
    assert read.body["has_answer"] is False
    assert read.headers()["X-Knowmesh-Has-Answer"] == "false"
    assert read.body["content"]["failed_attempts"] == ["pip install requests (went to the system interpreter)"]
    next_block = read.body["next"]
    assert next_block["reason"] == "no_answer"
    assert next_block["patch_article"]["body"]["ops"][0]["path"] == "/content/solutions/-"
    assert next_block["patch_article"]["arguments"]["base_revision"] == 1
    assert next_block["report_failed_attempt"]["path"] == f"/v1/nodes/{raw['id']}/failures"
    assert next_block["candidate_state"] == "draft"
    markdown = read.markdown()
    assert "has_answer: false" in markdown
    assert "No answer recorded yet" in markdown


async def test_failed_attempts_are_withheld_once_an_answer_exists(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    plain = await service.nodes.read_node("python/module-not-found-venv")
    assert plain.body["content"]["failed_attempts"] == []
    assert plain.body["content"]["failed_attempts_archived"] is True
    assert "Archived now that an answer exists" in plain.markdown()
    restored = await service.nodes.read_node("python/module-not-found-venv", service.nodes.read_request(include="archived_failures"))
    assert restored.body["content"]["failed_attempts"] == ["pip install requests (went to the system interpreter)"]


async def test_alternatives_only_on_request(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    assert "alternatives" not in (await service.nodes.read_node("python/module-not-found-venv")).body["content"]
    read = await service.nodes.read_node("python/module-not-found-venv", service.nodes.read_request(include="alternatives"))
    assert read.body["content"]["alternatives"] == ["pip install --user requests"]


@pytest.mark.parametrize(
    ("fields", "sections"),
    [("symptom", {"symptom"}), ("fix", {"solutions"}), ("verify,failed", {"solutions", "failed_attempts", "failed_attempts_archived"}),
     ("root_cause,boundaries", {"root_cause", "boundaries"}), ("provenance", {"solutions"})],
)
async def test_fields_filter(service: Mesh, make_doc, fields, sections):
    await service.creation.create_node(make_doc())
    read = await service.nodes.read_node("python/module-not-found-venv", service.nodes.read_request(fields=fields))
    assert set(read.body["content"]) == sections
    assert ("stats" in read.body) is ("outcomes" in fields)


async def test_unknown_field_and_include_values_are_400(service: Mesh):
    for kwargs in ({"fields": "symptom,secrets"}, {"include": "everything"}):
        with pytest.raises(KnowmeshError) as caught:
            service.nodes.read_request(**kwargs)
        assert caught.value.status == 400


async def test_solution_parameter(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    read = await service.nodes.read_node("python/module-not-found-venv", service.nodes.read_request(solution="venv-linux"))
    assert [s["id"] for s in read.body["content"]["solutions"]] == ["venv-linux"]
    with pytest.raises(KnowmeshError) as caught:
        await service.nodes.read_node("python/module-not-found-venv", service.nodes.read_request(solution="nope"))
    assert (caught.value.status, caught.value.code) == (404, "solution_not_found")


async def test_markdown_sections_in_schema_order(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    markdown = (await service.nodes.read_node("python/module-not-found-venv", service.nodes.read_request(include="alternatives"))).markdown()
    assert markdown.startswith("---\nid: \"python/module-not-found-venv\"\nversion: \"sha256:")
    order = ["## Symptom", "## Context", "## Root cause", "## Solutions", "## Alternatives", "## Failed attempts", "## Boundaries"]
    positions = [markdown.index(heading) for heading in order]
    assert positions == sorted(positions)
    assert "1. `python3 -m venv .venv`" in markdown


async def test_markdown_cannot_be_broken_by_node_text(service: Mesh, make_doc):
    raw = make_doc()
    raw["content"]["symptom"] = "<script>alert(1)</script>"
    raw["content"]["solutions"][0]["fix"] = ["echo ``` && rm -rf /tmp/x"]
    await service.creation.create_node(raw)
    markdown = (await service.nodes.read_node(raw["id"])).markdown()
    assert "<script>" not in markdown
    assert "```` echo ``` && rm -rf /tmp/x ````" not in markdown  # spans are longer than any run inside
    assert "````echo ``` && rm -rf /tmp/x````" in markdown


async def test_pinned_versions_never_change(service: Mesh, make_doc):
    created = await service.creation.create_node(make_doc())
    pinned = await service.nodes.read_version(created["id"], created["version"])
    assert pinned.body["version"] == created["version"]
    assert pinned.cache_control.endswith("immutable")
    with pytest.raises(KnowmeshError) as caught:
        await service.nodes.read_version(created["id"], "sha256:" + "0" * 64)
    assert caught.value.code == "version_not_found"


async def test_etag_changes_with_the_view(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    plain = await service.nodes.read_node("python/module-not-found-venv")
    again = await service.nodes.read_node("python/module-not-found-venv")
    mac = await service.nodes.read_node("python/module-not-found-venv", service.nodes.read_request(env="macos"))
    assert plain.etag == again.etag != mac.etag
    headers = plain.headers()
    assert headers["X-Knowmesh-Content-Trust"] == "untrusted-data"
    assert headers["X-Knowmesh-Article-Revision"] == "1"
    assert headers["X-Knowmesh-Node-Version"] == plain.body["version"]


async def test_list_pages_with_a_cursor_scoped_to_the_ecosystem(service: Mesh, make_doc):
    for index in range(7):
        await service.creation.create_node(make_doc(id=f"python/p{index}", error=f"KeyError: 'k{index}' in p{index}x"))
    await service.creation.create_node(make_doc(id="go/g1", ecosystem="golang", error="go: cannot find main module"))
    seen, cursor = [], None
    while True:
        page = await service.nodes.list_nodes(ecosystem="py", limit=3, cursor=cursor, fields="title")
        seen += [entry["id"] for entry in page["nodes"]]
        assert all(set(entry) == {"id", "title"} for entry in page["nodes"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"python/p{i}" for i in range(7)]
    first = await service.nodes.list_nodes(ecosystem="python", limit=2)
    with pytest.raises(KnowmeshError) as caught:
        await service.nodes.list_nodes(ecosystem="go", cursor=first["next_cursor"])
    assert caught.value.code == "invalid_cursor"
    assert (await service.nodes.list_nodes(limit=1000))["limit"] == 100
    for bad in ({"limit": 0}, {"limit": -5}, {"cursor": "!!!"}, {"fields": "title,secret"}):
        with pytest.raises(KnowmeshError) as caught:
            await service.nodes.list_nodes(**bad)
        assert caught.value.status == 400
    everything = await service.nodes.list_nodes()
    assert {e["id"] for e in everything["nodes"]} >= {"go/g1", "python/p0"}
    assert set(everything["nodes"][0]) == {"id", "title", "ecosystem", "status", "has_answer", "updated_at", "signature", "path",
                                           "html_path"}
