"""The MCP server through the real `mcp` client: in-process, over stdio, and over streamable HTTP."""

from __future__ import annotations

import copy
import getpass
import json
import os
import shutil
import sys

import httpx2
import pytest
from conftest import opened, serving
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters

from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.core.limits import MIN_BUDGET
from knowmesh_mcp.services.reading import fit_search_to_budget, fit_to_budget
from knowmesh_mcp.services.remote import RemoteMesh
from knowmesh_mcp.services.remote_api import RemoteApi
from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]


def error_body(result) -> dict:
    assert result.is_error
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tools_are_listed_with_schemas_and_annotations(service, mode, mcp_connect):
    async with mcp_connect(service, mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {"read_article", "create_node"} <= set(tools)
    read = tools["read_article"]
    assert read.annotations.read_only_hint is True and read.annotations.idempotent_hint is True
    assert set(read.input_schema["properties"]) == {"id", "env", "solution", "fields", "include", "max_bytes"}
    assert read.input_schema["required"] == ["id"]
    assert read.title and "verify" in read.description
    create = tools["create_node"]
    assert not create.annotations.read_only_hint and create.annotations.destructive_hint is False  # unset: the default, false
    assert {"id", "ecosystem", "title", "signature", "content"} <= set(create.input_schema["required"])


async def test_read_only_server_has_only_read_tools(service, mcp_connect):
    async with mcp_connect(service, "auto", read_only=True) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert "create_node" not in names and "read_article" in names


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_create_and_read_over_mcp(service, make_doc, mode, mcp_connect):
    document = make_doc()
    async with mcp_connect(service, mode) as client:
        created = await client.call_tool("create_node", {k: document[k] for k in ("id", "ecosystem", "title", "signature", "content")})
        assert not created.is_error
        assert created.structured_content["status"] == "draft"
        read = await client.call_tool("read_article", {"id": document["id"], "env": "ubuntu-24.04,python-3.12"})
    body = read.structured_content
    assert [s["id"] for s in body["content"]["solutions"]] == ["venv-linux"]
    assert body["version"] == created.structured_content["version"]
    assert body["truncated"] == []
    assert json.loads(read.content[0].text)["id"] == document["id"]


async def test_agent_identity_defaults_to_the_local_agent(service, make_doc, mcp_connect, monkeypatch, request):
    monkeypatch.setenv("KNOWMESH_AGENT_ID", "agent-from-env")
    async with mcp_connect(service, "auto", local_agent=True) as client:
        await client.call_tool("create_node", {k: make_doc()[k] for k in ("id", "ecosystem", "title", "signature", "content")})
    history = await service.articles.article_history(make_doc()["id"])
    # In-process the stdio server's own user is proven; through a remote it is an id the remote takes as claimed.
    local = request.node.callspec.params["mcp_connect"] == "local"
    assert history["revisions"][0]["agent"] == {"id": "agent-from-env", "proven": local}


async def test_the_local_agent_is_made_once_per_mesh_unless_knowmesh_agent_id_names_one(service, monkeypatch, tmp_path):
    monkeypatch.delenv("KNOWMESH_AGENT_ID", raising=False)
    made = await service.local_agent_id()
    user, _, suffix = made.rpartition("-")
    assert user == getpass.getuser() and len(suffix) == 8 and await service.local_agent_id() == made
    async with opened(tmp_path / "other.db") as other:
        assert await other.local_agent_id() not in (made, getpass.getuser()), "each mesh its own"
    local = await service.local_actor(None)
    assert (local.id, local.proof, local.proven) == (made, "local", True)
    named = await service.local_actor({"id": "agent-b"})
    assert (named.id, named.proof) == ("agent-b", "claimed")
    remote = RemoteMesh(RemoteApi("http://127.0.0.1:9"))
    try:
        assert (await remote.local_agent_id()).startswith("local-") and await remote.local_agent_id() != made
    finally:
        await remote.close()


async def test_a_team_report_under_the_os_user_name_never_takes_the_local_agents_vote(service, make_doc, monkeypatch,
                                                                                      tmp_path):
    """A team's report synced in under `root` (or `ubuntu`, or whatever the OS user is here) made the
    local agent's own report on the same answer a 409 duplicate_report while it acted as the OS user."""
    monkeypatch.delenv("KNOWMESH_AGENT_ID", raising=False)
    await service.creation.create_node(make_doc())
    report = {"node": make_doc()["id"], "solution": "venv-linux", "outcome": "failed", "reason": "still fails",
              "env": {"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"}}
    await service.outcomes.report_outcome({**report, "agent": {"id": getpass.getuser()}})
    async with opened(tmp_path / "personal.db") as personal:
        async with serving(build_app(service=service, with_mcp=False, write_limit=0)) as url:
            synced = await personal.sync.sync_from(url)
        assert synced.evidence == 1
        mine = await personal.outcomes.report_outcome(report, actor=await personal.local_actor(None))
    assert mine["accepted"] and mine["counts"]["failed_agents"] == 2


async def test_domain_errors_are_tool_errors_and_the_session_survives(service, make_doc, mcp_connect):
    document = make_doc()
    args = {k: document[k] for k in ("id", "ecosystem", "title", "signature", "content")}
    async with mcp_connect(service, "legacy") as client:
        bad = await client.call_tool("create_node", {**args, "id": "Python/../x", "title": ""})
        error = error_body(bad)["error"]
        assert error["code"] == "invalid_node"
        assert {"/id", "/title"} <= {p["field"] for p in error["problems"]}

        wrong_type = await client.call_tool("create_node", {**args, "content": "not an object"})
        assert wrong_type.is_error

        missing = await client.call_tool("read_article", {"id": "python/nope"})
        assert error_body(missing)["error"]["code"] == "node_not_found"
        bad_id = await client.call_tool("read_article", {"id": "python//nope"})
        assert error_body(bad_id)["error"]["code"] == "invalid_id"
        bad_fields = await client.call_tool("read_article", {"id": "python/nope", "fields": "everything"})
        assert error_body(bad_fields)["error"]["code"] == "invalid_parameter"
        too_small = await client.call_tool("read_article", {"id": document["id"], "max_bytes": 10})
        assert too_small.is_error

        assert not (await client.call_tool("create_node", args)).is_error
        exists = await client.call_tool("create_node", args)
        assert error_body(exists)["error"]["code"] == "node_exists"
        assert error_body(exists)["next"]["edit_article"]["tool"] == "patch_article"
    assert await service.store.count_nodes() == 1


async def test_every_invalid_document_is_a_tool_error_and_writes_nothing(service, invalid_documents, make_doc, mcp_connect):
    async with mcp_connect(service, "legacy") as client:
        for label, document, field in invalid_documents:
            if field.split("/")[1] not in {"id", "ecosystem", "title", "signature", "content"}:
                continue  # a top-level extra key has no tool parameter to travel in
            arguments = {key: document.get(key) for key in ("id", "ecosystem", "title", "signature", "content")}
            result = await client.call_tool("create_node", arguments)
            assert result.is_error, label
            error = error_body(result)["error"]
            if error["code"] == "invalid_argument":  # the tool's parameter type check, before the service
                assert error["field"] == field.split("/")[1] and error["message"].startswith(error["field"]), label
            else:
                assert error["code"] == "invalid_node" and field in [p["field"] for p in error["problems"]], label
        assert await service.store.count_nodes() == 0
        good = make_doc()
        created = await client.call_tool("create_node", {k: good[k] for k in ("id", "ecosystem", "title", "signature", "content")})
        assert not created.is_error, "the session stays usable"


async def test_max_bytes_bounds_the_read_and_says_what_it_cut(service, make_doc, mcp_connect):
    document = make_doc()
    document["content"]["context"] = "long context " * 400
    document["content"]["boundaries"] = ["boundary " * 100]
    await service.creation.create_node(document)
    async with mcp_connect(service, "auto") as client:
        read = await client.call_tool("read_article", {"id": document["id"], "max_bytes": 2048, "include": "alternatives"})
    body = read.structured_content
    assert len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()) <= 2048
    assert "content/alternatives" in body["truncated"] and "content/context" in body["truncated"]
    assert body["content"]["solutions"], "the answer is the last thing to go"


