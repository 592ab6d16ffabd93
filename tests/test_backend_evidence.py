"""Evidence, failures, write limits, dedupe, issues, tokens, meta, the review queue and the audit log
answer alike on SQLite and PostgreSQL: each test runs the same steps on both backends (a fresh
empty mesh each) under one stopped clock, and compares what they return.

Nodes are written with plain SQL (the node writes are tested elsewhere): just the rows evidence
refers to."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from knowmesh_mcp.store import DuplicateRow, StatsRow
from knowmesh_mcp.store.postgres import evidence as pg_evidence
from knowmesh_mcp.store.postgres import schema as pg_schema
from knowmesh_mcp.store.sqlite import connection as sqlite_connection
from knowmesh_mcp.store.sqlite import evidence as sqlite_evidence
from knowmesh_mcp.store.sqlite import nodes as sqlite_nodes
from knowmesh_mcp.store.sqlite import schema as sqlite_schema
from knowmesh_mcp.store.sqlite import sync as sqlite_sync

pytestmark = pytest.mark.anyio

T0 = "2026-01-01T00:00:00.000000Z"
LINUX = "linux|3|pip"
MAC = "macos|3|pip"


class Clock:
    """utc_now of both backends, stopped at `now` until a step moves it."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> str:
        return self.now

    def at(self, second: int) -> str:
        self.now = f"2026-01-01T00:00:{second:02d}.000000Z"
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    stopped = Clock()
    for module in (sqlite_connection, sqlite_nodes, sqlite_sync, sqlite_evidence, pg_evidence):
        monkeypatch.setattr(module, "utc_now", stopped)
    return stopped


async def raw(tx: Any, sql: str, params: tuple[Any, ...] = ()) -> None:
    """One statement of test data, `?` placeholders on either backend."""
    if "postgres" in type(tx).__module__:
        sql = sql.replace("?", "%s")
    await tx.connection.execute(sql, params)


async def add_node(tx: Any, node_id: str, *, pk: int, has_answer: bool = True, status: str = "draft",
                   solutions: dict[str, int] | None = None, created: str = T0, updated: str | None = None) -> None:
    """A node row with its current version and revision 1 (what feedback and failures refer to)."""
    version = f"v-{node_id}"
    await raw(tx, """INSERT INTO nodes (pk, id, ecosystem, status, title, current_version, current_revision, has_answer,
                        signature_hash, quoted_values, created_at, updated_at, change_seq)
                     VALUES (?, ?, 'python', ?, ?, ?, 1, ?, ?, '[]', ?, ?, ?)""",
              (pk, node_id, status, f"title of {node_id}", version, int(has_answer), f"sig-{node_id}", created,
               updated or created, pk))
    await raw(tx, "INSERT INTO node_versions (version, node_id, document, solution_revisions, created_at) VALUES (?, ?, ?, ?, ?)",
              (version, node_id, "{}", json.dumps(solutions if solutions is not None else {"s1": 1}), created))
    await raw(tx, """INSERT INTO article_revisions (revision_id, node_id, revision, parent_revision, kind, version, agent_id,
                        model, summary, changes, created_at, agent_proof)
                     VALUES (?, ?, 1, NULL, 'create', ?, NULL, NULL, 'created', '[]', ?, 'claimed')""",
              (f"r-{node_id}", node_id, version, created))


def feedback(node_id: str, agent: str | None, *, outcome: str = "solved", solution: str = "s1", revision: int = 1,
             cluster: str = LINUX, proof: str = "token", created: str = T0, ip_hash: str | None = None) -> dict[str, Any]:
    return {"node_id": node_id, "node_version": f"v-{node_id}", "solution_id": solution, "solution_revision": revision,
            "outcome": outcome, "cluster": cluster, "environment": json.dumps({"os": cluster.split("|")[0]}),
            "agent_id": agent, "model": "m", "ip_hash": ip_hash, "proof": proof, "reason": None, "note": "n",
            "evidence_hash": None, "exit_code": 0, "created_at": created}


def failure(node_id: str, agent: str, cluster: str = LINUX) -> dict[str, Any]:
    return {"node_id": node_id, "environment": json.dumps({"os": cluster.split("|")[0]}), "cluster": cluster,
            "summary": "tried it", "steps": json.dumps(["pip install x"]), "reason": "still fails", "agent_id": agent,
            "model": "m", "proof": "token", "ip_hash": None, "created_at": T0}


