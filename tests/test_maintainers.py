"""Maintainers: set a node's status, confirm a flagged duplicate as a merge, close or discard a
service issue, each written to the audit log naming who did it and how that is known.

Every HTTP test runs a real uvicorn server (`serve --http` configured) with `auth="required"`,
a team's mesh, over a real store on disk, and sends real bearer tokens with httpx2. The command
line runs as a subprocess on a database file; MCP through the `mcp` package's client.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.core.identity import Actor
from knowmesh_mcp.mcp.server import build_mcp_server
from knowmesh_mcp.services.mesh import Mesh

from conftest import opened, remote_client, serving

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

NODE = "python/module-not-found-venv"
CANONICAL = NODE
CANONICAL_ERROR = "ModuleNotFoundError: No module named 'requests'"
MERGED = "python/no-module-named-yaml"
MERGED_ERROR = "ModuleNotFoundError: No module named 'yaml'"
OPEN = "python/open-problem"
OPEN_ERROR = "RuntimeError: the frobnicator refused to start"


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@asynccontextmanager
async def team(service: Mesh, auth: str = "required"):
    """A team's mesh: a real server with auth on, and a client without a default token."""
    async with serving(build_app(service=service, auth=auth, write_limit=0, with_mcp=False)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=10, follow_redirects=False) as client:
            yield client


async def token(service: Mesh, agent: str, role: str = "agent") -> dict[str, str]:
    return bearer((await service.tokens.add_token(agent, role=role))["token"])


def code(response: httpx2.Response) -> str:
    return response.json()["error"]["code"]


