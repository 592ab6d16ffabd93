"""Article edits through the service, the HTTP routes and the MCP tools: revisions, patches,
conflicts, solution revisions, undo and history."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

NODE = "python/module-not-found-venv"
AGENT = {"id": "agent-a1", "model": "m"}


@pytest.fixture
async def node(service: Mesh, make_doc) -> Mesh:
    await service.creation.create_node(make_doc())
    return service


async def patch(service: Mesh, base: int, *ops: dict, agent=AGENT, summary="edit") -> dict:
    return await service.articles.patch_article(NODE, base_revision=base, ops=list(ops), agent=agent, summary=summary)


async def expect_error(call, status: int, code: str) -> KnowmeshError:
    with pytest.raises(KnowmeshError) as caught:
        await call
    assert (caught.value.status, caught.value.code) == (status, code), caught.value.to_body()
    return caught.value


async def snapshot(service: Mesh) -> tuple:
    rows = await service.store.revisions(NODE)
    current = await service.store.get_node(NODE)
    return len(rows), current.version, current.revision


# -- 1. current article and revisions ----------------------------------------------------------

async def test_current_article_carries_revision_and_cache_headers(node: Mesh):
    article = await node.articles.read_article(NODE)
    assert article.body["revision"] == 1
    assert article.body["article"]["content"]["solutions"][0]["revision"] == 1
    assert article.cache_control == "public, no-cache, must-revalidate"
    edited = await patch(node, 1, {"op": "set", "path": "/title", "value": "A clearer title"})
    after = await node.articles.read_article(NODE)
    assert after.etag != article.etag and after.body["revision"] == 2 == edited["revision"]
    assert (await node.nodes.read_node(NODE)).body["title"] == "A clearer title"  # current at once


async def test_version_and_revision_are_written_together(node: Mesh, monkeypatch):
    """A failure in the middle of publishing leaves neither the new version nor its revision."""
    before = await snapshot(node)

    class DiskError(Exception):
        pass

    async with node.store.write() as tx:
        writer = type(tx)  # this backend's Writer
    original = writer.write_search_rows

    async def fail_after_version(self, rows, **kwargs):
        await original(self, rows, **kwargs)
        raise DiskError("disk I/O error (simulated, after the version row)")

    monkeypatch.setattr(writer, "write_search_rows", fail_after_version)
    with pytest.raises(DiskError):
        await patch(node, 1, {"op": "set", "path": "/title", "value": "Never published"})
    monkeypatch.undo()
    assert await snapshot(node) == before
    assert (await node.nodes.read_node(NODE)).body["title"] != "Never published"


async def test_revision_list_records_author_summary_hash_and_changes(node: Mesh):
    edited = await patch(node, 1, {"op": "set", "path": "/content/context", "value": "macOS 15, pip, pyenv."},
                         summary="Name the shell setup")
    history = await node.articles.article_history(NODE)
    first, second = history["revisions"]
    assert (first["revision"], first["kind"], first["parent_revision"]) == (1, "create", None)
    assert (second["revision"], second["kind"], second["parent_revision"]) == (2, "edit", 1)
    assert second["agent"] == {**AGENT, "proven": False} and second["summary"] == "Name the shell setup"
    assert second["content_hash"] == edited["version"] and second["revision_id"] == edited["revision_id"]
    assert second["changes"] == [{"op": "set", "path": "/content/context", "old": "python 3.12, pip, a virtualenv "
                                  "created but not used by the interpreter.", "new": "macOS 15, pip, pyenv."}]


# -- 2. patches ---------------------------------------------------------------------------------

async def test_patch_addresses_solutions_by_id_and_appends(node: Mesh):
    result = await patch(
        node, 1,
        {"op": "set", "path": "/content/solutions/venv-linux/fix/1", "value": ".venv/bin/python -m pip install -U requests"},
        {"op": "set", "path": "/content/solutions/venv-linux/fix/-", "value": ".venv/bin/python -c 'import requests'"},
        {"op": "remove", "path": "/content/failed_attempts/0"},
        {"op": "set", "path": "/content/boundaries/-", "value": "Not for conda environments."},
    )
    solutions = {s["id"]: s for s in (await node.nodes.read_node(NODE)).body["content"]["solutions"]}
    assert solutions["venv-linux"]["fix"][1:] == [".venv/bin/python -m pip install -U requests",
                                                  ".venv/bin/python -c 'import requests'"]
    assert {c["path"] for c in result["changes"]} == {"/content/solutions/venv-linux/fix", "/content/failed_attempts",
                                                      "/content/boundaries"}


async def test_new_answer_with_solutions_dash(node: Mesh):
    answer = {"id": "venv-windows", "title": "Windows", "env": ["windows"], "fix": ["py -m pip install requests"],
              "verify": {"command": "py -c \"import requests\""}}
    result = await patch(node, 1, {"op": "set", "path": "/content/solutions/-", "value": answer})
    assert result["solutions"]["venv-windows"] == 1
    read = await node.nodes.read_node(NODE, node.nodes.read_request(env="windows-11"))
    assert [s["id"] for s in read.body["content"]["solutions"]] == ["venv-windows"]


async def test_patch_rules(node: Mesh):
    before = await snapshot(node)
    await expect_error(patch(node, 1, {"op": "set", "path": "/content/solutions/0/fix/0", "value": "x"}), 400,
                       "id_addressing_required")
    await expect_error(patch(node, 1, {"op": "set", "path": "/content/solutions/nope/fix/0", "value": "x"}), 404,
                       "solution_not_found")
    for field in ("/id", "/ecosystem", "/license", "/version"):
        await expect_error(patch(node, 1, {"op": "set", "path": field, "value": "x"}), 400, "immutable_field")
    await expect_error(patch(node, 1, {"op": "set", "path": "/content/fix", "value": ["legacy"]}), 400, "invalid_node")
    await expect_error(patch(node, 1, {"op": "remove", "path": "/content/symptom"}), 400, "invalid_node")
    # A second answer whose scope overlaps an existing one is refused, and nothing is written.
    overlapping = {"id": "any-os", "fix": ["x"], "verify": {"command": "true"}}
    error = await expect_error(patch(node, 1, {"op": "set", "path": "/content/solutions/-", "value": overlapping}),
                               409, "overlapping_answer")
    assert error.details["conflicting_answers"]
    for bad in ({"base_revision": None}, {"base_revision": "1"}, {"base_revision": 0}):
        await expect_error(node.articles.patch_article(NODE, ops=[{"op": "remove", "path": "/title"}], agent=AGENT,
                                              summary="x", **bad), 400, "missing_base_revision")
    await expect_error(node.articles.patch_article(NODE, base_revision=1, ops=[{"op": "set", "path": "/title", "value": "y"}],
                                          agent=None, summary="x"), 400, "missing_agent")
    await expect_error(node.articles.patch_article(NODE, base_revision=1, ops=[{"op": "set", "path": "/title", "value": "y"}],
                                          agent=AGENT, summary=" "), 400, "missing_summary")
    await expect_error(node.articles.patch_article(NODE, base_revision=1, ops=[], agent=AGENT, summary="x"), 400, "invalid_op")
    await expect_error(patch(node, 1, {"op": "set", "path": "/title", "value": make_title()}), 400, "no_change")
    assert await snapshot(node) == before


def make_title() -> str:
    from conftest import BASE_DOCUMENT

    return BASE_DOCUMENT["title"]


async def test_pointer_escapes(node: Mesh):
    await patch(node, 1, {"op": "set", "path": "/content/solutions/venv-linux/provenance",
                          "value": {"a/b~c": "first"}})
    await patch(node, 2, {"op": "set", "path": "/content/solutions/venv-linux/provenance/a~1b~0c", "value": "second"})
    solutions = {s["id"]: s for s in (await node.nodes.read_node(NODE)).body["content"]["solutions"]}
    assert solutions["venv-linux"]["provenance"] == {"a/b~c": "second"}


# -- 3. whole-document revision -----------------------------------------------------------------

async def test_revise_with_the_whole_article(node: Mesh):
    article = (await node.articles.read_article(NODE)).body["article"]
    article["content"]["root_cause"] = "The shell's pip belongs to another interpreter."
    result = await node.articles.revise_article(NODE, base_revision=1, article=article, agent=AGENT, summary="Sharper cause")
    assert [c["path"] for c in result["changes"]] == ["/content/root_cause"]
    moved = dict(article, id="python/elsewhere")
    await expect_error(node.articles.revise_article(NODE, base_revision=2, article=moved, agent=AGENT, summary="x"),
                       400, "immutable_field")
    await expect_error(node.articles.revise_article(NODE, base_revision=2, article=[1], agent=AGENT, summary="x"), 400,
                       "invalid_node")


# -- 4. conflicts -------------------------------------------------------------------------------

async def test_stale_base_gets_current_revision_and_changes_since(node: Mesh):
    await patch(node, 1, {"op": "set", "path": "/title", "value": "First edit"})
    await patch(node, 2, {"op": "set", "path": "/content/context", "value": "Second edit"})
    error = await expect_error(patch(node, 1, {"op": "set", "path": "/title", "value": "Late"}), 409, "revision_conflict")
    assert error.details["current_revision"] == 3
    assert [r["revision"] for r in error.details["changes_since_base"]] == [2, 3]
    assert error.details["changes_since_base"][0]["changes"][0]["new"] == "First edit"


@pytest.mark.slow
async def test_twenty_concurrent_patches_on_one_base(node: Mesh):
    async def attempt(index: int):
        try:
            return await patch(node, 1, {"op": "set", "path": "/title", "value": f"Title {index}"},
                               agent={"id": f"agent-{index}"})
        except KnowmeshError as error:
            return error

    outcomes = await asyncio.gather(*(attempt(i) for i in range(20)))
    wins = [o for o in outcomes if isinstance(o, dict)]
    losses = [o for o in outcomes if isinstance(o, KnowmeshError)]
    assert len(wins) == 1 and len(losses) == 19
    assert all((o.status, o.code) == (409, "revision_conflict") for o in losses)
    revisions = [r["revision"] for r in (await node.articles.article_history(NODE))["revisions"]]
    assert revisions == [1, 2]  # no gap, nothing lost
    assert (await node.nodes.read_node(NODE)).body["title"] == wins[0]["changes"][0]["new"]


# -- 5. solution revisions ----------------------------------------------------------------------

async def test_solution_revision_follows_behaviour_only(node: Mesh):
    meta = await patch(node, 1, {"op": "set", "path": "/content/solutions/venv-linux/title", "value": "Linux venv"},
                       {"op": "set", "path": "/content/solutions/venv-linux/notes", "value": "Also in WSL."})
    assert meta["solutions"]["venv-linux"] == 1
    fixed = await patch(node, 2, {"op": "set", "path": "/content/solutions/venv-linux/verify/command", "value": "true"})
    assert fixed["solutions"] == {"venv-macos": 1, "venv-linux": 2}
    reverted = await patch(node, 3, {"op": "set", "path": "/content/solutions/venv-linux/verify/command",
                                     "value": ".venv/bin/python -c 'import requests'"})
    assert reverted["solutions"]["venv-linux"] == 1  # the earlier behaviour's number is reused
    again = await patch(node, 4, {"op": "set", "path": "/content/solutions/venv-linux/verify/command", "value": "true"})
    assert again["solutions"]["venv-linux"] == 2
    read = await node.nodes.read_node(NODE, node.nodes.read_request(env="linux"))
    assert read.body["content"]["solutions"][0]["revision"] == 2


# -- 6. undo ------------------------------------------------------------------------------------

async def test_undo_appends_a_reverse_revision_and_tokens_work_once(node: Mesh):
    before = (await node.nodes.read_node(NODE)).body
    edit = await patch(node, 1, {"op": "set", "path": "/title", "value": "Mistake"})
    assert len(edit["undo_token"]) >= 32
    await expect_error(node.articles.undo_edit(edit["revision_id"], undo_token=None, agent=AGENT, summary="u"), 401,
                       "missing_undo_token")
    await expect_error(node.articles.undo_edit(edit["revision_id"], undo_token="x" * 32, agent=AGENT, summary="u"), 403,
                       "invalid_undo_token")
    undone = await node.articles.undo_edit(edit["revision_id"], undo_token=edit["undo_token"], agent=AGENT, summary="Undo")
    assert undone["kind"] == "undo" and undone["revision"] == 3
    assert (await node.nodes.read_node(NODE)).body["title"] == before["title"]
    assert (await node.nodes.read_node(NODE)).body["version"] == before["version"]  # same content, same version
    await expect_error(node.articles.undo_edit(edit["revision_id"], undo_token=edit["undo_token"], agent=AGENT, summary="u"),
                       403, "undo_token_used")
    await expect_error(node.articles.undo_edit("rev_missing", undo_token="t", agent=AGENT, summary="u"), 404, "revision_not_found")
    history = (await node.articles.article_history(NODE))["revisions"]
    assert [(r["revision"], r["kind"]) for r in history] == [(1, "create"), (2, "edit"), (3, "undo")]
    assert history[2]["reverts_revision_id"] == edit["revision_id"]


async def test_undo_of_an_undo(node: Mesh):
    edit = await patch(node, 1, {"op": "set", "path": "/title", "value": "Keep me after all"})
    undone = await node.articles.undo_edit(edit["revision_id"], undo_token=edit["undo_token"], agent=AGENT, summary="Undo")
    redone = await node.articles.undo_edit(undone["revision_id"], undo_token=undone["undo_token"], agent=AGENT, summary="Redo")
    assert redone["revision"] == 4
    assert (await node.nodes.read_node(NODE)).body["title"] == "Keep me after all"


async def test_undo_refuses_fields_changed_later(node: Mesh):
    edit = await patch(node, 1, {"op": "set", "path": "/title", "value": "Mine"},
                       {"op": "set", "path": "/content/context", "value": "Mine too"})
    await patch(node, 2, {"op": "set", "path": "/title", "value": "Someone else's"}, agent={"id": "agent-b"})
    error = await expect_error(node.articles.undo_edit(edit["revision_id"], undo_token=edit["undo_token"], agent=AGENT,
                                              summary="u"), 409, "undo_conflict")
    assert error.details["fields"] == ["/title"]
    # Refused undo keeps the token usable once the conflict is resolved.
    await patch(node, 3, {"op": "set", "path": "/title", "value": "Mine"})
    undone = await node.articles.undo_edit(edit["revision_id"], undo_token=edit["undo_token"], agent=AGENT, summary="u")
    assert undone["revision"] == 5


# -- 7. history with diffs ----------------------------------------------------------------------

async def test_history_diff_between_two_revisions(node: Mesh):
    await patch(node, 1, {"op": "set", "path": "/title", "value": "T2"})
    await patch(node, 2, {"op": "set", "path": "/title", "value": "T3"}, {"op": "remove", "path": "/content/boundaries/0"})
    diff = await node.articles.article_history(NODE, from_revision=1, to_revision=3)
    assert {c["path"]: c.get("new") for c in diff["changes"]} == {"/title": "T3", "/content/boundaries": []}
    assert (await node.articles.article_history(NODE, from_revision=3, to_revision=3))["changes"] == []
    await expect_error(node.articles.article_history(NODE, from_revision=9), 400, "revision_not_found")


@pytest.mark.slow
async def test_a_thousand_revisions_read_back_in_order(node: Mesh):
    for revision in range(1, 1000):
        await patch(node, revision, {"op": "set", "path": "/content/context", "value": f"context {revision}"})
    history = (await node.articles.article_history(NODE))["revisions"]
    assert [r["revision"] for r in history] == list(range(1, 1001))
    assert history[-1]["changes"][0]["new"] == "context 999"


# -- 8. everywhere: HTTP and MCP ----------------------------------------------------------------

async def test_http_routes(node: Mesh):
    app = build_app(service=node, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        current = await client.get(f"/v1/nodes/{NODE}/article")
        assert current.status_code == 200 and current.headers["cache-control"] == "public, no-cache, must-revalidate"
        assert (await client.get(f"/v1/nodes/{NODE}/article", headers={"If-None-Match": current.headers["etag"]})).status_code == 304
        body = {"base_revision": 1, "ops": [{"op": "set", "path": "/title", "value": "Over HTTP"}], "agent": AGENT,
                "summary": "http edit"}
        edited = await client.patch(f"/v1/nodes/{NODE}/article", json=body)
        assert edited.status_code == 200, edited.text
        stale = await client.patch(f"/v1/nodes/{NODE}/article", json=body)
        assert stale.status_code == 409
        assert stale.json()["error"]["code"] == "revision_conflict" and stale.json()["error"]["current_revision"] == 2
        article = (await client.get(f"/v1/nodes/{NODE}/article")).json()["article"]
        assert (await client.get(f"/v1/nodes/{NODE}", params={"fields": "article"})).json()["article"] == article
        article["content"]["symptom"] = "Revised over HTTP."
        revised = await client.post(f"/v1/nodes/{NODE}/article/revisions",
                                    json={"base_revision": 2, "article": article, "agent": AGENT, "summary": "whole"})
        assert revised.status_code == 200, revised.text
        token = edited.json()["undo_token"]
        url = f"/v1/article-revisions/{edited.json()['revision_id']}/undo"
        undo_body = {"agent": AGENT, "summary": "undo"}
        assert (await client.post(url, json=undo_body)).status_code == 401
        assert (await client.post(url, json=undo_body, headers={"Authorization": "Bearer wrong"})).status_code == 403
        undone = await client.post(url, json=undo_body, headers={"Authorization": f"Bearer {token}"})
        assert undone.status_code == 200 and undone.json()["kind"] == "undo"
        history = await client.get(f"/v1/nodes/{NODE}/article/revisions")
        assert [r["kind"] for r in history.json()["revisions"]] == ["create", "edit", "edit", "undo"]
        diff = await client.get(f"/v1/nodes/{NODE}/article/revisions", params={"from_revision": 1, "to_revision": 3})
        assert {c["path"] for c in diff.json()["changes"]} == {"/title", "/content/symptom"}  # 1 → 3
        invalid = await client.patch(f"/v1/nodes/{NODE}/article", content=b"{nope", headers={"content-type": "application/json"})
        assert invalid.status_code == 400
        wrong_method = await client.delete(f"/v1/nodes/{NODE}/article")
        assert wrong_method.status_code == 405


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_mcp_tools(node: Mesh, mode, mcp_connect):
    async with mcp_connect(node, mode=mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"patch_article", "revise_article", "undo_edit", "article_history"} <= names
        edited = await client.call_tool("patch_article", {
            "id": NODE, "base_revision": 1, "summary": "mcp edit", "agent": AGENT,
            "ops": [{"op": "set", "path": "/content/solutions/venv-linux/fix/0", "value": "python3 -m venv .venv --clear"}],
        })
        assert not edited.is_error, edited.content
        result = edited.structured_content
        stale = await client.call_tool("patch_article", {"id": NODE, "base_revision": 1, "summary": "late", "agent": AGENT,
                                                         "ops": [{"op": "set", "path": "/title", "value": "x"}]})
        assert stale.is_error and json.loads(stale.content[0].text)["error"]["code"] == "revision_conflict"
        read = await client.call_tool("read_article", {"id": NODE, "fields": "article", "max_bytes": 100_000})
        assert read.structured_content["revision"] == 2 and read.structured_content["truncated"] == []
        article = read.structured_content["article"]
        assert article == (await node.articles.read_article(NODE)).body["article"]  # what GET .../article gives
        article["title"] = "Whole document over MCP"
        revised = await client.call_tool("revise_article", {"id": NODE, "base_revision": 2, "article": article,
                                                            "summary": "whole", "agent": AGENT})
        assert not revised.is_error, revised.content
        changes = revised.structured_content["changes"]
        assert [c["path"] for c in changes] == ["/title"]  # the read-back document changed nothing else
        small = await client.call_tool("read_article", {"id": NODE, "fields": "article", "max_bytes": 1024})
        assert "article" not in small.structured_content  # never a cut document to revise from
        assert small.structured_content["needed_bytes"] > 1024
        undone = await client.call_tool("undo_edit", {"revision_id": result["revision_id"], "undo_token": result["undo_token"],
                                                      "summary": "undo", "agent": AGENT})
        assert not undone.is_error and undone.structured_content["kind"] == "undo"
        history = await client.call_tool("article_history", {"id": NODE})
        assert [r["revision"] for r in history.structured_content["revisions"]] == [1, 2, 3, 4]
        diff = await client.call_tool("article_history", {"id": NODE, "from_revision": 1, "to_revision": 2})
        assert [c["path"] for c in diff.structured_content["changes"]] == ["/content/solutions/venv-linux/fix"]


async def test_edits_reach_search_at_once(node: Mesh):
    await patch(node, 1, {"op": "set", "path": "/signature/aliases/-", "value": "zq9kx: installer reported success"})
    assert (await node.searching.search("zq9kx: installer reported success"))["results"][0]["id"] == NODE