def stats(solution: str, revision: int, cluster: str, *, state: str = "ok", sample: int = 1, solved_agents: int = 0,
          last_verified: str | None = None) -> StatsRow:
    return StatsRow(solution, revision, cluster, 1.5, 0.25, sample, 0.75, state, "draft", solved_agents, 1, last_verified)


async def on_both(both_stores: dict[str, Any], clock: Clock,
                  steps: Callable[[Any, Clock], Awaitable[Any]]) -> Any:
    """Run `steps` on each backend from the same clock; assert they return the same, and return it."""
    results = {}
    for name, store in both_stores.items():
        clock.now = T0
        results[name] = await steps(store, clock)
    assert results["postgres"] == results["sqlite"]
    return results["sqlite"]


async def test_feedback_rows(both_stores, clock):
    async def steps(store, clock):
        async with store.write() as tx:
            await add_node(tx, "python/a", pk=1)
            await add_node(tx, "python/b", pk=2)
        out: dict[str, Any] = {}
        async with store.write() as tx:
            out["ids"] = [
                await tx.insert_row("feedback", feedback("python/a", "alice", created=clock.at(1))),
                await tx.insert_row("feedback", feedback("python/a", "bob", outcome="failed", created=clock.at(3))),
                await tx.insert_row("feedback", feedback("python/b", "bob", created=clock.at(3))),
                await tx.insert_row("feedback", feedback("python/a", "alice", cluster=MAC, created=clock.at(2))),
                await tx.insert_row("feedback", feedback("python/a", "alice", proof="unproven", ip_hash="h1",
                                                         created=clock.at(5))),
                await tx.insert_row("feedback", feedback("python/a", None, ip_hash="h2", created=clock.at(6))),
                await tx.insert_row("feedback", feedback("python/a", "carol", solution="s0", created=clock.at(7))),
            ]
            out["feedback_of"] = await tx.feedback_of("python/a")  # unproven left out, in SQLite's index order
            out["feedback_of_none"] = await tx.feedback_of("python/none")
        out["after"] = await store.feedback_after("python/a", 0, 100)
        out["page"] = await store.feedback_after("python/a", out["ids"][1], 2)
        async with store.write() as tx:
            here = [{**row, "environment": json.dumps(row["environment"]), "created_at": clock.at(10)}
                    for row in out["after"][:2]]  # both already given here: kept once
            out["synced"] = await tx.insert_synced_feedback(
                [here[0], {**here[0], "agent_id": "dave"}, here[1]])
            out["synced_none"] = await tx.insert_synced_feedback([])
        synced = await store.feedback_after("python/a", out["ids"][-1], 100)
        # ON CONFLICT DO NOTHING takes an identity value for each row it skips: ids past here differ.
        assert len(synced) == 1 and synced[0]["id"] > out["ids"][-1]
        out["after_sync"] = without_ids(synced)
        return out

    out = await on_both(both_stores, clock, steps)
    assert out["ids"] == [1, 2, 3, 4, 5, 6, 7]
    assert [row["id"] for row in out["after"]] == [1, 2, 4, 5, 6, 7] and "ip_hash" not in out["after"][0]
    assert [row["id"] for row in out["page"]] == [4, 5]
    assert out["feedback_of"] == [
        ("s0", 1, LINUX, "solved", "carol", "2026-01-01T00:00:07.000000Z"),
        ("s1", 1, LINUX, "solved", "alice", "2026-01-01T00:00:01.000000Z"),
        ("s1", 1, LINUX, "failed", "bob", "2026-01-01T00:00:03.000000Z"),
        ("s1", 1, LINUX, "solved", None, "2026-01-01T00:00:06.000000Z"),
        ("s1", 1, MAC, "solved", "alice", "2026-01-01T00:00:02.000000Z"),
    ] and out["feedback_of_none"] == []
    assert out["synced"] == 1 and out["synced_none"] == 0
    assert [row["agent_id"] for row in out["after_sync"]] == ["dave"]


def without_ids(value: Any) -> Any:
    """Results with feedback ids left out: PostgreSQL's identity skips the number a refused or rolled
    back insert took, SQLite's rowid hands it out again."""
    if isinstance(value, dict):
        return {key: without_ids(item) for key, item in value.items() if key not in ("id", "ids")}
    if isinstance(value, list):
        return [without_ids(item) for item in value]
    return value