async def test_max_bytes_is_a_hard_bound_that_keeps_identifiers(tmp_path):
    corpus = await Mesh.open(tmp_path / "starter.db")  # the starter corpus: 65 real articles
    try:
        async for document in corpus.documents.export_documents():
            full = (await corpus.nodes.read_node(document["id"])).body
            hits = await corpus.searching.search(document["title"], limit=20)
            served = copy.deepcopy(hits)
            for budget in (MIN_BUDGET, 2048, 4096):
                read = fit_to_budget(full, budget)
                found = fit_search_to_budget(hits, budget)
                assert hits == served, "fitting works on copies: the envelope passed in is unchanged"
                assert compact_size(read) <= budget and compact_size(found) <= budget, (document["id"], budget)
                assert (read["id"], read["version"], read["revision"]) == (full["id"], full["version"], full["revision"])
                assert found["results"][0]["id"] == hits["results"][0]["id"]
                if "needed_bytes" in read:
                    assert read["needed_bytes"] > budget and str(read["needed_bytes"]) in read["truncated"][0]
            assert fit_to_budget(full, 8192)["truncated"] == [] or compact_size(full) > 8192
    finally:
        await corpus.close()


def compact_size(body: dict) -> int:
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())


async def test_article_resource(service, make_doc, mcp_connect):
    await service.creation.create_node(make_doc())
    async with mcp_connect(service, "auto") as client:
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["knowmesh://nodes/{ecosystem}/{slug}"]
        result = await client.read_resource("knowmesh://nodes/python/module-not-found-venv")
        assert result.contents[0].text.startswith("---\nid: \"python/module-not-found-venv\"")
        llms = await client.read_resource("knowmesh://llms.txt")
        assert "untrusted" in llms.contents[0].text
        with pytest.raises(MCPError):
            await client.read_resource("knowmesh://nodes/python/missing")


