"""A team's mesh: three `serve --http` servers, each with its own process state, on one PostgreSQL
database. Whatever server an agent reaches, it sees one mesh: races are decided once, evidence
counts across servers, the change feed has one strict order."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import httpx2
import pytest

from knowmesh_mcp.api.app import build_app

from conftest import serving

pytestmark = pytest.mark.anyio

NODE = "python/module-not-found-venv"  # a starter node
LINUX = {"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"}


async def three_servers(stack: AsyncExitStack, url: str) -> list[httpx2.AsyncClient]:
    clients = []
    for _ in range(3):  # each app opens its own Mesh (its own pool and caches) on the database
        base = await stack.enter_async_context(serving(build_app(db_path=url, seed=True, write_limit=0, with_mcp=False)))
        clients.append(await stack.enter_async_context(httpx2.AsyncClient(base_url=base, timeout=30)))
    return clients


@pytest.mark.slow
async def test_twenty_racing_patches_over_three_servers_have_one_winner(pg_database: str):
    async with AsyncExitStack() as stack:
        servers = await three_servers(stack, pg_database)
        base = (await servers[0].get(f"/v1/nodes/{NODE}/article")).json()["revision"]

        async def patch(n: int) -> httpx2.Response:
            return await servers[n % 3].patch(f"/v1/nodes/{NODE}/article", json={
                "base_revision": base, "summary": f"racer {n}", "agent": {"id": f"racer-{n}"},
                "ops": [{"op": "set", "path": "/content/context", "value": f"edited by racer {n}"}]})

        answers = await asyncio.gather(*(patch(n) for n in range(20)))
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [200] + [409] * 19, statuses
        assert {a.json()["error"]["code"] for a in answers if a.status_code == 409} == {"revision_conflict"}
        winner = next(a.json() for a in answers if a.status_code == 200)
        for server in servers:
            history = (await server.get(f"/v1/nodes/{NODE}/article/revisions")).json()["revisions"]
            assert [r["revision"] for r in history] == list(range(1, base + 2)), "no gaps, no second winner"
            read = (await server.get(f"/v1/nodes/{NODE}")).json()
            assert read["revision"] == winner["revision"] and read["content"]["context"].startswith("edited by racer")


async def test_the_evidence_loop_across_three_servers(pg_database: str):
    """Reports reach different servers; every server serves the same states at once."""
    async with AsyncExitStack() as stack:
        servers = await three_servers(stack, pg_database)
        answer = (await servers[0].get(f"/v1/nodes/{NODE}", params={"env": "ubuntu-24.04,python-3.12,pip"})).json()
        solution = answer["content"]["solutions"][0]["id"]

        def report(outcome: str, agent: str) -> dict:
            body = {"node": NODE, "solution": solution, "outcome": outcome, "env": LINUX, "agent": {"id": agent}}
            if outcome == "solved":
                body["evidence"] = {"verify": "python -c 'import requests'", "exit_code": 0}
            else:
                body["reason"] = "still fails"
            return body

        async def states() -> set[str]:
            reads = [(await s.get(f"/v1/nodes/{NODE}", params={"env": "ubuntu-24.04,python-3.12,pip"})).json()
                     for s in servers]
            return {r["answer_state"] for r in reads}

        for n, agent in enumerate(("s1", "s2")):
            assert (await servers[n].post("/v1/feedback", json=report("solved", agent))).status_code == 202
        assert await states() == {"verified"}
        first = (await servers[1].post("/v1/feedback", json=report("failed", "f1"))).json()
        second = (await servers[2].post("/v1/feedback", json=report("failed", "f2"))).json()
        assert (first["failure_state"], second["failure_state"]) == ("reported_failed", "known_failed")
        assert second["counts"]["failed_agents"] == 2, "a report on one server counts with one on another"
        for server in servers:
            hidden = (await server.get(f"/v1/nodes/{NODE}", params={"env": "ubuntu-24.04,python-3.12,pip"})).json()
            assert hidden["content"]["solutions"] == [] and hidden["no_known_working_solution"] is True
        again = await servers[0].post("/v1/feedback", json=report("failed", "f2"))
        assert again.status_code == 409 and again.json()["error"]["code"] == "duplicate_report"
        await servers[0].post("/v1/feedback", json=report("solved", "s3"))
        cleared = (await servers[1].post("/v1/feedback", json=report("solved", "s4"))).json()
        assert cleared["failure_state"] == "cleared" and await states() == {"verified"}


async def test_the_change_feed_has_one_strict_order_across_servers(pg_database: str, make_doc):
    async with AsyncExitStack() as stack:
        servers = await three_servers(stack, pg_database)
        start = (await servers[0].get("/v1/changes", params={"limit": 1000})).json()
        cursor = start["next_cursor"]
        while start["has_more"]:
            start = (await servers[0].get("/v1/changes", params={"since": cursor, "limit": 1000})).json()
            cursor = start["next_cursor"]
        documents = [make_doc(id=f"python/team-{n}", error=f"ModuleNotFoundError: No module named 'team_{n}'")
                     for n in range(9)]
        created = await asyncio.gather(*(servers[n % 3].post("/v1/nodes", json=d) for n, d in enumerate(documents)))
        assert [c.status_code for c in created] == [201] * 9
        feeds = [(await s.get("/v1/changes", params={"since": cursor})).json()["changes"] for s in servers]
    assert feeds[0] == feeds[1] == feeds[2], "every server tells the same feed"
    assert sorted(entry["id"] for entry in feeds[0]) == sorted(d["id"] for d in documents)


async def test_the_command_line_takes_a_postgresql_url(pg_database: str, make_doc, tmp_path):
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "KNOWMESH_DB": pg_database, "KNOWMESH_EMPTY": "1"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", *args], capture_output=True, text=True,
                              env=env, timeout=120, check=False)

    document = tmp_path / "node.json"
    document.write_text(json.dumps(make_doc()), encoding="utf-8")
    imported = cli("import", str(document))
    assert imported.returncode == 0 and imported.stdout.startswith("created 1"), imported.stderr
    found = cli("search", "ModuleNotFoundError: No module named 'requests'", "--json")
    assert json.loads(found.stdout)["results"][0]["id"] == make_doc()["id"]
    checked = cli("doctor")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[0].endswith("(postgresql)") and "nodes           1" in checked.stdout
    exported = cli("export")
    assert [json.loads(line)["id"] for line in exported.stdout.splitlines()] == [make_doc()["id"]]
    env["KNOWMESH_DB"] = "postgresql://nobody@/nowhere?host=" + str(tmp_path)
    unreachable = cli("doctor")
    assert unreachable.returncode == 1 and "cannot open the PostgreSQL database" in unreachable.stderr


async def test_copy_moves_a_personal_mesh_into_postgresql_from_the_command_line(pg_database: str, tmp_path):
    import os
    import subprocess
    import sys

    personal = str(tmp_path / "personal.db")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", *args], capture_output=True, text=True,
                              env={**os.environ}, timeout=120, check=False)

    assert cli("search", "KeyError", "--db", personal).returncode == 0  # makes the personal mesh (starter corpus)
    first = cli("copy", "--from", personal, "--to", pg_database)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("copied 177 nodes, 177 revisions") and first.stderr == "", "piped: no bar"
    again = cli("copy", "--from", personal, "--to", pg_database)
    assert again.stdout.strip().endswith("(nothing to change)")
    found = cli("search", "ModuleNotFoundError: No module named 'requests'", "--db", pg_database, "--json")
    assert '"python/module-not-found-venv"' in found.stdout


async def test_text_with_nul_never_gives_a_500_on_postgresql(pg_database: str, make_doc):
    """PostgreSQL text cannot hold U+0000. Documents are stored as JSON text (NUL escaped), so one in
    a document round-trips; a raw NUL in a parameter is `400 invalid_text`, never a 500."""
    async with serving(build_app(db_path=pg_database, seed=False, write_limit=0, with_mcp=False)) as base:
        async with httpx2.AsyncClient(base_url=base, timeout=30) as client:
            document = make_doc()
            document["content"]["symptom"] = "Import fails\u0000 even though pip says it is installed."
            created = await client.post("/v1/nodes", json=document)
            read = (await client.get(f"/v1/nodes/{document['id']}")).json()
            listed = await client.get("/v1/nodes", params={"ecosystem": "py\u0000thon"})
            searched = await client.get("/v1/search", params={"q": "No module named\u0000 'requests'"})
    assert created.status_code == 201 and read["content"]["symptom"] == document["content"]["symptom"]
    assert (listed.status_code, listed.json()["error"]["code"]) == (400, "invalid_text")
    assert searched.status_code == 200 and searched.json()["results"][0]["id"] == document["id"]


def _report(agent: str, solution: str) -> dict:
    return {"node": NODE, "solution": solution, "outcome": "failed", "env": LINUX, "agent": {"id": agent},
            "reason": "still fails"}


@pytest.mark.slow
async def test_twelve_simultaneous_reports_on_one_server_are_all_accepted(pg_database: str):
    """Each report held one pooled connection and the write lock while it asked the pool for a
    second (the stats read, the write counter): twelve at once starved the pool of 8, 5 x 500
    (PoolTimeout) after 30 s."""
    async with serving(build_app(db_path=pg_database, seed=True, with_mcp=False)) as base:
        async with httpx2.AsyncClient(base_url=base, timeout=60) as client:
            solution = (await client.get(f"/v1/nodes/{NODE}")).json()["content"]["solutions"][0]["id"]
            started = asyncio.get_running_loop().time()
            answers = await asyncio.gather(*(client.post("/v1/feedback", json=_report(f"a{n}", solution))
                                             for n in range(12)))
            took = asyncio.get_running_loop().time() - started
            stored = (await client.get(f"/v1/nodes/{NODE}/feedback")).json()["feedback"]
    assert [a.status_code for a in answers] == [202] * 12, [a.text[:200] for a in answers if a.status_code != 202]
    assert took < 10, f"twelve reports took {took:.1f} s"
    assert sorted(row["agent_id"] for row in stored) == sorted(f"a{n}" for n in range(12))


@pytest.mark.slow
async def test_sixty_agents_reporting_at_once_over_three_servers_are_all_accepted(pg_database: str):
    async with AsyncExitStack() as stack:
        servers = await three_servers(stack, pg_database)
        solution = (await servers[0].get(f"/v1/nodes/{NODE}")).json()["content"]["solutions"][0]["id"]
        answers = await asyncio.gather(*(servers[n % 3].post("/v1/feedback", json=_report(f"agent-{n}", solution))
                                         for n in range(60)))
        assert [a.status_code for a in answers] == [202] * 60, [a.text[:200] for a in answers if a.status_code != 202]
        final = (await servers[1].get(f"/v1/nodes/{NODE}", params={"env": "ubuntu-24.04,python-3.12,pip"})).json()
    assert final["content"]["solutions"] == [], "sixty failures from distinct agents: the answer is known_failed"


async def test_a_write_lock_held_elsewhere_is_503_database_busy_and_reads_go_on(pg_database: str):
    """A stuck peer (here a psql-like session) holds the mesh's write lock: writes give up after the
    lock timeout with 503 database_busy and Retry-After, nothing written, and while they wait the
    server's reads still answer (waiting writes used to hold its whole pool, without end)."""
    import psycopg

    from knowmesh_mcp.store.postgres.connection import LOCK_TIMEOUT_SECONDS, WRITE_LOCK

    async with serving(build_app(db_path=pg_database, seed=True, write_limit=0, with_mcp=False)) as base:
        async with httpx2.AsyncClient(base_url=base, timeout=60) as client:
            solution = (await client.get(f"/v1/nodes/{NODE}")).json()["content"]["solutions"][0]["id"]
            async with await psycopg.AsyncConnection.connect(pg_database) as peer:
                await peer.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))  # BEGIN; ... and nothing more
                loop = asyncio.get_running_loop()
                started = loop.time()
                writes = [asyncio.ensure_future(client.post("/v1/feedback", json=_report(f"w{n}", solution)))
                          for n in range(12)]
                await asyncio.sleep(1)
                reads = await asyncio.gather(*(client.get(f"/v1/nodes/{NODE}") for _ in range(10)))
                read_time = loop.time() - started
                answers = await asyncio.gather(*writes)
                waited = loop.time() - started
                await peer.rollback()
            stored = (await client.get(f"/v1/nodes/{NODE}/feedback")).json()["feedback"]
    assert [r.status_code for r in reads] == [200] * 10 and read_time < LOCK_TIMEOUT_SECONDS / 2
    assert {a.status_code for a in answers} == {503}
    assert {a.json()["error"]["code"] for a in answers} == {"database_busy"}
    assert all(a.headers["retry-after"] == "5" for a in answers)
    assert LOCK_TIMEOUT_SECONDS <= waited < LOCK_TIMEOUT_SECONDS + 3, "the queue and the lock share one timeout"
    assert stored == [], "nothing written"