async def test_a_duplicate_report_is_a_duplicate_row_and_the_transaction_goes_on(both_stores, clock):
    async def steps(store, clock):
        async with store.write() as tx:
            await add_node(tx, "python/a", pk=1)
        out: dict[str, Any] = {"ids": []}
        async with store.write() as tx:
            out["ids"].append(await tx.insert_row("feedback", feedback("python/a", "alice", created=clock.at(1))))
            with pytest.raises(DuplicateRow):  # the same agent on the same answer revision and cluster
                await tx.insert_row("feedback", feedback("python/a", "alice", outcome="failed", created=clock.at(2)))
            # The transaction goes on after a refused row, as SQLite's does, and commits the rest.
            out["ids"].append(await tx.insert_row("feedback", feedback("python/a", "bob", created=clock.at(3))))
            out["ids"].append(await tx.insert_row("feedback", feedback("python/a", None, ip_hash="h2", created=clock.at(4))))
            with pytest.raises(DuplicateRow):  # one anonymous report per address
                await tx.insert_row("feedback", feedback("python/a", None, ip_hash="h2", created=clock.at(5)))
            await tx.set_meta("written", "yes")
            out["feedback_of"] = await tx.feedback_of("python/a")
        # A duplicate that leaves write() (as the service's 409 does) takes the whole transaction with it.
        with pytest.raises(DuplicateRow):
            async with store.write() as tx:
                await tx.insert_row("feedback", feedback("python/a", "carol", created=clock.at(6)))
                await tx.set_meta("written", "no")
                await tx.insert_row("feedback", feedback("python/a", "bob", created=clock.at(7)))
        out["meta"] = await store.get_meta("written")
        out["after"] = await store.feedback_after("python/a", 0, 100)
        async with store.write() as tx:  # the next write works as ever
            out["ids"].append(await tx.insert_row("feedback", feedback("python/a", "carol", created=clock.at(8))))
        out["last"] = await store.feedback_after("python/a", out["ids"][-2], 100)
        assert out["ids"] == sorted(out["ids"]) and len(set(out["ids"])) == 4
        assert [row["id"] for row in await store.feedback_after("python/a", 0, 100)] == out["ids"]
        return without_ids(out)

    out = await on_both(both_stores, clock, steps)
    assert out["meta"] == "yes"
    assert [(row["agent_id"], row["created_at"][-10:]) for row in out["after"]] == [
        ("alice", "01.000000Z"), ("bob", "03.000000Z"), (None, "04.000000Z")]
    assert [row["agent_id"] for row in out["last"]] == ["carol"]


async def test_stats_failures_and_write_limits(both_stores, clock):
    async def steps(store, clock):
        async with store.write() as tx:
            await add_node(tx, "python/a", pk=1)
            await add_node(tx, "python/b", pk=2)
        out: dict[str, Any] = {}
        rows = [stats("s1", 1, LINUX), stats("", 0, "", sample=3, last_verified=T0), stats("s1", 1, ""),
                stats("s1", 1, MAC, state="known_failed")]
        async with store.write() as tx:
            await tx.replace_stats("python/a", rows)
            await tx.replace_stats("python/b", rows[:1])
            await tx.replace_stats("python/b", [rows[1]])  # replaced, not added
            out["ids"] = [await tx.insert_row("failures", failure("python/a", agent)) for agent in ("alice", "bob", "carol")]
            out["open"] = await tx.open_failures("python/a")
            await tx.archive_failures(out["ids"][:2], "r-python/a")
            await tx.archive_failures([], "r-python/a")
            out["still_open"] = await tx.open_failures("python/a")
            out["writes"] = [await tx.count_write(subject, hour) for subject, hour in (
                ("agent:alice", "2026-01-01T10"), ("agent:alice", "2026-01-01T10"), ("ip:x", "2026-01-01T10"))]
        out["stats"] = await store.stats_of(["python/a", "python/b", "python/none"])
        out["no_stats"] = await store.stats_of([])
        out["nodes_with_stats"] = [(row.id, rows) for row, rows in await store.get_nodes_with_stats_by_pk([2, 99, 1])]
        out["no_nodes_with_stats"] = await store.get_nodes_with_stats_by_pk([])
        out["failures"] = await store.failures_of("python/a")
        async with store.write() as tx:
            out["next_hour"] = [await tx.count_write("agent:alice", "2026-01-01T11")]
        async with store.write() as tx:
            # a new hour forgot the older ones: alice's 10 o'clock count starts again
            out["next_hour"].append(await tx.count_write("agent:alice", "2026-01-01T10"))
        return out

    out = await on_both(both_stores, clock, steps)
    assert out["stats"]["python/b"] == [stats("", 0, "", sample=3, last_verified=T0)]
    assert len(out["stats"]["python/a"]) == 4 and "python/none" not in out["stats"]
    # What a search result is built from: the same rows as stats_of, in the asked order, in one read.
    assert out["nodes_with_stats"] == [("python/b", out["stats"]["python/b"]), ("python/a", out["stats"]["python/a"])]
    assert out["no_nodes_with_stats"] == []
    assert [f["archived"] for f in out["failures"]] == [True, True, False]
    assert out["still_open"] == [(out["ids"][2], {"os": "linux"})]
    assert out["writes"] == [1, 2, 1] and out["next_hour"] == [1, 1]