def stdio_params(db_path: str, *extra: str) -> StdioServerParameters:
    """The installed `knowmesh-mcp` console script, as a client would start it (module form as fallback)."""
    env = {"KNOWMESH_DB": db_path, "PYTHONPATH": os.pathsep.join(sys.path), "KNOWMESH_AGENT_ID": "stdio-agent"}
    script = shutil.which("knowmesh-mcp")
    if script:
        return StdioServerParameters(command=script, args=list(extra), env=env)
    return StdioServerParameters(command=sys.executable, args=["-m", "knowmesh_mcp.cli.main", *extra], env=env)


async def test_stdio_subprocess(tmp_path, make_doc):
    document = make_doc(id="python/stdio-made", error="ModuleNotFoundError: No module named 'stdio_only'")
    async with Client(stdio_params(str(tmp_path / "s.db"))) as client:
        starter = await client.call_tool("read_article", {"id": "shell/bad-interpreter-crlf", "env": "ubuntu-24.04"})
        assert not starter.is_error and len(starter.structured_content["content"]["solutions"]) == 1
        bad = await client.call_tool("create_node", {**{k: document[k] for k in ("id", "ecosystem", "title", "signature")}, "content": {}})
        assert error_body(bad)["error"]["code"] == "invalid_node"
        created = await client.call_tool("create_node", {k: document[k] for k in ("id", "ecosystem", "title", "signature", "content")})
        assert not created.is_error, created.content
        again = await client.call_tool("read_article", {"id": document["id"]})
        assert again.structured_content["revision"] == 1

    opened = await Mesh.open(tmp_path / "s.db")
    try:
        assert (await opened.nodes.read_node(document["id"])).body["title"] == document["title"]
    finally:
        await opened.close()


