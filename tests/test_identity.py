"""Who acted, proven: agent tokens over HTTP and MCP, and evidence that forged ids cannot move.

Every test runs a real uvicorn server (`serve --http` configured) over a real store, with the
auth mode a team's mesh would use, and real clients: httpx2 for `/v1`, the `mcp` package's
client for `/mcp`, `RemoteMesh` for `serve --stdio --remote`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

from conftest import opened, remote_client, serving

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

NODE = "python/module-not-found-venv"
LINUX = {"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"}
LINUX_ENV = "ubuntu-24.04,python-3.12,pip"


def failed(agent: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"node": NODE, "solution": "venv-linux", "outcome": "failed", "env": LINUX,
                            "reason": "import still fails"}
    if agent:
        body["agent"] = {"id": agent}
    return body


def solved(agent: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"node": NODE, "solution": "venv-linux", "outcome": "solved", "env": LINUX,
                            "evidence": {"verify": "python -c 'import requests'", "exit_code": 0}}
    if agent:
        body["agent"] = {"id": agent}
    return body


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@asynccontextmanager
async def team(service: Mesh, auth: str, **options: Any):
    async with serving(build_app(service=service, auth=auth, write_limit=0, **options)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
            yield client


@pytest.fixture
async def node(service: Mesh, make_doc) -> Mesh:
    await service.creation.create_node(make_doc())
    return service


async def served_for_linux(service: Mesh) -> str | None:
    """The answer a Linux agent is served now (a known_failed one is not)."""
    return served((await service.nodes.read_node(NODE, service.nodes.read_request(env=LINUX_ENV))).body)


def served(read: dict[str, Any]) -> str | None:
    return next((s["id"] for s in read["content"]["solutions"]), None)


# -- tokens --------------------------------------------------------------------------------


async def test_tokens_are_stored_as_hashes_only(tmp_path):
    path = tmp_path / "tokens.db"
    async with opened(path) as service:
        made = await service.tokens.add_token("alice", role="maintainer")
        assert made["token"].startswith("km_") and len(made["token"]) > 40
        assert (await service.tokens.verify_token(made["token"])).agent_id == "alice"
        assert await service.tokens.verify_token(made["token"] + "x") is None
        listed = await service.tokens.list_tokens()
        assert [(t["agent_id"], t["role"], t["revoked_at"]) for t in listed] == [("alice", "maintainer", None)]
        assert listed[0]["last_used_at"] is not None  # the verify above used it
        assert "token" not in listed[0] and "token_hash" not in listed[0]
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("tokens.db"))
    assert made["token"].encode() not in stored
    assert made["token"][3:].encode() not in stored
    with sqlite3.connect(path) as db:
        (digest,) = db.execute("SELECT token_hash FROM agent_tokens").fetchone()
    assert len(digest) == 64 and digest not in made["token"]


async def test_a_revoked_token_proves_nothing(node: Mesh):
    token = (await node.tokens.add_token("alice"))["token"]
    async with team(node, "required") as client:
        assert (await client.post("/v1/feedback", json=solved(), headers=bearer(token))).status_code == 202
        assert await node.tokens.revoke_tokens("alice") == 1
        refused = await client.post("/v1/feedback", json=failed(), headers=bearer(token))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_token"


# -- auth required ---------------------------------------------------------------------------


async def test_required_refuses_writes_without_a_token_and_keeps_reads_open(node: Mesh, make_doc):
    async with team(node, "required") as client:
        writes = [
            await client.post("/v1/feedback", json=failed("alice")),
            await client.post("/v1/nodes", json=make_doc(id="python/other", error="KeyError: 'x'")),
            await client.patch(f"/v1/nodes/{NODE}/article", json={"base_revision": 1, "summary": "s",
                                                                   "ops": [{"op": "set", "path": "/title", "value": "T"}]}),
            await client.post(f"/v1/nodes/{NODE}/failures", json={"environment": LINUX, "summary": "s", "steps": ["x"],
                                                                   "reason": "r", "agent": {"id": "alice"}}),
            await client.post("/v1/issues", json={"title": "t", "body": "b"}),
        ]
        reads = [await client.get(f"/v1/nodes/{NODE}"), await client.get("/v1/search", params={"q": "No module named"})]
    for response in writes:
        assert response.status_code == 401, response.text
        error = response.json()["error"]
        assert error["code"] == "auth_required" and "knowmesh-mcp token add" in error["message"]
    assert [r.status_code for r in reads] == [200, 200]
    assert await node.store.count_nodes() == 1
    assert (await node.outcomes.list_feedback(NODE))["feedback"] == []


async def test_a_token_for_alice_with_body_bob_is_403_and_stores_nothing(node: Mesh):
    token = (await node.tokens.add_token("alice"))["token"]
    async with team(node, "required") as client:
        forged = await client.post("/v1/feedback", json=failed("bob"), headers=bearer(token))
        patched = await client.patch(f"/v1/nodes/{NODE}/article", headers=bearer(token), json={
            "base_revision": 1, "summary": "s", "agent": {"id": "bob"},
            "ops": [{"op": "set", "path": "/title", "value": "Signed as bob"}]})
        bogus = await client.post("/v1/feedback", json=failed(), headers=bearer("km_not-a-token"))
    assert forged.status_code == 403 and forged.json()["error"]["code"] == "agent_mismatch"
    assert forged.json()["error"]["field"] == "agent.id"
    assert patched.status_code == 403 and patched.json()["error"]["code"] == "agent_mismatch"
    assert bogus.status_code == 401 and bogus.json()["error"]["code"] == "invalid_token"
    assert (await node.outcomes.list_feedback(NODE))["feedback"] == []
    assert len((await node.articles.article_history(NODE))["revisions"]) == 1


async def test_the_stored_author_is_the_tokens_agent(node: Mesh):
    token = (await node.tokens.add_token("alice"))["token"]
    async with team(node, "required") as client:
        edit = await client.patch(f"/v1/nodes/{NODE}/article", headers=bearer(token), json={
            "base_revision": 1, "summary": "Name the interpreter",
            "ops": [{"op": "set", "path": "/content/context", "value": "python 3.12 in a venv"}]})
        report = await client.post("/v1/feedback", json=solved(), headers=bearer(token))
        history = (await client.get(f"/v1/nodes/{NODE}/article/revisions")).json()
        feedback = (await client.get(f"/v1/nodes/{NODE}/feedback")).json()["feedback"]
    assert edit.status_code == 200, edit.text
    assert history["revisions"][-1]["agent"] == {"id": "alice", "proven": True}
    assert report.json()["proven"] is True and report.json()["counted"] is True
    assert [(f["agent_id"], f["proof"], f["proven"]) for f in feedback] == [("alice", "token", True)]


async def test_two_ids_under_one_token_are_one_agent(node: Mesh):
    token = (await node.tokens.add_token("alice"))["token"]
    async with team(node, "required") as client:
        first = await client.post("/v1/feedback", json=failed("alice"), headers=bearer(token))
        again = await client.post("/v1/feedback", json=failed(), headers=bearer(token))
        sybil = await client.post("/v1/feedback", json=failed("sybil-2"), headers=bearer(token))
    assert first.status_code == 202 and first.json()["failure_state"] == "reported_failed"
    assert again.status_code == 409 and again.json()["error"]["code"] == "duplicate_report"
    assert sybil.status_code == 403
    assert first.json()["counts"]["failed_agents"] == 1
    assert await served_for_linux(node) == "venv-linux", "one agent cannot make an answer known_failed"


async def test_two_proven_agents_make_an_answer_known_failed(node: Mesh):
    tokens = [(await node.tokens.add_token(agent))["token"] for agent in ("alice", "bob")]
    async with team(node, "required") as client:
        receipts = [(await client.post("/v1/feedback", json=failed(), headers=bearer(t))).json() for t in tokens]
        read = (await client.get(f"/v1/nodes/{NODE}", params={"env": LINUX_ENV})).json()
    assert [r["failure_state"] for r in receipts] == ["reported_failed", "known_failed"]
    assert receipts[1]["counts"]["failed_agents"] == 2 and "next" in receipts[1]
    assert served(read) is None, "a known_failed answer is no longer served"


# -- auth optional: unproven reports are kept, never a vote --------------------------------


async def test_unproven_reports_are_kept_and_never_make_known_failed(node: Mesh):
    async with team(node, "optional") as client:
        receipts = [await client.post("/v1/feedback", json=failed(agent)) for agent in ("sybil-1", "sybil-2", "sybil-3")]
        feedback = (await client.get(f"/v1/nodes/{NODE}/feedback")).json()["feedback"]
        read = (await client.get(f"/v1/nodes/{NODE}", params={"env": LINUX_ENV})).json()
    assert [r.status_code for r in receipts] == [202, 202, 202]
    assert all(r.json()["proven"] is False and r.json()["counted"] is False for r in receipts)
    assert {r.json()["failure_state"] for r in receipts} == {"ok"}, "kept and listed, never evidence"
    assert {r.json()["counts"]["failed_agents"] for r in receipts} == {0}
    assert [(f["agent_id"], f["proof"], f["proven"]) for f in feedback] == [
        ("sybil-1", "unproven", False), ("sybil-2", "unproven", False), ("sybil-3", "unproven", False)]
    assert served(read) == "venv-linux"


async def test_unproven_solved_reports_never_verify_but_proven_ones_do(node: Mesh):
    tokens = [(await node.tokens.add_token(agent))["token"] for agent in ("alice", "bob")]
    async with team(node, "optional") as client:
        for agent in ("sybil-1", "sybil-2"):
            await client.post("/v1/feedback", json=solved(agent))
        unproven = (await client.get(f"/v1/nodes/{NODE}", params={"env": LINUX_ENV})).json()
        for token in tokens:
            await client.post("/v1/feedback", json=solved(), headers=bearer(token))
        proven = (await client.get(f"/v1/nodes/{NODE}", params={"env": LINUX_ENV})).json()
    assert unproven["answer_state"] == "draft"
    assert proven["answer_state"] == "verified"


async def test_an_unproven_edit_is_published_and_marked_unproven(node: Mesh):
    async with team(node, "optional") as client:
        edit = await client.patch(f"/v1/nodes/{NODE}/article", json={
            "base_revision": 1, "summary": "s", "agent": {"id": "maintainer-lookalike"},
            "ops": [{"op": "set", "path": "/content/context", "value": "python 3.12"}]})
        history = (await client.get(f"/v1/nodes/{NODE}/article/revisions")).json()
    assert edit.status_code == 200
    assert history["revisions"][-1]["agent"] == {"id": "maintainer-lookalike", "proven": False}


# -- undo on a team's mesh -------------------------------------------------------------------


async def test_undo_takes_the_agent_token_as_bearer_and_the_undo_token_in_the_body(node: Mesh):
    token = (await node.tokens.add_token("alice"))["token"]
    async with team(node, "required") as client:
        edit = (await client.patch(f"/v1/nodes/{NODE}/article", headers=bearer(token), json={
            "base_revision": 1, "summary": "s", "ops": [{"op": "set", "path": "/title", "value": "A new title"}]})).json()
        path = f"/v1/article-revisions/{edit['revision_id']}/undo"
        spec_form = await client.post(path, json={"summary": "undo"}, headers=bearer(edit["undo_token"]))
        undone = await client.post(path, json={"summary": "undo", "undo_token": edit["undo_token"]}, headers=bearer(token))
    assert spec_form.status_code == 401 and spec_form.json()["error"]["code"] == "auth_required"
    assert undone.status_code == 200, undone.text
    assert (await node.articles.article_history(NODE))["revisions"][-1]["agent"] == {"id": "alice", "proven": True}


# -- MCP over HTTP: the same header, the same rule -------------------------------------------


@asynccontextmanager
async def mcp_client(url: str, token: str | None = None, mode: str = "auto"):
    async with httpx2.AsyncClient(headers=bearer(token) if token else None, timeout=10) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:
            yield client


async def test_mcp_over_http_takes_the_same_bearer_token(node: Mesh):
    token = (await node.tokens.add_token("alice"))["token"]
    report = {"node": NODE, "solution": "venv-linux", "outcome": "failed", "env": LINUX, "reason": "still fails"}
    async with serving(build_app(service=node, auth="required", write_limit=0)) as url:
        async with mcp_client(url) as anonymous:
            refused = await anonymous.call_tool("report_outcome", report)
            found = await anonymous.call_tool("search", {"q": "No module named 'requests'"})
        async with mcp_client(url, token) as alice:
            forged = await alice.call_tool("report_outcome", {**report, "agent": {"id": "bob"}})
            accepted = await alice.call_tool("report_outcome", report)
    assert refused.is_error and json.loads(refused.content[0].text)["error"]["code"] == "auth_required"
    assert not found.is_error
    assert forged.is_error and json.loads(forged.content[0].text)["error"]["code"] == "agent_mismatch"
    assert not accepted.is_error and accepted.structured_content["proven"] is True
    assert [(f["agent_id"], f["proof"]) for f in (await node.outcomes.list_feedback(NODE))["feedback"]] == [("alice", "token")]


@pytest.mark.slow
async def test_mcp_sessions_cost_nothing_so_no_one_can_use_them_up(node: Mesh):
    """Reads over /mcp need no token, so anyone may send `initialize`. A stateful /mcp kept a session
    for each (10,000 in 27 s, +400 MB), then answered every client, token holders too, 503 "Too
    many open sessions" for 30 minutes. /mcp is stateless: `initialize` keeps nothing (no session
    id), and clients of both eras go on working."""
    token = (await node.tokens.add_token("alice"))["token"]
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}}}
    async with serving(build_app(service=node, auth="required", write_limit=0)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=10) as http:
            floods = [await http.post("/mcp", json=initialize, headers={"accept": "application/json, text/event-stream"})
                      for _ in range(200)]
        results = []
        for mode in ("legacy", "auto"):
            async with mcp_client(url, token, mode=mode) as alice:
                results.append(await alice.call_tool("report_outcome", {
                    "node": NODE, "solution": "venv-linux", "outcome": "failed", "env": LINUX, "reason": mode}))
            async with mcp_client(url, mode=mode) as anonymous:
                results.append(await anonymous.call_tool("search", {"q": "No module named 'requests'"}))
    assert {answer.status_code for answer in floods} == {200}
    assert not any("mcp-session-id" in answer.headers for answer in floods), "nothing kept for an unauthenticated client"
    assert [result.is_error for result in results] == [False, False, True, False]  # the second report: duplicate
    assert json.loads(results[2].content[0].text)["error"]["code"] == "duplicate_report"


async def test_remote_forwards_knowmesh_token(node: Mesh, monkeypatch):
    token = (await node.tokens.add_token("alice"))["token"]
    monkeypatch.setenv("KNOWMESH_AGENT_ID", "someone-else")  # the token's agent wins; no mismatch is invented
    async with serving(build_app(service=node, auth="required", with_mcp=False, write_limit=0)) as url:
        monkeypatch.setenv("KNOWMESH_TOKEN", token)
        async with remote_client(url, local_agent=True) as client:
            edit = await client.call_tool("patch_article", {
                "id": NODE, "base_revision": 1, "summary": "via remote",
                "ops": [{"op": "set", "path": "/content/context", "value": "python 3.12"}]})
            undo = await client.call_tool("undo_edit", {"revision_id": edit.structured_content["revision_id"],
                                                        "undo_token": edit.structured_content["undo_token"],
                                                        "summary": "undo via remote"})
        monkeypatch.delenv("KNOWMESH_TOKEN")
        async with remote_client(url, local_agent=True) as client:
            refused = await client.call_tool("report_outcome", {**failed(), "env": LINUX})
    assert not edit.is_error and not undo.is_error, (edit.content, undo.content)
    agents = [r["agent"] for r in (await node.articles.article_history(NODE))["revisions"][1:]]
    assert agents == [{"id": "alice", "proven": True}, {"id": "alice", "proven": True}]
    assert refused.is_error and json.loads(refused.content[0].text)["error"]["code"] == "auth_required"


# -- auth off: a personal mesh is unchanged ----------------------------------------------------


async def test_auth_off_takes_ids_as_claimed_as_before(node: Mesh):
    async with team(node, "off") as client:
        receipts = [(await client.post("/v1/feedback", json=failed(agent))).json() for agent in ("f1", "f2")]
    assert [r["failure_state"] for r in receipts] == ["reported_failed", "known_failed"]
    assert all(r["counted"] and not r["proven"] for r in receipts)


# -- the command line --------------------------------------------------------------------------


def cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KNOWMESH_DB": db, "KNOWMESH_EMPTY": "1"}
    return subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


async def test_token_add_list_revoke_from_the_command_line(tmp_path):
    db = str(tmp_path / "cli.db")
    added = cli("token", "add", "alice", "--role", "maintainer", db=db)
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert token.startswith("km_") and "shown once" in added.stderr
    listed = cli("token", "list", db=db)
    assert "alice" in listed.stdout and "maintainer" in listed.stdout and token not in listed.stdout
    as_json = json.loads(cli("token", "list", "--json", db=db).stdout)
    assert [(t["agent_id"], t["role"], t["last_used_at"]) for t in as_json] == [("alice", "maintainer", None)]
    laptop, ci = (cli("token", "add", "bob", db=db) for _ in range(2))
    ci_id = json.loads(cli("token", "list", "--json", db=db).stdout)[-1]["id"]
    assert f"token {ci_id} for bob" in ci.stderr and f"{ci_id}  bob" in cli("token", "list", db=db).stdout
    one = cli("token", "revoke", "bob", "--id", ci_id, db=db)  # the leaked CI token, not the laptop's
    assert one.returncode == 0 and "revoked 1 token(s) of bob" in one.stdout
    assert "token_not_found" in cli("token", "revoke", "bob", "--id", ci_id, db=db).stderr
    assert "token id" in cli("token", "revoke", "bob", "--id", "xyz", db=db).stderr
    assert cli("token", "revoke", "alice", db=db).returncode == 0
    missing = cli("token", "revoke", "alice", db=db)
    assert missing.returncode == 2 and "token_not_found" in missing.stderr
    bad = cli("token", "add", "two words", db=db)
    assert bad.returncode == 2 and "agent id" in bad.stderr
    async with opened(db) as service:
        assert await service.tokens.verify_token(token) is None
        assert await service.tokens.verify_token(ci.stdout.strip()) is None
        assert (await service.tokens.verify_token(laptop.stdout.strip())).agent_id == "bob"


# -- write limits and dedupe votes -------------------------------------------------------------


async def test_write_limits_count_the_tokens_agent(node: Mesh):
    """Naming fresh ids does not buy more writes: a token's agent is one subject, whatever the body says."""
    token = (await node.tokens.add_token("alice"))["token"]
    async with serving(build_app(service=node, auth="optional", write_limit=1, with_mcp=False)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
            first = await client.post("/v1/feedback", json=solved(), headers=bearer(token))
            second = await client.post("/v1/feedback", json=failed(), headers=bearer(token))
            unproven = await client.post("/v1/feedback", json=failed("sybil-1"))
            rotated = await client.post("/v1/feedback", json=failed("sybil-2"))
    assert (first.status_code, second.status_code) == (202, 429)
    assert second.json()["error"]["code"] == "rate_limited"
    assert (unproven.status_code, rotated.status_code) == (202, 429), "unproven ids count per address"


async def test_unproven_dedupe_votes_never_flag_a_pair(node: Mesh, make_doc):
    other = make_doc(id="python/requests-missing", error="ImportError: No module named requests.adapters")
    await node.creation.create_node(other)
    tokens = [(await node.tokens.add_token(agent))["token"] for agent in ("alice", "bob")]
    vote = {"vote": "same", "canonical_id": NODE}
    async with team(node, "optional") as client:
        task = (await client.post("/v1/dedupe/tasks", json={"node": NODE, "candidate": other["id"]},
                                  headers=bearer(tokens[0]))).json()["task_id"]
        forged = [(await client.post(f"/v1/dedupe/tasks/{task}/votes", json={**vote, "agent": {"id": f"sybil-{n}"}})).json()
                  for n in (1, 2, 3)]
        proven = [(await client.post(f"/v1/dedupe/tasks/{task}/votes", json=vote, headers=bearer(t))).json() for t in tokens]
    assert [(v["status"], v["counted"]) for v in forged] == [("open", False)] * 3
    assert [(v["status"], v["counted"]) for v in proven] == [("open", True), ("flagged", True)]
    assert proven[-1]["canonical_id"] == NODE and proven[-1]["votes"]["same"] == 2


# -- sync keeps the team's marks -----------------------------------------------------------------


async def test_sync_keeps_proven_and_unproven_marks_and_a_token(node: Mesh, tmp_path):
    tokens = [(await node.tokens.add_token(agent))["token"] for agent in ("alice", "bob")]
    async with team(node, "optional") as client:
        for token in tokens:
            assert (await client.post("/v1/feedback", json=failed(), headers=bearer(token))).status_code == 202
        assert (await client.post("/v1/feedback", json=solved("sybil-1"))).status_code == 202
        url = str(client.base_url).rstrip("/")
        async with opened(tmp_path / "personal.db") as personal:
            with pytest.raises(KnowmeshError) as refused:
                await personal.sync.sync_from(url, token="km_not-a-token")  # the token is sent: a bad one is refused
            assert (refused.value.status, refused.value.code) == (401, "invalid_token")
            await personal.sync.sync_from(url, token=tokens[0])
            rows = (await personal.outcomes.list_feedback(NODE))["feedback"]
            kept = served((await personal.nodes.read_node(NODE, personal.nodes.read_request(env=LINUX_ENV))).body)
    assert [(r["agent_id"], r["proof"], r["proven"]) for r in rows] == [
        ("alice", "token", True), ("bob", "token", True), ("sybil-1", "unproven", False)]
    assert kept is None, "the team's two proven failures withhold the answer here too; the forged solved does not"