async def test_dedupe_tasks_and_votes(both_stores, clock):
    async def steps(store, clock):
        async with store.write() as tx:
            for pk, node_id in enumerate(("python/a", "python/b", "python/c"), 1):
                await add_node(tx, node_id, pk=pk)
        out: dict[str, Any] = {}
        async with store.write() as tx:
            first = await tx.insert_dedupe_task("python/a", "python/b", "same error", "alice")
            clock.at(1)
            second = await tx.insert_dedupe_task("python/c", "python/a", None, None)
            out["tasks"] = (first, second)
            out["for"] = [await tx.dedupe_task_for("python/b", "python/a"), await tx.dedupe_task_for("python/a", "python/c"),
                          await tx.dedupe_task_for("python/b", "python/c")]
            out["task"] = [await tx.dedupe_task(first), await tx.dedupe_task(99)]
            await tx.add_dedupe_vote(first, "bob", "token", "same", "python/a")
            clock.at(2)
            with pytest.raises(DuplicateRow):  # one vote per agent (so proven)
                await tx.add_dedupe_vote(first, "bob", "token", "different", None)
            await tx.add_dedupe_vote(first, "bob", "claimed", "different", None)  # another proof is another voter
            await tx.add_dedupe_vote(first, "alice", "token", "same", "python/a")
            out["votes"] = await tx.dedupe_votes(first)
            out["canonical_before"] = await tx.dedupe_canonical(first)
            await tx.set_dedupe_status(first, "flagged", "python/a")
            out["canonical"] = [await tx.dedupe_canonical(first), await tx.dedupe_canonical(99)]
        out["all"] = await store.dedupe_tasks(None, 10)
        out["flagged"] = await store.dedupe_tasks("flagged", 10)
        out["open"] = await store.dedupe_tasks("open", 10)
        out["limited"] = await store.dedupe_tasks(None, 1)
        return out

    out = await on_both(both_stores, clock, steps)
    first, second = out["tasks"]
    assert out["for"] == [first, second, None] and out["task"] == [("python/a", "python/b", "open"), None]
    assert out["votes"] == [("bob", "same", "python/a", "token"), ("alice", "same", "python/a", "token"),
                            ("bob", "different", None, "claimed")]
    assert out["canonical_before"] is None and out["canonical"] == ["python/a", None]
    assert out["flagged"][0]["votes"] == {"same": 2, "different": 1}
    assert [t["task_id"] for t in out["open"]] == [second] and len(out["limited"]) == 1


async def test_a_second_dedupe_task_of_a_pair_is_a_duplicate_row_on_postgres(both_stores, clock):
    store = both_stores["postgres"]
    async with store.write() as tx:
        await add_node(tx, "python/a", pk=1)
        await add_node(tx, "python/b", pk=2)
        task = await tx.insert_dedupe_task("python/a", "python/b", None, None)
        with pytest.raises(DuplicateRow):
            await tx.insert_dedupe_task("python/a", "python/b", None, None)
        assert await tx.dedupe_task(task) == ("python/a", "python/b", "open")
    assert [t["task_id"] for t in await store.dedupe_tasks(None, 10)] == [task]