@pytest.mark.slow
async def test_twelve_simultaneous_mcp_reports_on_one_server_are_all_accepted(pg_database: str):
    """The MCP tools took the same path as /v1 and failed the same way (PoolTimeout)."""
    from mcp import Client

    async with serving(build_app(db_path=pg_database, seed=True)) as base:
        async with httpx2.AsyncClient(base_url=base, timeout=60) as client:
            solution = (await client.get(f"/v1/nodes/{NODE}")).json()["content"]["solutions"][0]["id"]
        async with Client(f"{base}/mcp") as mcp:
            results = await asyncio.gather(*(mcp.call_tool("report_outcome", _report(f"m{n}", solution))
                                             for n in range(12)))
    assert [result.is_error for result in results] == [False] * 12, [r.content[0].text[:200] for r in results if r.is_error]
    assert sorted(r.structured_content["counts"]["failed_agents"] for r in results) == list(range(1, 13))


async def test_a_write_cancelled_while_it_waits_for_the_lock_never_blocks_the_event_loop(pg_database: str):
    """The wait for the mesh's lock runs in a thread on the writer's connection; a cancelled write
    must let it finish there, not roll back over it (which blocked the event loop until the lock
    timeout), and the writer connection serves the next write."""
    import psycopg

    from knowmesh_mcp.store import PostgresStore
    from knowmesh_mcp.store.postgres.connection import WRITE_LOCK

    store = await PostgresStore.open(pg_database)
    try:
        loop = asyncio.get_running_loop()

        async def write(value: str) -> None:
            async with store.write() as tx:
                await tx.set_meta("probe", value)

        async with await psycopg.AsyncConnection.connect(pg_database) as peer:
            await peer.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            waiting = asyncio.create_task(write("cancelled"))
            await asyncio.sleep(0.5)
            waiting.cancel()
            started = loop.time()
            await asyncio.sleep(0.05)
            lag = loop.time() - started - 0.05
            await peer.rollback()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await write("written")
        assert lag < 0.5, f"the event loop stood still {lag:.1f} s"
        assert await store.get_meta("probe") == "written"
    finally:
        await store.close()