def found_ids(response: httpx2.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [result["id"] for result in response.json()["results"]]


async def listed_ids(client: httpx2.AsyncClient) -> list[str]:
    response = await client.get("/v1/nodes")
    assert response.status_code == 200, response.text
    return [entry["id"] for entry in response.json()["nodes"]]


async def audit(client: httpx2.AsyncClient, target: str | None = None) -> list[dict[str, Any]]:
    response = await client.get("/v1/audit", params={"target": target} if target else None)
    assert response.status_code == 200, response.text
    return response.json()["actions"]


def open_problem(make_doc) -> dict[str, Any]:
    document = make_doc(id=OPEN, error=OPEN_ERROR, title="The frobnicator refuses to start")
    document["content"] = {**document["content"], "solutions": []}
    return document


async def flag_pair(client: httpx2.AsyncClient, voters: list[dict[str, str]], *, canonical: str = CANONICAL) -> int:
    """Open a dedupe task for MERGED vs CANONICAL and have two proven agents vote it the same."""
    opened_task = await client.post("/v1/dedupe/tasks", json={"node": MERGED, "candidate": CANONICAL,
                                                              "reason": "the same wrong interpreter"}, headers=voters[0])
    assert opened_task.status_code == 202, opened_task.text
    task_id = opened_task.json()["task_id"]
    statuses = []
    for headers in voters:
        vote = await client.post(f"/v1/dedupe/tasks/{task_id}/votes", json={"vote": "same", "canonical_id": canonical},
                                 headers=headers)
        assert vote.status_code == 200, vote.text
        assert vote.json()["counted"] is True
        statuses.append(vote.json()["status"])
    assert statuses == ["open", "flagged"]
    return task_id


@pytest.fixture
async def pair(service: Mesh, make_doc) -> Mesh:
    """Two distinct nodes (different ids and errors) that describe one problem."""
    await service.creation.create_node(make_doc())
    await service.creation.create_node(make_doc(id=MERGED, error=MERGED_ERROR, title="No module named yaml in a venv"))
    return service


# -- node status -------------------------------------------------------------------------------


async def test_a_maintainer_promotes_drafts_and_deprecates_a_node(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    await service.creation.create_node(open_problem(make_doc))
    mia = await token(service, "mia", role="maintainer")
    async with team(service) as client:
        assert (await client.get(f"/v1/nodes/{NODE}")).json()["status"] == "draft"
        assert NODE in found_ids(await client.get("/v1/search", params={"q": CANONICAL_ERROR}))

        promoted = await client.post(f"/v1/nodes/{NODE}/status", json={"status": "verified", "note": "ran it twice"},
                                     headers=mia)
        assert promoted.status_code == 200, promoted.text
        assert promoted.json()["changed"] is True and promoted.json()["previous"] == "draft"
        assert promoted.json()["maintainer"] == {"id": "mia", "proven": True}
        assert (await client.get(f"/v1/nodes/{NODE}")).json()["status"] == "verified"

        again = await client.post(f"/v1/nodes/{NODE}/status", json={"status": "verified"}, headers=mia)
        assert again.status_code == 200 and again.json()["changed"] is False  # nothing to record

        drafted = await client.post(f"/v1/nodes/{NODE}/status", json={"status": "draft"}, headers=mia)
        assert drafted.status_code == 200, drafted.text
        assert (await client.get(f"/v1/nodes/{NODE}")).json()["status"] == "draft"

        assert NODE in await listed_ids(client)
        deprecated = await client.post(f"/v1/nodes/{NODE}/status", json={"status": "deprecated", "note": "superseded"},
                                       headers=mia)
        assert deprecated.status_code == 200, deprecated.text
        assert NODE not in await listed_ids(client)
        assert NODE not in found_ids(await client.get("/v1/search", params={"q": CANONICAL_ERROR}))
        read = await client.get(f"/v1/nodes/{NODE}")
        assert read.status_code == 200 and read.json()["status"] == "deprecated", "deprecated nodes stay readable"
        assert (await client.get(f"/v1/nodes/{NODE}.md")).status_code == 200
        changes = (await client.get("/v1/changes")).json()["changes"]
        assert [c["change"] for c in changes if c["id"] == NODE] == ["deprecated"]

        unanswered = await client.post(f"/v1/nodes/{OPEN}/status", json={"status": "verified"}, headers=mia)
        assert unanswered.status_code == 409 and code(unanswered) == "no_answer"
        assert (await client.get(f"/v1/nodes/{OPEN}")).json()["status"] == "draft"
        bad = await client.post(f"/v1/nodes/{OPEN}/status", json={"status": "golden"}, headers=mia)
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "status"
        missing = await client.post("/v1/nodes/python/no-such-node/status", json={"status": "draft"}, headers=mia)
        assert missing.status_code == 404

        log = await audit(client)
        by_node = await audit(client, NODE)
        assert await audit(client, OPEN) == []
    assert log == by_node
    assert [(a["action"], a["target"], a["from"], a["to"], a["note"]) for a in log] == [
        ("set_status", NODE, "draft", "verified", "ran it twice"),
        ("set_status", NODE, "verified", "draft", None),
        ("set_status", NODE, "draft", "deprecated", "superseded"),
    ]
    assert {(a["maintainer"]["id"], a["proof"]) for a in log} == {("mia", "token")}
    assert [a["id"] for a in log] == sorted(a["id"] for a in log)


# -- who may: maintainers only -------------------------------------------------------------------


async def test_agents_and_callers_without_a_token_cannot_act_as_maintainers(pair: Mesh):
    service = pair
    alice, bob = await token(service, "alice"), await token(service, "bob")
    async with team(service) as client:
        task_id = await flag_pair(client, [alice, bob])
        filed = await client.post("/v1/issues", json={"title": "search is slow", "body": "10 s per query"},
                                  headers=alice)
        assert filed.status_code == 202, filed.text
        number = filed.json()["issue_number"]
        routes = [
            (f"/v1/nodes/{NODE}/status", {"status": "verified", "note": "mine now"}),
            (f"/v1/nodes/{NODE}/status", {"status": "deprecated"}),
            (f"/v1/dedupe/tasks/{task_id}/merge", {"canonical_id": CANONICAL, "note": "same"}),
            (f"/v1/issues/{number}/status", {"status": "closed", "note": "fixed"}),
            (f"/v1/issues/{number}/status", {"status": "discarded", "note": "no"}),
        ]
        for path, body in routes:
            as_agent = await client.post(path, json=body, headers=alice)
            assert as_agent.status_code == 403 and code(as_agent) == "maintainer_required", (path, as_agent.text)
            claimed = await client.post(path, json={**body, "agent": {"id": "mia"}})
            assert claimed.status_code == 401 and code(claimed) == "auth_required", (path, claimed.text)
            anonymous = await client.post(path, json=body)
            assert anonymous.status_code == 401 and code(anonymous) == "auth_required", (path, anonymous.text)
            forged = await client.post(path, json={**body, "agent": {"id": "mia"}}, headers=alice)
            assert forged.status_code == 403 and code(forged) == "agent_mismatch", (path, forged.text)
            bogus = await client.post(path, json=body, headers=bearer("km_not-a-token"))
            assert bogus.status_code == 401 and code(bogus) == "invalid_token", (path, bogus.text)

        assert (await client.get(f"/v1/nodes/{NODE}")).json()["status"] == "draft"
        assert (await client.get(f"/v1/nodes/{MERGED}")).status_code == 200
        flagged = (await client.get("/v1/dedupe/tasks", params={"status": "flagged"})).json()["tasks"]
        assert [t["task_id"] for t in flagged] == [task_id]
        assert "Status: open" in (await client.get(f"/issues/{number}")).text
        assert await audit(client) == []
    assert await service.store.redirect(MERGED) is None


async def test_a_claimed_maintainer_id_is_not_a_maintainer_on_a_personal_mesh(service: Mesh, make_doc):
    """With auth off ids are taken as claimed: naming a maintainer proves nothing."""
    await service.creation.create_node(make_doc())
    await service.tokens.add_token("mia", role="maintainer")
    async with team(service, auth="off") as client:
        claimed = await client.post(f"/v1/nodes/{NODE}/status", json={"status": "verified", "agent": {"id": "mia"}})
        anonymous = await client.post(f"/v1/nodes/{NODE}/status", json={"status": "verified"})
        assert (await client.get(f"/v1/nodes/{NODE}")).json()["status"] == "draft"
    assert claimed.status_code == 403 and code(claimed) == "maintainer_required"
    assert anonymous.status_code == 403 and code(anonymous) == "maintainer_required"


# -- merges ----------------------------------------------------------------------------------------


async def test_a_maintainer_merges_a_flagged_pair_and_the_merged_node_answers_301(pair: Mesh):
    service = pair
    alice, bob = await token(service, "alice"), await token(service, "bob")
    mia = await token(service, "mia", role="maintainer")
    async with team(service) as client:
        report = await client.post("/v1/feedback", headers=alice, json={
            "node": MERGED, "solution": "venv-linux", "outcome": "solved",
            "env": {"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"},
            "evidence": {"verify": "python -c 'import yaml'", "exit_code": 0}})
        assert report.status_code == 202, report.text

        opened_task = await client.post("/v1/dedupe/tasks", json={"node": MERGED, "candidate": CANONICAL},
                                        headers=alice)
        early = await client.post(f"/v1/dedupe/tasks/{opened_task.json()['task_id']}/merge", json={"note": "n"},
                                  headers=mia)
        assert early.status_code == 409 and code(early) == "dedupe_not_flagged"

        task_id = await flag_pair(client, [alice, bob])
        assert task_id == opened_task.json()["task_id"]
        flagged = (await client.get("/v1/dedupe/tasks", params={"status": "flagged"})).json()["tasks"]
        assert [(t["task_id"], t["canonical_id"], t["status"]) for t in flagged] == [(task_id, CANONICAL, "flagged")]
        assert (await client.get("/v1/dedupe/tasks")).json()["tasks"] == [], "a flagged pair is no longer open"

        wrong = await client.post(f"/v1/dedupe/tasks/{task_id}/merge", json={"canonical_id": OPEN}, headers=mia)
        assert wrong.status_code == 400 and wrong.json()["error"]["field"] == "canonical_id"
        await client.post(f"/v1/nodes/{CANONICAL}/status", json={"status": "deprecated"}, headers=mia)
        into_deprecated = await client.post(f"/v1/dedupe/tasks/{task_id}/merge", json={}, headers=mia)
        assert into_deprecated.status_code == 409 and code(into_deprecated) == "canonical_deprecated"
        await client.post(f"/v1/nodes/{CANONICAL}/status", json={"status": "draft"}, headers=mia)

        merged = await client.post(f"/v1/dedupe/tasks/{task_id}/merge", json={"note": "one problem"}, headers=mia)
        assert merged.status_code == 200, merged.text
        assert merged.json()["merged"] == MERGED and merged.json()["canonical"]["id"] == CANONICAL
        assert merged.json()["maintainer"] == {"id": "mia", "proven": True}

        for old, new in [
            (f"/v1/nodes/{MERGED}", f"/v1/nodes/{CANONICAL}"),
            (f"/v1/nodes/{MERGED}.md", f"/v1/nodes/{CANONICAL}.md"),
            (f"/v1/nodes/{MERGED}/article", f"/v1/nodes/{CANONICAL}/article"),
            (f"/nodes/{MERGED}", f"/nodes/{CANONICAL}"),
        ]:
            moved = await client.get(old)
            assert moved.status_code == 301, (old, moved.text)
            assert moved.headers["location"] == new, old
            assert code(moved) == "moved" and moved.json()["canonical"]["id"] == CANONICAL
        with_query = await client.get(f"/v1/nodes/{MERGED}", params={"env": "ubuntu-24.04,python-3.12,pip"})
        assert with_query.headers["location"] == f"/v1/nodes/{CANONICAL}?env=ubuntu-24.04%2Cpython-3.12%2Cpip"
        followed = await client.get(f"/v1/nodes/{MERGED}", follow_redirects=True)
        assert followed.status_code == 200 and followed.json()["id"] == CANONICAL

        history = await client.get(f"/v1/nodes/{MERGED}/article/revisions")
        assert history.status_code == 200, history.text
        assert history.json()["id"] == MERGED and len(history.json()["revisions"]) == 1
        feedback = await client.get(f"/v1/nodes/{MERGED}/feedback")
        assert feedback.status_code == 200, feedback.text
        assert [(f["agent_id"], f["outcome"]) for f in feedback.json()["feedback"]] == [("alice", "solved")]

        searched = found_ids(await client.get("/v1/search", params={"q": MERGED_ERROR}))
        assert MERGED not in searched and CANONICAL in searched
        assert set(searched) == {CANONICAL}
        listed = await listed_ids(client)
        assert MERGED not in listed and CANONICAL in listed
        changes = {c["id"]: c["change"] for c in (await client.get("/v1/changes")).json()["changes"]}
        assert changes[MERGED] == "deprecated"

        twice = await client.post(f"/v1/dedupe/tasks/{task_id}/merge", json={"note": "again"}, headers=mia)
        assert twice.status_code == 409, twice.text
        edit = await client.patch(f"/v1/nodes/{MERGED}/article", headers=alice, json={
            "base_revision": 1, "summary": "s", "ops": [{"op": "set", "path": "/title", "value": "Still here"}]})
        assert edit.status_code == 409 and code(edit) == "node_merged", edit.text
        assert edit.json()["canonical"]["id"] == CANONICAL
        revived = await client.post(f"/v1/nodes/{MERGED}/status", json={"status": "draft"}, headers=mia)
        assert revived.status_code == 409 and code(revived) == "node_merged"
        assert (await client.get("/v1/dedupe/tasks", params={"status": "flagged"})).json()["tasks"] == []
        log = await audit(client)
    # The canonical node's deprecate-and-restore above is in the log too.
    assert [(a["action"], a["target"], a["canonical"], a["task_id"], a["from"], a["to"], a["note"], a["proof"],
             a["maintainer"]["id"]) for a in log if a["action"] == "merge"] == [
        ("merge", MERGED, CANONICAL, task_id, "draft", "deprecated", "one problem", "token", "mia")]
    assert [(a["target"], a["to"]) for a in log if a["action"] == "set_status"] == [(CANONICAL, "deprecated"), (CANONICAL, "draft")]
    assert len((await service.articles.article_history(MERGED))["revisions"]) == 1, "the refused edit wrote nothing"


async def test_a_maintainer_may_keep_the_other_node_of_the_pair(pair: Mesh):
    service = pair
    alice, bob = await token(service, "alice"), await token(service, "bob")
    mia = await token(service, "mia", role="maintainer")
    async with team(service) as client:
        task_id = await flag_pair(client, [alice, bob])
        merged = await client.post(f"/v1/dedupe/tasks/{task_id}/merge", json={"canonical_id": MERGED, "note": "newer"},
                                   headers=mia)
        assert merged.status_code == 200, merged.text
        assert merged.json()["merged"] == CANONICAL and merged.json()["canonical"]["id"] == MERGED
        moved = await client.get(f"/v1/nodes/{CANONICAL}")
        assert moved.status_code == 301 and moved.headers["location"] == f"/v1/nodes/{MERGED}"
        assert (await client.get(f"/v1/nodes/{MERGED}")).status_code == 200


# -- service issues --------------------------------------------------------------------------------


async def test_a_maintainer_closes_and_discards_issues_with_a_note(service: Mesh):
    alice = await token(service, "alice")
    mia = await token(service, "mia", role="maintainer")
    async with team(service) as client:
        numbers = []
        for title in ("search is slow", "please add a dark theme", "the feed skips a node"):
            filed = await client.post("/v1/issues", json={"title": title, "body": "details"}, headers=alice)
            assert filed.status_code == 202, filed.text
            numbers.append(filed.json()["issue_number"])
        fixed, refused, pending = numbers

        no_note = await client.post(f"/v1/issues/{pending}/status", json={"status": "closed"}, headers=mia)
        blank = await client.post(f"/v1/issues/{pending}/status", json={"status": "closed", "note": "  "}, headers=mia)
        odd = await client.post(f"/v1/issues/{pending}/status", json={"status": "fixed", "note": "n"}, headers=mia)
        long = await client.post(f"/v1/issues/{pending}/status", json={"status": "closed", "note": "n" * 2001},
                                 headers=mia)
        for response in (no_note, blank, odd, long):
            assert response.status_code == 400, response.text
        assert no_note.json()["error"]["field"] == "note" and blank.json()["error"]["field"] == "note"
        unknown = await client.post("/v1/issues/999/status", json={"status": "closed", "note": "n"}, headers=mia)
        assert unknown.status_code == 404

        closed = await client.post(f"/v1/issues/{fixed}/status",
                                   json={"status": "closed", "note": "an index on signatures"}, headers=mia)
        assert closed.status_code == 200, closed.text
        assert closed.json()["status"] == "closed"
        assert closed.json()["resolution"]["note"] == "an index on signatures"
        assert closed.json()["resolution"]["maintainer"] == "mia"
        discarded = await client.post(f"/v1/issues/{refused}/status",
                                      json={"status": "discarded", "note": "pages follow the system theme"}, headers=mia)
        assert discarded.status_code == 200, discarded.text

        for number in (fixed, refused):
            for status in ("closed", "discarded"):
                again = await client.post(f"/v1/issues/{number}/status", json={"status": status, "note": "n"},
                                          headers=mia)
                assert again.status_code == 409 and code(again) == "issue_resolved", again.text

        pages = {n: (await client.get(f"/issues/{n}")).text for n in numbers}
        index = (await client.get("/issues")).text
        log = await audit(client)
        by_issue = await audit(client, str(fixed))
    assert "Status: closed" in pages[fixed] and "## Closed by mia" in pages[fixed] and "an index on signatures" in pages[fixed]
    assert "Status: discarded" in pages[refused] and "pages follow the system theme" in pages[refused]
    assert "Status: open" in pages[pending]
    assert f"#{fixed} [closed]" in index and f"#{refused} [discarded]" in index and f"#{pending} [open]" in index
    assert [(a["action"], a["target"], a["from"], a["to"], a["note"], a["maintainer"]["id"], a["proof"])
            for a in log] == [
        ("close_issue", str(fixed), "open", "closed", "an index on signatures", "mia", "token"),
        ("discard_issue", str(refused), "open", "discarded", "pages follow the system theme", "mia", "token"),
    ]
    assert by_issue == log[:1]


# -- the command line on the local database --------------------------------------------------------


def cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_")},
           "KNOWMESH_DB": db, "KNOWMESH_EMPTY": "1", "KNOWMESH_AGENT_ID": "local-maintainer"}
    return subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


async def test_admin_commands_act_on_the_local_database_as_a_local_maintainer(tmp_path, make_doc):
    db = str(tmp_path / "admin.db")
    async with opened(db) as service:
        await service.creation.create_node(make_doc())
        await service.creation.create_node(open_problem(make_doc))

    promoted = cli("admin", "promote", NODE, "--note", "ran it on two machines", db=db)
    assert promoted.returncode == 0, promoted.stderr
    assert promoted.stdout.strip() == f"{NODE}: draft -> verified"
    same = cli("admin", "promote", NODE, db=db)
    assert same.returncode == 0 and "already verified (nothing recorded)" in same.stdout
    deprecated = cli("admin", "--json", "deprecate", NODE, db=db)
    assert deprecated.returncode == 0, deprecated.stderr
    result = json.loads(deprecated.stdout)
    assert (result["previous"], result["status"], result["changed"]) == ("verified", "deprecated", True)
    assert result["maintainer"] == {"id": "local-maintainer", "proven": True}

    unanswered = cli("admin", "promote", OPEN, db=db)
    assert unanswered.returncode == 2 and "no_answer" in unanswered.stderr
    missing = cli("admin", "promote", "python/no-such-node", db=db)
    assert missing.returncode == 2 and "not_found" in missing.stderr
    no_note = cli("admin", "close-issue", "1", db=db)
    assert no_note.returncode == 2 and "--note" in no_note.stderr
    assert cli("admin", "flagged", db=db).stdout.strip() == "no flagged pairs"

    log = cli("admin", "audit", db=db)
    assert log.returncode == 0, log.stderr
    lines = log.stdout.strip().splitlines()
    assert len(lines) == 2
    assert all("local-maintainer" in line and "set_status" in line and NODE in line for line in lines)
    assert "draft -> verified" in lines[0] and "(ran it on two machines)" in lines[0]
    assert "verified -> deprecated" in lines[1]
    as_json = json.loads(cli("admin", "--json", "audit", "--target", NODE, db=db).stdout)
    assert [(a["from"], a["to"], a["proof"], a["maintainer"]["id"]) for a in as_json["actions"]] == [
        ("draft", "verified", "local", "local-maintainer"), ("verified", "deprecated", "local", "local-maintainer")]
    assert json.loads(cli("admin", "--json", "audit", "--target", OPEN, db=db).stdout)["actions"] == []

    async with opened(db) as service:
        read = (await service.nodes.read_node(NODE)).body
        assert read["status"] == "deprecated"
        assert [a["proof"] for a in (await service.maintenance.audit_log())["actions"]] == ["local", "local"]


async def test_admin_on_an_empty_database_says_so(tmp_path):
    db = str(tmp_path / "empty.db")
    log = cli("admin", "audit", db=db)
    assert log.returncode == 0, log.stderr
    assert log.stdout.strip() == "no maintainer actions yet"


# -- MCP: an agent has no 301 to follow -------------------------------------------------------------


async def merge_in_process(service: Mesh) -> None:
    alice, bob = Actor("alice", "token"), Actor("bob", "token")
    task = await service.dedupe.open_dedupe_task({"node": MERGED, "candidate": CANONICAL}, actor=alice)
    for voter in (alice, bob):
        await service.dedupe.vote_dedupe(task["task_id"], {"vote": "same", "canonical_id": CANONICAL}, actor=voter)
    await service.maintenance.confirm_merge(task["task_id"], note="one problem", actor=Actor("mia", "token", role="maintainer"))


async def test_read_article_over_mcp_of_a_merged_node_returns_the_canonical(pair: Mesh):
    await merge_in_process(pair)
    async with Client(build_mcp_server(lambda: pair)) as client:
        read = await client.call_tool("read_article", {"id": MERGED})
        found = await client.call_tool("search", {"q": MERGED_ERROR})
    assert not read.is_error, read.content
    assert read.structured_content["id"] == CANONICAL
    assert read.structured_content["merged_from"] == MERGED
    assert not found.is_error
    assert MERGED not in [r["id"] for r in found.structured_content["results"]]



async def test_read_article_over_a_remote_mcp_server_of_a_merged_node_returns_the_canonical(pair: Mesh):
    """`serve --stdio --remote URL`: the remote answers 301, and the agent still gets the canonical node."""
    await merge_in_process(pair)
    async with serving(build_app(service=pair, with_mcp=False, write_limit=0)) as url:
        async with remote_client(url) as client:
            read = await client.call_tool("read_article", {"id": MERGED})
            resource = await client.read_resource(f"knowmesh://nodes/{MERGED}")
    assert not read.is_error, read.content
    assert read.structured_content["id"] == CANONICAL
    assert read.structured_content["merged_from"] == MERGED
    assert '"moved"' not in resource.contents[0].text


# -- more merges -----------------------------------------------------------------------------------


async def test_two_maintainers_confirming_one_pair_at_once_merge_it_once(pair: Mesh):
    service = pair
    alice, bob = await token(service, "alice"), await token(service, "bob")
    maintainers = [await token(service, "mia", role="maintainer"), await token(service, "max", role="maintainer")]
    async with team(service) as client:
        task_id = await flag_pair(client, [alice, bob])
        answers: list[httpx2.Response] = []

        async def merge(headers: dict[str, str]) -> None:
            answers.append(await client.post(f"/v1/dedupe/tasks/{task_id}/merge", json={"note": "same"}, headers=headers))

        async with anyio.create_task_group() as group:
            for headers in maintainers:
                group.start_soon(merge, headers)
        log = await audit(client)
    assert sorted(r.status_code for r in answers) == [200, 409], [r.text for r in answers]
    assert [a["action"] for a in log] == ["merge"]
    assert await service.store.redirect(MERGED) == CANONICAL


async def test_a_node_merged_into_a_node_later_merged_answers_with_the_last_canonical(pair: Mesh, make_doc):
    service = pair
    third = "python/no-module-named-toml"
    await service.creation.create_node(make_doc(id=third, error="ModuleNotFoundError: No module named 'toml'",
                                       title="No module named toml in a venv"))
    alice, bob = await token(service, "alice"), await token(service, "bob")
    mia = await token(service, "mia", role="maintainer")
    async with team(service) as client:
        first = await flag_pair(client, [alice, bob])
        assert (await client.post(f"/v1/dedupe/tasks/{first}/merge", json={}, headers=mia)).status_code == 200
        task = (await client.post("/v1/dedupe/tasks", json={"node": CANONICAL, "candidate": third}, headers=alice)).json()
        for headers in (alice, bob):
            await client.post(f"/v1/dedupe/tasks/{task['task_id']}/votes", json={"vote": "same", "canonical_id": third},
                              headers=headers)
        second = await client.post(f"/v1/dedupe/tasks/{task['task_id']}/merge", json={}, headers=mia)
        assert second.status_code == 200, second.text
        locations = {node: (await client.get(f"/v1/nodes/{node}")).headers.get("location") for node in (MERGED, CANONICAL)}
        read = await client.get(f"/v1/nodes/{MERGED}", follow_redirects=True)
    assert locations == {MERGED: f"/v1/nodes/{third}", CANONICAL: f"/v1/nodes/{third}"}, "one hop, never a chain"
    assert read.status_code == 200 and read.json()["id"] == third


async def test_a_pair_with_a_merged_node_cannot_be_merged_again(pair: Mesh, make_doc):
    """A task opened before a merge that involves the merged node: 409 node_merged, nothing written."""
    service = pair
    third = "python/no-module-named-toml"
    await service.creation.create_node(make_doc(id=third, error="ModuleNotFoundError: No module named 'toml'",
                                       title="No module named toml in a venv"))
    alice, bob = await token(service, "alice"), await token(service, "bob")
    mia = await token(service, "mia", role="maintainer")
    async with team(service) as client:
        late = (await client.post("/v1/dedupe/tasks", json={"node": MERGED, "candidate": third}, headers=alice)).json()
        for headers in (alice, bob):
            await client.post(f"/v1/dedupe/tasks/{late['task_id']}/votes", json={"vote": "same", "canonical_id": third},
                              headers=headers)
        first = await flag_pair(client, [alice, bob])
        assert (await client.post(f"/v1/dedupe/tasks/{first}/merge", json={}, headers=mia)).status_code == 200
        refused = await client.post(f"/v1/dedupe/tasks/{late['task_id']}/merge", json={}, headers=mia)
        assert refused.status_code == 409 and code(refused) == "node_merged", refused.text
        assert (await client.get(f"/v1/nodes/{third}")).status_code == 200
        assert [a["action"] for a in await audit(client)] == ["merge"]
    assert await service.store.redirect(third) is None


async def test_the_audit_log_is_append_only(sqlite_service: Mesh, make_doc, tmp_path):
    """The SQLite file refuses it (PostgreSQL's triggers: tests/test_backend_evidence.py)."""
    service = sqlite_service
    await service.creation.create_node(make_doc())
    await service.maintenance.set_status(NODE, "verified", actor=Actor("mia", "token", role="maintainer"))
    with sqlite3.connect(tmp_path / "test.db") as db:
        for statement in ("UPDATE maintainer_actions SET maintainer_id = 'mallory'", "DELETE FROM maintainer_actions"):
            with pytest.raises(sqlite3.DatabaseError, match="append only"):
                db.execute(statement)
    assert [a["maintainer"]["id"] for a in (await service.maintenance.audit_log())["actions"]] == ["mia"]


async def test_admin_remote_acts_with_a_maintainers_token(service: Mesh, make_doc, tmp_path):
    await service.creation.create_node(make_doc())
    mia = (await service.tokens.add_token("mia", role="maintainer"))["token"]
    alice = (await service.tokens.add_token("alice"))["token"]
    db = str(tmp_path / "unused.db")
    async with serving(build_app(service=service, auth="required", write_limit=0, with_mcp=False)) as url:
        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return cli("admin", "--remote", url, *args, db=db)

        promoted = await anyio.to_thread.run_sync(lambda: run("--token", mia, "promote", NODE, "--note", "checked"))
        refused = await anyio.to_thread.run_sync(lambda: run("--token", alice, "deprecate", NODE))
        log = await anyio.to_thread.run_sync(lambda: run("--json", "audit", "--target", NODE))
    assert promoted.returncode == 0, promoted.stderr
    assert promoted.stdout.strip() == f"{NODE}: draft -> verified"
    assert refused.returncode == 2 and "maintainer_required" in refused.stderr
    actions = json.loads(log.stdout)["actions"]
    assert [(a["to"], a["maintainer"]["id"], a["proof"], a["note"]) for a in actions] == [("verified", "mia", "token", "checked")]
    assert (await service.nodes.read_node(NODE)).body["status"] == "verified"


async def test_the_location_of_a_merged_node_replaces_only_its_id(service: Mesh, make_doc):
    for node_id in ("v1/nodes", "v1/other"):
        await service.creation.create_node(make_doc(id=node_id, ecosystem="v1", error=f"Error: {node_id} broke at start-up"))
    alice, bob = Actor("alice", "token"), Actor("bob", "token")
    task = await service.dedupe.open_dedupe_task({"node": "v1/nodes", "candidate": "v1/other"}, actor=alice)
    for voter in (alice, bob):
        await service.dedupe.vote_dedupe(task["task_id"], {"vote": "same", "canonical_id": "v1/other"}, actor=voter)
    await service.maintenance.confirm_merge(task["task_id"], actor=Actor("mia", "token", role="maintainer"))
    async with team(service) as client:
        locations = {path: (await client.get(path)).headers.get("location")
                     for path in ("/nodes/v1/nodes", "/v1/nodes/v1/nodes", "/v1/nodes/v1/nodes.md")}
    assert locations == {"/nodes/v1/nodes": "/nodes/v1/other", "/v1/nodes/v1/nodes": "/v1/nodes/v1/other",
                         "/v1/nodes/v1/nodes.md": "/v1/nodes/v1/other.md"}