async def test_service_issues(both_stores, clock):
    async def steps(store, clock):
        out: dict[str, Any] = {}
        async with store.write() as tx:
            out["numbers"] = [await tx.insert_row("service_issues", {
                "title": f"issue {i}", "body": "body", "details": json.dumps({"endpoint": "/v1/x", "labels": ["bug"]}),
                "agent_id": "alice" if i else None, "model": None, "proof": "token", "ip_hash": None, "status": "open",
                "created_at": clock.at(i)}) for i in range(3)]
            out["status"] = [await tx.issue_status(out["numbers"][0]), await tx.issue_status(99)]
            await tx.resolve_issue(out["numbers"][1], "closed", {"note": "fixed", "maintainer": "m", "at": T0})
            out["resolved"] = await tx.issue_status(out["numbers"][1])
        out["all"] = await store.service_issues()
        out["one"] = await store.service_issues(out["numbers"][1], 1)
        out["missing"] = await store.service_issues(99)
        out["limited"] = await store.service_issues(None, 2)
        return out

    out = await on_both(both_stores, clock, steps)
    assert out["numbers"] == [1, 2, 3] and out["status"] == ["open", None] and out["resolved"] == "closed"
    assert [issue["number"] for issue in out["all"]] == [3, 2, 1] and out["missing"] == []
    assert out["one"][0]["resolution"] == {"note": "fixed", "maintainer": "m", "at": T0}
    assert "resolution" not in out["all"][0] and out["all"][0]["labels"] == ["bug"]


async def test_tokens_and_meta(both_stores, clock):
    async def steps(store, clock):
        out: dict[str, Any] = {}
        async with store.write() as tx:
            await tx.add_token("h-alice", "alice", "agent")
            await tx.add_token("h-bob", "bob", "maintainer")
            clock.at(1)
            await tx.add_token("h-alice-2", "alice", "agent")
            await tx.set_meta("k", "one")
            await tx.set_meta("k", "two")
            await tx.set_meta("gone", "x")
            await tx.delete_meta("gone")
            await tx.delete_meta("never")
        out["token"] = [await store.token("h-alice"), await store.token("nope")]
        async with store.write() as tx:
            await tx.touch_token("h-alice", clock.at(5))
        out["touched"] = await store.token("h-alice")
        async with store.write() as tx:
            out["revoked"] = [await tx.revoke_tokens("alice"), await tx.revoke_tokens("alice"), await tx.revoke_tokens("x")]
        out["after_revoke"] = [await store.token("h-alice"), await store.token("h-bob")]
        first, second = "c0ffee01" + "a" * 56, "c0ffee02" + "b" * 56
        async with store.write() as tx:
            await tx.add_token(first, "carol", "agent")
            await tx.add_token(second, "carol", "agent")
            out["revoked_one"] = [await tx.revoke_tokens("carol", "c0ffee01"), await tx.revoke_tokens("carol", "c0ffee01"),
                                  await tx.revoke_tokens("alice", "c0ffee02")]
        out["carol"] = [await store.token(first), await store.token(second)]
        out["tokens"] = await store.tokens()
        out["meta"] = [await store.get_meta("k"), await store.get_meta("gone"), await store.get_meta("never")]
        return out

    out = await on_both(both_stores, clock, steps)
    assert out["token"] == [("alice", "agent", None), None]
    assert out["touched"][2] == "2026-01-01T00:00:05.000000Z"
    assert out["revoked"] == [2, 0, 0] and out["after_revoke"] == [None, ("bob", "maintainer", None)]
    assert out["revoked_one"] == [1, 0, 0] and out["carol"] == [None, ("carol", "agent", None)]
    assert [(t["id"], t["agent_id"], t["revoked_at"] is not None) for t in out["tokens"]] == [
        ("h-alice", "alice", True), ("h-bob", "bob", False), ("h-alice-", "alice", True),
        ("c0ffee01", "carol", True), ("c0ffee02", "carol", False)]
    assert out["meta"] == ["two", None, None]