async def test_stdio_read_only_and_empty(tmp_path):
    async with Client(stdio_params(str(tmp_path / "e.db"), "serve", "--stdio", "--empty", "--read-only")) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"read_article", "search", "article_history", "review_queue"}
        missing = await client.call_tool("read_article", {"id": "shell/bad-interpreter-crlf"})
        assert error_body(missing)["error"]["code"] == "node_not_found"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_streamable_http(base_url, make_doc, mode):
    document = make_doc()
    async with Client(f"{base_url}/mcp", mode=mode) as client:
        created = await client.call_tool("create_node", {k: document[k] for k in ("id", "ecosystem", "title", "signature", "content")})
        assert not created.is_error
        read = await client.call_tool("read_article", {"id": document["id"], "env": "macos-15"})
        assert [s["id"] for s in read.structured_content["content"]["solutions"]] == ["venv-macos"]
        missing = await client.call_tool("read_article", {"id": "python/missing"})
        assert error_body(missing)["error"]["code"] == "node_not_found"


async def test_fix_error_prompt(service, mcp_connect):
    async with mcp_connect(service, "legacy") as client:
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        assert "fix-error" in prompts
        result = await client.get_prompt("fix-error", {"error": "ModuleNotFoundError: No module named 'x'",
                                                       "env": "linux,python-3.12"})
    text = result.messages[0].content.text
    assert "`search`" in text and "report_outcome" in text and "No module named 'x'" in text and "linux,python-3.12" in text


@pytest.mark.parametrize(("host", "expect_421"), [("127.0.0.1", True), ("0.0.0.0", False)])
async def test_mcp_host_check_follows_the_served_address(service, host, expect_421):
    """On loopback /mcp refuses other Host headers (DNS rebinding); a team mesh on 0.0.0.0 accepts them."""
    async with serving(build_app(service=service, host=host)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
            response = await client.post("/mcp", headers={"host": "mesh.team.example:8765", "accept": "application/json, text/event-stream"},
                                         json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert (response.status_code == 421) is expect_421, response.text


async def test_streamable_http_submissions_count_against_the_write_limit(service, make_doc):
    """/mcp is no side door: create_node and reports are limited like /v1, anonymous ones by address."""
    documents = [make_doc(id=f"python/limited-{n}", error=f"ModuleNotFoundError: No module named 'limited_{n}'")
                 for n in range(3)]
    async with serving(build_app(service=service, write_limit=2)) as url:
        async with Client(f"{url}/mcp") as client:
            results = [await client.call_tool("create_node", {**{k: d[k] for k in ("id", "ecosystem", "title", "signature", "content")},
                                                              "agent": {"id": "busy"}}) for d in documents]
            assert [r.is_error for r in results] == [False, False, True]
            assert error_body(results[2])["error"]["code"] == "rate_limited"
            report = {"node": documents[0]["id"], "solution": "venv-linux", "outcome": "solved",
                      "env": {"os": "ubuntu-24.04", "runtime": "python-3.12"}, "evidence": {"exit_code": 0}}
            anonymous = await client.call_tool("report_outcome", report)
            assert not anonymous.is_error and anonymous.structured_content["anonymous"] is True
            again = await client.call_tool("report_outcome", report)
            assert error_body(again)["error"]["code"] == "duplicate_report", "anonymous reports are deduplicated by address"
    assert await service.store.count_nodes() == 2


async def test_review_queue_tool_pages_with_offset(service, make_doc, mcp_connect):
    for n in range(3):
        document = make_doc(id=f"python/open-problem-{n}", error=f"OpenProblemError{n}: nobody solved this {n}")
        document["content"]["solutions"] = []
        await service.creation.create_node(document)
    async with mcp_connect(service) as client:
        first = (await client.call_tool("review_queue", {"limit": 2})).structured_content
        rest = (await client.call_tool("review_queue", {"limit": 2, "offset": first["next_offset"]})).structured_content
    assert (first["total"], first["next_offset"], rest["next_offset"]) == (3, 2, None)
    seen = [item["id"] for item in first["items"] + rest["items"]]
    assert sorted(seen) == [f"python/open-problem-{n}" for n in range(3)]