async def test_maintainer_actions(both_stores, clock):
    async def steps(store, clock):
        async with store.write() as tx:
            ids = [await tx.insert_maintainer_action("set_status", "python/a", {"from": "draft", "to": "verified"},
                                                     "checked", "mia", "token"),
                   await tx.insert_maintainer_action("close_issue", "7", {}, None, "mia", "local"),
                   await tx.insert_maintainer_action("set_status", "python/a", {"to": "deprecated", "from": "verified"},
                                                     None, "max", "token")]
        return {"ids": ids, "all": await store.maintainer_actions(None, 0, 10),
                "of_node": await store.maintainer_actions("python/a", 0, 10),
                "after": await store.maintainer_actions(None, ids[0], 1),
                "none": await store.maintainer_actions("python/z", 0, 10)}

    out = await on_both(both_stores, clock, steps)
    assert out["ids"] == [1, 2, 3] and [a["id"] for a in out["of_node"]] == [1, 3]
    assert [a["id"] for a in out["after"]] == [2] and out["none"] == []
    assert out["all"][0]["maintainer"] == {"id": "mia", "proven": True} and out["all"][0]["to"] == "verified"


async def test_the_audit_log_refuses_updates_on_postgres(both_stores, clock):
    import psycopg

    store = both_stores["postgres"]
    async with store.write() as tx:
        action = await tx.insert_maintainer_action("close_issue", "1", {}, None, "mia", "token")
    with pytest.raises(psycopg.errors.RestrictViolation):
        async with store.write() as tx:
            await tx.connection.execute("UPDATE maintainer_actions SET note = 'changed' WHERE id = %s", (action,))
    with pytest.raises(psycopg.errors.RestrictViolation):
        async with store.write() as tx:
            await tx.connection.execute("DELETE FROM maintainer_actions WHERE id = %s", (action,))
    assert [a["note"] for a in await store.maintainer_actions(None, 0, 10)] == [None]


async def test_review_queries(both_stores, clock):
    async def steps(store, clock):
        async with store.write() as tx:
            # a: answered (s1 revision 2 is current); b and e: unsolved; c: deprecated; d: answered long ago.
            await add_node(tx, "python/a", pk=1, solutions={"s1": 2}, created=T0, updated="2026-01-01T00:00:10.000000Z")
            await add_node(tx, "python/b", pk=2, has_answer=False, created="2026-01-01T00:00:03.000000Z")
            await add_node(tx, "python/c", pk=3, has_answer=False, status="deprecated")
            await add_node(tx, "python/d", pk=4, solutions={"s1": 1}, created=T0)
            await add_node(tx, "python/e", pk=5, has_answer=False, created="2026-01-01T00:00:01.000000Z")
            await tx.replace_stats("python/a", [
                stats("", 0, "", sample=4),  # never verified
                stats("s1", 2, LINUX, state="known_failed", sample=3),
                stats("s1", 2, MAC, state="known_failed", sample=5),
                stats("s1", 1, LINUX, state="known_failed", sample=9),  # an old revision: not the current answer
                stats("s1", 2, "", solved_agents=1, sample=2),
            ])
            await tx.replace_stats("python/d", [
                stats("", 0, "", sample=1, last_verified="2025-06-01T00:00:00.000000Z"),
                stats("s1", 1, LINUX, state="suspect", sample=1),
                stats("s1", 1, "", solved_agents=1, sample=1),
            ])
            await tx.replace_stats("python/c", [stats("s1", 1, LINUX, state="known_failed", sample=7)])
            for agent, outcome, cluster, second in (("u1", "failed", LINUX, 11), ("u2", "dangerous", LINUX, 12),
                                                    ("u3", "failed", MAC, 13), ("u4", "solved", LINUX, 14),
                                                    ("u5", "failed", LINUX, 5)):  # before the edit: acted on
                await tx.insert_row("feedback", feedback("python/a", agent, outcome=outcome, revision=2, cluster=cluster,
                                                         created=f"2026-01-01T00:00:{second:02d}.000000Z"))
            await tx.insert_row("feedback", feedback("python/c", "u1", outcome="failed", created="2026-01-01T00:00:30.000000Z"))
            await tx.insert_row("feedback", feedback("python/d", "u1", outcome="failed", created="2026-01-01T00:00:30.000000Z"))
        return {
            "known_failed": await store.answers_in_state("known_failed", 10),
            "known_failed_1": await store.answers_in_state("known_failed", 1),
            "suspect": await store.answers_in_state("suspect", 10),
            "unsolved": await store.unsolved_nodes(10),
            "failures_after_edit": await store.failures_after_edit(10),
            "stale": await store.stale_nodes("2026-01-01T00:00:00.000000Z", 10),
            "stale_1": await store.stale_nodes("2026-01-01T00:00:00.000000Z", 1),
            "stale_early": await store.stale_nodes("2025-01-01T00:00:00.000000Z", 10),
            "awaiting": await store.awaiting_second_verification("2026-01-01T00:00:20.000000Z", 10),
            "awaiting_early": await store.awaiting_second_verification("2026-01-01T00:00:05.000000Z", 10),
        }

    out = await on_both(both_stores, clock, steps)
    assert [tuple(row) for row in out["known_failed"]] == [
        ("python/a", "title of python/a", 1, "s1", 2, MAC, 5), ("python/a", "title of python/a", 1, "s1", 2, LINUX, 3)]
    assert [row[0] for row in out["known_failed_1"]] == ["python/a"]
    assert [row[0] for row in out["suspect"]] == ["python/d"]
    assert [tuple(row) for row in out["unsolved"]] == [("python/e", "title of python/e", 1, None, None, None, 0),
                                                       ("python/b", "title of python/b", 1, None, None, None, 0)]
    assert [tuple(row[3:]) for row in out["failures_after_edit"]] == [("s1", 2, LINUX, 2), ("s1", 2, MAC, 1),
                                                                     ("s1", 1, LINUX, 1)]
    assert [row[0] for row in out["failures_after_edit"]] == ["python/a", "python/a", "python/d"]
    assert [(row[0], row[6]) for row in out["stale"]] == [("python/a", 4), ("python/d", 1)]
    assert [row[0] for row in out["stale_1"]] == ["python/a"]
    assert [row[0] for row in out["stale_early"]] == ["python/a"]
    assert [tuple(row) for row in out["awaiting"]] == [("python/a", "title of python/a", 1, "s1", 2, None, 2),
                                                       ("python/d", "title of python/d", 1, "s1", 1, None, 1)]
    assert [row[0] for row in out["awaiting_early"]] == ["python/d"]


async def test_health_facts(both_stores, clock):
    async def steps(store, clock):
        async with store.write() as tx:
            await add_node(tx, "python/a", pk=1)
            await add_node(tx, "python/b", pk=2)
            await raw(tx, "INSERT INTO node_index (node_pk, templates, title_terms) VALUES (1, 't', 't')")
            await tx.add_token("h1", "alice", "agent")
            await tx.add_token("h2", "bob", "agent")
            await tx.add_token("h3", "mia", "maintainer")
            await tx.revoke_tokens("bob")
            await tx.set_meta("normalizer_version", "3")
            await tx.set_meta("search_index_version", "5")  # SQLite's migrations seed '0', PostgreSQL's none
            await raw(tx, "INSERT INTO sync_state (remote, cursor, synced_at) VALUES ('https://b', 'c', ?)", (T0,))
            await raw(tx, "INSERT INTO sync_state (remote, cursor, synced_at) VALUES ('https://a', 'c', ?)", (T0,))
        facts = await store.health_facts()
        return {**facts, "schema_version": None, "latest_schema_version": None, "backend": None}  # each backend's own

    facts = await on_both(both_stores, clock, steps)
    assert facts == {"schema_version": None, "latest_schema_version": None, "backend": None, "nodes": 2, "indexed_nodes": 1, "tokens": {"agent": 1, "maintainer": 1},
                     "syncs": [{"remote": "https://a", "synced_at": T0}, {"remote": "https://b", "synced_at": T0}],
                     "integrity": "ok", "normalizer_version": "3", "search_index_version": "5"}
    schema = {}
    for name, store in both_stores.items():
        own = await store.health_facts()
        schema[name] = (own["backend"], own["schema_version"], own["latest_schema_version"])
    assert schema == {"sqlite": ("sqlite", *[max(n for n, _, _ in sqlite_schema.migrations())] * 2),
                      "postgres": ("postgresql", *[max(n for n, _, _ in pg_schema.migrations())] * 2)}


async def test_health_reports_a_node_without_its_current_version_on_postgres(both_stores, clock):
    store = both_stores["postgres"]
    async with store.write() as tx:
        await add_node(tx, "python/a", pk=1)
        await raw(tx, "UPDATE nodes SET current_version = 'missing' WHERE id = 'python/a'")
    assert (await store.health_facts())["integrity"] == "1 node(s) without their current version"
