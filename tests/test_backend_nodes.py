"""Nodes, revisions, the change feed, sync bookkeeping and redirects on both backends: each test does
the same writes to a SQLite and a PostgreSQL store and asserts they answer exactly alike.

Inputs are built as the service builds them (`publishing.prepare(...).new_node(...)`, an `Edit` as
`editing._publish` makes one), once, and given to both backends, so random revision ids match. The
clock is one fixed value per step on both sides, so timestamps compare too. Evidence rows a read
reports (node_stats, feedback, failures, maintainer actions) are inserted with plain SQL: their
writers belong to another part of the store.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from knowmesh_mcp.services import publishing
from knowmesh_mcp.core.articles import field_changes
from knowmesh_mcp.services.editing import token_hash
from knowmesh_mcp.search.query import index_row
from knowmesh_mcp.store import Edit, NewNode, RevisionRow, SyncedHead, SyncedRevision
from knowmesh_mcp.store.postgres import PostgresWriter
from knowmesh_mcp.store.postgres import nodes as pg_nodes
from knowmesh_mcp.store.postgres import sync as pg_sync
from knowmesh_mcp.store.sqlite import connection as sqlite_connection
from knowmesh_mcp.store.sqlite import evidence as sqlite_evidence
from knowmesh_mcp.store.sqlite import nodes as sqlite_nodes
from knowmesh_mcp.store.sqlite import sync as sqlite_sync

pytestmark = pytest.mark.anyio

AGENT = {"id": "agent-a", "model": "model-1"}


@pytest.fixture
def clock(monkeypatch) -> list[str]:
    """The time every write reads, the same on both backends; a test moves it with `tick`."""
    now = ["2026-01-01T00:00:00.000000Z"]
    for module in (sqlite_connection, sqlite_nodes, sqlite_sync, sqlite_evidence, pg_nodes, pg_sync):
        monkeypatch.setattr(module, "utc_now", lambda: now[0])
    return now


def tick(clock: list[str], second: int) -> None:
    clock[0] = f"2026-01-01T00:00:{second:02d}.000000Z"


@pytest.fixture
def stores(both_stores, clock, monkeypatch) -> dict[str, Any]:
    # The search index's writer (pg_search) may not exist yet: node writes call it, these tests read no index.
    if not hasattr(PostgresWriter, "write_search_rows"):
        async def no_index(self, rows, *, fresh=False):
            return None
        monkeypatch.setattr(PostgresWriter, "write_search_rows", no_index, raising=False)
    return both_stores


async def write(stores: dict[str, Any], step: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
    """Run `step(tx)` in one write transaction on each backend; {backend: what it returned}."""
    results = {}
    for name, store in stores.items():
        async with store.write() as tx:
            results[name] = await step(tx)
    return results


async def read(stores: dict[str, Any], step: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
    return {name: await step(store) for name, store in stores.items()}


async def same(stores: dict[str, Any], step: Callable[[Any], Awaitable[Any]], *, writing: bool = False) -> Any:
    """What `step` answers, asserted equal on both backends."""
    results = await (write if writing else read)(stores, step)
    assert results["sqlite"] == results["postgres"]
    return results["sqlite"]


async def sql(tx: Any, statement: str, params: tuple[Any, ...] = ()) -> None:
    """One statement written with `?` marks, on either backend's transaction."""
    if isinstance(tx, PostgresWriter):
        await tx.connection.execute(statement.replace("?", "%s"), params)
    else:
        await tx.connection.execute(statement, params)


def new_node(document: dict[str, Any]) -> NewNode:
    return publishing.prepare(document).new_node(kind="create", agent=AGENT, summary="Created")


async def make_edit(tx: Any, node_id: str, edited: dict[str, Any], *, kind: str = "edit") -> Edit:
    """The `Edit` `editing._publish` would build for `edited`, read against `tx`'s current state."""
    current_revision, current, status = await tx.node_for_edit(node_id)
    prepared = publishing.prepare({**edited, "status": status})
    known = await tx.solution_behaviours(node_id)
    revisions: dict[str, int] = {}
    new_rows: list[tuple[str, int, str]] = []
    for solution in prepared.body["content"]["solutions"]:
        digest = publishing.behavior_hash(solution)
        seen = known.get(solution["id"], {})
        if digest in seen:
            revisions[solution["id"]] = seen[digest]
        else:
            revisions[solution["id"]] = max(seen.values(), default=0) + 1
            new_rows.append((solution["id"], revisions[solution["id"]], digest))
    return Edit(
        node_id=node_id, title=prepared.document.title, version=prepared.version, document_json=prepared.body_json,
        solution_revisions=revisions, new_solution_revisions=new_rows,
        has_answer=bool(prepared.body["content"]["solutions"]), signature_hash=prepared.signature_hash,
        quoted_values=prepared.quoted_values, index=index_row(prepared.body),
        revision_id="rev_" + secrets.token_hex(12), revision=current_revision + 1, kind=kind,
        agent_id=AGENT["id"], model=AGENT["model"], summary=f"Edit to revision {current_revision + 1}",
        changes_json=json.dumps(field_changes(current, prepared.body), ensure_ascii=False),
        undo_token_hash=token_hash(secrets.token_urlsafe(24)), agent_proof="claimed",
    )


async def apply_same_edit(stores: dict[str, Any], node_id: str, edited: dict[str, Any]) -> Edit:
    """Build the edit once (against SQLite) and apply that same edit to both backends."""
    async with stores["sqlite"].write() as tx:
        edit = await make_edit(tx, node_id, edited)
        now = await tx.apply_edit(edit)
    async with stores["postgres"].write() as tx:
        mirrored = await make_edit(tx, node_id, edited)  # what PostgreSQL's own state would make of it
        assert (mirrored.revision, mirrored.solution_revisions, mirrored.new_solution_revisions, mirrored.changes_json) == (
            edit.revision, edit.solution_revisions, edit.new_solution_revisions, edit.changes_json)
        assert await tx.apply_edit(edit) == now
    return edit


def edited(document: dict[str, Any], **content: Any) -> dict[str, Any]:
    return {**document, "content": {**document["content"], **content}}


def three_documents(make_doc) -> list[dict[str, Any]]:
    return [
        make_doc(),
        make_doc(id="python/no-module-named-yaml", title="No module named yaml after pip install pyyaml",
                 error="ModuleNotFoundError: No module named 'yaml'"),
        make_doc(id="node/cannot-find-module", ecosystem="node", title="Cannot find module after npm install",
                 error="Error: Cannot find module 'express'",
                 content={**make_doc()["content"], "solutions": []}),
    ]


async def all_reads(stores: dict[str, Any], node_id: str) -> None:
    """Every node read, asserted equal on both backends."""
    node = await same(stores, lambda s: s.get_node(node_id))
    assert node is not None
    await same(stores, lambda s: s.get_node_for_read(node_id))
    await same(stores, lambda s: s.get_nodes_by_pk([node.pk, 999, node.pk]))
    assert await same(stores, lambda s: s.get_nodes_with_stats_by_pk([node.pk, 999])) == [(node, [])]
    assert list(await same(stores, lambda s: s.get_nodes([node_id, "python/absent", node_id]))) == [node_id]
    await same(stores, lambda s: s.get_version(node_id, node.version))
    await same(stores, lambda s: s.revision_of_version(node_id, node.version))
    await same(stores, lambda s: s.revisions(node_id))
    await same(stores, lambda s: s.revisions_with_documents(node_id))
    await same(stores, lambda s: s.revisions_with_documents(node_id, 1))
    await same(stores, lambda s: s.document_at(node_id, node.revision))
    await same(stores, lambda s: s.redirect(node_id))


async def test_insert_then_every_read(stores, make_doc, clock):
    documents = three_documents(make_doc)
    nodes = [new_node(document) for document in documents]
    await same(stores, lambda tx: tx.insert_nodes(nodes), writing=True)
    await same(stores, lambda tx: tx.insert_nodes([]), writing=True)
    for n in nodes:
        await all_reads(stores, n.id)
    first = await same(stores, lambda s: s.get_node(nodes[0].id))
    assert first.revision == 1 and first.version == nodes[0].version and first.document == json.loads(nodes[0].document_json)
    assert first.created_at == clock[0] and first.has_answer is True
    assert await same(stores, lambda s: s.get_node("python/absent")) is None
    assert await same(stores, lambda s: s.get_node_for_read("python/absent")) is None
    assert await same(stores, lambda s: s.get_nodes_by_pk([])) == []
    assert await same(stores, lambda s: s.get_nodes_with_stats_by_pk([])) == []
    assert await same(stores, lambda s: s.get_nodes([])) == {}
    assert await same(stores, lambda s: s.get_version(nodes[0].id, "sha256:none")) is None
    assert await same(stores, lambda s: s.document_at(nodes[0].id, 2)) is None
    assert await same(stores, lambda s: s.count_nodes()) == 3
    assert [n.id for n in await same(stores, lambda s: s.list_nodes(ecosystem=None, after_id=None, limit=10))] == [
        "node/cannot-find-module", "python/module-not-found-venv", "python/no-module-named-yaml"]
    await same(stores, lambda s: s.list_nodes(ecosystem="python", after_id=None, limit=10))
    await same(stores, lambda s: s.list_nodes(ecosystem=None, after_id="node/cannot-find-module", limit=1))
    await same(stores, lambda s: s.list_nodes(ecosystem="rust", after_id=None, limit=10))
    assert await same(stores, lambda s: s.ecosystem_counts()) == [("node", 1, 1), ("python", 2, 0)]

    async def documents_of(store):
        return [item async for item in store.iter_current_documents(batch=2)]
    assert len(await same(stores, documents_of)) == 3

    # The writer's reads inside a transaction.
    assert (await same(stores, lambda tx: tx.node_for_edit(nodes[0].id), writing=True))[0] == 1
    assert await same(stores, lambda tx: tx.node_for_edit("python/absent"), writing=True) is None
    assert await same(stores, lambda tx: tx.current_revision(nodes[1].id), writing=True) == 1
    assert await same(stores, lambda tx: tx.current_revision("python/absent"), writing=True) == 0
    assert await same(stores, lambda tx: tx.versions_of([n.id for n in nodes] + ["python/absent"]), writing=True) == {
        n.id: n.version for n in nodes}
    assert await same(stores, lambda tx: tx.versions_of([]), writing=True) == {}
    assert await same(stores, lambda tx: tx.solution_behaviours(nodes[0].id), writing=True) == {
        sid: {digest: 1} for sid, digest in nodes[0].solution_hashes.items()}
    revision = await same(stores, lambda tx: tx.revision(nodes[0].revision_id), writing=True)
    assert revision.revision == 1 and revision.parent_revision is None and revision.kind == "create"
    assert await same(stores, lambda tx: tx.revision("rev_absent"), writing=True) is None
    await same(stores, lambda tx: tx.revisions_after(nodes[0].id, 0), writing=True)
    await same(stores, lambda tx: tx.revisions_with_documents(nodes[0].id), writing=True)
    assert await same(stores, lambda tx: tx._pks([nodes[2].id, "python/absent"]), writing=True) == {nodes[2].id: 3}


async def test_evidence_a_node_read_reports(stores, make_doc, clock):
    node = new_node(make_doc())
    await same(stores, lambda tx: tx.insert_nodes([node]), writing=True)

    async def evidence(tx):
        stats = """INSERT INTO node_stats (node_id, solution_id, solution_revision, cluster, solved, failed, sample_size,
                       success_score, failure_state, answer_state, solved_agents, failed_agents, last_verified, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
        for row in (("venv-macos", 1, "macos|3|pip", 2.0, 0.0, 2, 0.75, "ok", "verified", 2, 0, clock[0]),
                    ("", 0, "", 2.0, 1.0, 3, 0.5, "ok", "candidate", 2, 1, clock[0]),
                    ("venv-linux", 1, "linux|3|pip", 0.0, 1.0, 1, 0.25, "known_failed", "draft", 0, 1, None),
                    ("venv-linux", 1, "", 0.0, 1.0, 1, 0.25, "known_failed", "draft", 0, 1, None)):
            await sql(tx, stats, (node.id, *row, clock[0]))
        for outcome in ("solved", "failed"):
            await sql(tx, """INSERT INTO feedback (node_id, node_version, solution_id, solution_revision, outcome, cluster,
                                 environment, agent_id, created_at) VALUES (?, ?, 'venv-macos', 1, ?, 'macos|3|pip', '{}', ?, ?)""",
                      (node.id, node.version, outcome, f"agent-{outcome}", clock[0]))
        await sql(tx, """INSERT INTO failures (node_id, environment, cluster, summary, steps, reason, created_at)
                         VALUES (?, '{}', 'linux|3|pip', 'tried', '[]', 'no luck', ?)""", (node.id, clock[0]))
    await write(stores, evidence)
    found = await read(stores, lambda s: s.get_node_for_read(node.id))
    assert found["sqlite"] == found["postgres"]
    assert len(found["postgres"][1]) == 4 and found["postgres"][2] == 1
    for backend in found.values():  # the same types too, not just equal numbers
        assert [tuple(type(value) for value in vars(row).values()) for row in backend[1]] == [
            tuple(type(value) for value in vars(row).values()) for row in found["sqlite"][1]]
    (change,) = await same(stores, lambda s: s.changes_after(0, 10))
    assert [row[0] for row in json.loads(change.stats_json)] == ["venv-linux", "venv-macos"]  # node-wide rows left out
    assert change.evidence_seq == 2


async def test_edit_then_revisions(stores, make_doc, clock):
    document = make_doc()
    node = new_node(document)
    await same(stores, lambda tx: tx.insert_nodes([node]), writing=True)
    tick(clock, 1)
    first_edit = await apply_same_edit(stores, node.id, edited(document, symptom="Import fails in the venv."))
    tick(clock, 2)
    solutions = [dict(document["content"]["solutions"][0], fix=["python3 -m venv .venv", ".venv/bin/pip install requests"]),
                 document["content"]["solutions"][1]]
    second_edit = await apply_same_edit(stores, node.id, edited(document, symptom="Import fails in the venv.",
                                                                solutions=solutions))
    assert second_edit.new_solution_revisions == [("venv-macos", 2, publishing.behavior_hash(solutions[0]))]
    await all_reads(stores, node.id)
    rows = await same(stores, lambda s: s.revisions(node.id))
    assert [(r.revision, r.parent_revision, r.kind) for r in rows] == [(1, None, "create"), (2, 1, "edit"), (3, 2, "edit")]
    assert rows[1].created_at == "2026-01-01T00:00:01.000000Z"
    current = await same(stores, lambda s: s.get_node(node.id))
    assert (current.revision, current.version, current.updated_at) == (3, second_edit.version, clock[0])
    assert current.solution_revisions == {"venv-macos": 2, "venv-linux": 1}
    assert await same(stores, lambda tx: tx.current_revision(node.id), writing=True) == 3
    after = await same(stores, lambda tx: tx.revisions_after(node.id, 1), writing=True)
    assert [r.revision_id for r in after] == [first_edit.revision_id, second_edit.revision_id]
    assert await same(stores, lambda s: s.document_at(node.id, 2)) == json.loads(first_edit.document_json)
    assert await same(stores, lambda s: s.document_at(node.id, 1)) == json.loads(node.document_json)
    assert await same(stores, lambda s: s.revision_of_version(node.id, node.version)) == 1
    assert await same(stores, lambda s: s.get_version(node.id, first_edit.version)) == (
        json.loads(first_edit.document_json), first_edit.solution_revisions, "2026-01-01T00:00:01.000000Z")
    behaviours = await same(stores, lambda tx: tx.solution_behaviours(node.id), writing=True)
    assert sorted(behaviours["venv-macos"].values()) == [1, 2]

    # Reverting to the first document publishes its version again (INSERT ... ON CONFLICT DO NOTHING).
    tick(clock, 3)
    reverted = await apply_same_edit(stores, node.id, document)
    assert reverted.version == node.version and reverted.new_solution_revisions == []
    assert await same(stores, lambda s: s.revision_of_version(node.id, node.version)) == 4
    await all_reads(stores, node.id)

    # Undo tokens: one spend wins.
    token = await same(stores, lambda tx: tx.undo_token(first_edit.revision_id), writing=True)
    assert token == (first_edit.undo_token_hash, None)
    assert await same(stores, lambda tx: tx.undo_token(node.revision_id), writing=True) is None
    tick(clock, 4)
    assert await same(stores, lambda tx: tx.spend_undo_token(first_edit.revision_id), writing=True) is True
    assert await same(stores, lambda tx: tx.spend_undo_token(first_edit.revision_id), writing=True) is False
    assert await same(stores, lambda tx: tx.undo_token(first_edit.revision_id), writing=True) == (
        first_edit.undo_token_hash, clock[0])


async def test_change_feed_order(stores, make_doc, clock):
    nodes = [new_node(document) for document in three_documents(make_doc)]
    await same(stores, lambda tx: tx.insert_nodes(nodes[:2]), writing=True)
    await same(stores, lambda tx: tx.insert_nodes(nodes[2:]), writing=True)
    feed = await same(stores, lambda s: s.changes_after(0, 10))
    assert [(row.change_seq, row.id) for row in feed] == [(1, nodes[0].id), (2, nodes[1].id), (3, nodes[2].id)]
    assert feed[0].stats_json == "[]" and feed[0].evidence_seq == 0
    tick(clock, 1)
    await same(stores, lambda tx: tx.touch_node(nodes[0].id), writing=True)
    await same(stores, lambda tx: tx.touch_node("python/absent"), writing=True)  # moves nothing
    tick(clock, 2)
    await apply_same_edit(stores, nodes[1].id, edited(make_doc(**{"id": nodes[1].id}), symptom="It fails."))
    await same(stores, lambda tx: tx.set_node_status(nodes[2].id, "verified"), writing=True)
    await same(stores, lambda tx: tx.set_node_status("python/absent", "verified"), writing=True)
    feed = await same(stores, lambda s: s.changes_after(0, 10))
    assert [(row.change_seq, row.id, row.status, row.revision) for row in feed] == [
        (4, nodes[0].id, "draft", 1), (5, nodes[1].id, "draft", 2), (6, nodes[2].id, "verified", 1)]
    assert await same(stores, lambda s: s.changes_after(4, 1)) == [feed[1]]
    assert await same(stores, lambda s: s.changes_after(6, 10)) == []
    assert [await same(stores, lambda s, seq=seq: s.count_changes_after(seq)) for seq in (0, 3, 4, 6)] == [3, 3, 2, 0]
    touched = await same(stores, lambda s: s.get_node(nodes[0].id))
    assert touched.updated_at == "2026-01-01T00:00:00.000000Z"  # a touch leaves the content (and its time) alone


async def test_status_change_and_redirects(stores, make_doc, clock):
    nodes = [new_node(document) for document in three_documents(make_doc)]
    await same(stores, lambda tx: tx.insert_nodes(nodes), writing=True)

    async def merge(tx, node_id, canonical_id):
        await sql(tx, """INSERT INTO maintainer_actions (action, target, detail, maintainer_id, proof, created_at)
                         VALUES ('merge', ?, '{}', 'maintainer', 'local', ?)""", (node_id, clock[0]))
        (action_id,), = await tx._all("SELECT max(id) FROM maintainer_actions")
        await tx.set_node_status(node_id, "deprecated")
        await tx.insert_redirect(node_id, canonical_id, int(action_id))

    a, b, c = (n.id for n in nodes)
    await write(stores, lambda tx: merge(tx, a, b))
    assert await same(stores, lambda s: s.redirect(a)) == b
    assert await same(stores, lambda s: s.redirect(b)) is None
    await write(stores, lambda tx: merge(tx, b, c))  # what followed b follows it to c
    assert await same(stores, lambda s: s.redirect(a)) == c
    assert await same(stores, lambda tx: tx.redirect(b), writing=True) == c
    assert await same(stores, lambda tx: tx.redirect(c), writing=True) is None
    assert (await same(stores, lambda s: s.get_node(a))).status == "deprecated"
    assert [n.id for n in await same(stores, lambda s: s.list_nodes(ecosystem=None, after_id=None, limit=10))] == [c]
    assert await same(stores, lambda s: s.ecosystem_counts()) == [("node", 1, 1)]
    assert await same(stores, lambda s: s.count_nodes()) == 3
    feed = await same(stores, lambda s: s.changes_after(3, 10))
    assert [(row.id, row.status, row.merged, row.canonical) for row in feed] == [(a, "deprecated", [], c), (b, "deprecated", [], c)]
    await same(stores, lambda tx: tx.touch_node(c), writing=True)
    (canonical,) = await same(stores, lambda s: s.changes_after(5, 10))
    assert (canonical.id, canonical.merged, canonical.canonical) == (c, [a, b], None)  # what a sync must redirect


async def test_sync_bookkeeping(stores, make_doc, clock):
    nodes = [new_node(document) for document in three_documents(make_doc)]
    await same(stores, lambda tx: tx.insert_nodes(nodes), writing=True)
    remote = "https://mesh.example"
    ids = [n.id for n in nodes]
    assert await same(stores, lambda s: s.synced_states(remote, ids)) == {}
    assert await same(stores, lambda s: s.sync_cursor(remote)) is None

    async def bookkeeping(tx):
        await tx.set_synced(remote, ids[0], 1)
        await tx.set_synced(remote, ids[1], 0)
        await tx.set_synced(remote, ids[1], 1)  # an upsert
        await tx.set_synced("https://other.example", ids[2], 1)
        await tx.set_evidence_synced(remote, ids[0], 42)
        await tx.set_evidence_synced(remote, ids[2], 7)  # not synced with this remote: nothing
        await tx.set_sync_cursor(remote, "cursor-1")
    await write(stores, bookkeeping)
    assert await same(stores, lambda s: s.synced_states(remote, ids)) == {ids[0]: (1, 42), ids[1]: (1, 0)}
    assert await same(stores, lambda s: s.synced_states(remote, [])) == {}
    assert await same(stores, lambda s: s.sync_cursor(remote)) == "cursor-1"
    tick(clock, 5)
    await same(stores, lambda tx: tx.set_sync_cursor(remote, "cursor-2"), writing=True)
    assert await same(stores, lambda s: s.sync_cursor(remote)) == "cursor-2"
    assert await same(stores, lambda s: s.sync_cursor("https://other.example")) is None


def synced_revision(document: dict[str, Any], *, node_id: str, revision: int, revision_id: str, at: str,
                    solution_revisions: dict[str, int] | None = None) -> SyncedRevision:
    prepared = publishing.prepare(document)
    solutions = prepared.body["content"]["solutions"]
    row = RevisionRow(revision_id, node_id, revision, revision - 1 or None, "create" if revision == 1 else "edit",
                      prepared.version, "agent-remote", None, f"Remote revision {revision}",
                      [{"op": "replace", "path": "/content/symptom", "value": None}], None, at, "token")
    numbers = solution_revisions or {s["id"]: 1 for s in solutions}
    return SyncedRevision(row, prepared.body_json, numbers, {s["id"]: publishing.behavior_hash(s) for s in solutions})


def synced_head(document: dict[str, Any]) -> SyncedHead:
    prepared = publishing.prepare(document)
    return SyncedHead(prepared.document.id, prepared.document.ecosystem, prepared.document.status,
                      prepared.document.title, bool(prepared.body["content"]["solutions"]), prepared.signature_hash,
                      prepared.quoted_values)


async def apply_synced(tx: Any, document: dict[str, Any], revisions: list[SyncedRevision], *, fresh: bool) -> None:
    """What a sync writes for a node: its revisions, then its index rows."""
    await tx.apply_synced(synced_head(document), revisions, fresh=fresh)
    await tx.write_search_rows([(document["id"], index_row(publishing.prepare(document).body))], fresh=fresh)


async def test_apply_synced_fresh_and_over_local(stores, make_doc, clock):
    document = make_doc()
    node_id = document["id"]
    remote_first = synced_revision(document, node_id=node_id, revision=1, revision_id="rev_remote1",
                                   at="2025-06-01T00:00:00.000000Z")
    second = edited(document, symptom="Remote symptom.")
    remote_second = synced_revision(second, node_id=node_id, revision=2, revision_id="rev_remote2",
                                    at="2025-06-02T00:00:00.000000Z")
    await same(stores, lambda tx: apply_synced(tx, second, [remote_first, remote_second], fresh=True),
               writing=True)
    node = await same(stores, lambda s: s.get_node(node_id))
    assert (node.revision, node.version, node.created_at, node.updated_at) == (
        2, remote_second.row.version, remote_first.row.created_at, remote_second.row.created_at)
    rows = await same(stores, lambda s: s.revisions(node_id))
    assert rows == [remote_first.row, remote_second.row]
    await all_reads(stores, node_id)
    assert [row.change_seq for row in await same(stores, lambda s: s.changes_after(0, 10))] == [1]

    third = edited(second, symptom="Remote symptom, again.")
    remote_third = synced_revision(third, node_id=node_id, revision=3, revision_id="rev_remote3",
                                   at="2025-06-03T00:00:00.000000Z")
    await same(stores, lambda tx: apply_synced(tx, third, [remote_third], fresh=False), writing=True)
    assert (await same(stores, lambda s: s.get_node(node_id))).revision == 3
    assert [row.change_seq for row in await same(stores, lambda s: s.changes_after(0, 10))] == [2]
    await all_reads(stores, node_id)


async def test_move_revisions_into_a_conflict(stores, make_doc, clock):
    document = make_doc()
    node = new_node(document)
    await same(stores, lambda tx: tx.insert_nodes([node]), writing=True)
    tick(clock, 1)
    solutions = [dict(document["content"]["solutions"][0], fix=["python3 -m venv env", "env/bin/pip install requests"]),
                 document["content"]["solutions"][1]]
    local_one = edited(document, solutions=solutions)
    mine = await apply_same_edit(stores, node.id, local_one)
    tick(clock, 2)
    mine_too = await apply_same_edit(stores, node.id, edited(local_one, symptom="Local symptom."))

    async def archive(tx):  # a failure the moved edit archived comes back
        await sql(tx, """INSERT INTO failures (node_id, environment, cluster, summary, steps, reason, created_at,
                             archived_at, archived_by) VALUES (?, '{}', 'c', 's', '[]', 'r', ?, ?, ?)""",
                  (node.id, clock[0], clock[0], mine.revision_id))
    await write(stores, archive)
    tick(clock, 3)
    remote = "https://mesh.example"
    local = await same(stores, lambda s: s.revisions_with_documents(node.id, 1))
    conflict = {"remote": remote, "base_revision": 1, "remote_revision": 2,
                "local_revisions": json.dumps([{"revision_id": r.revision_id, "document": d} for r, d, _ in local]),
                "both_changed": json.dumps(["content.symptom"])}
    conflict_id = await same(
        stores, lambda tx: tx.move_revisions(node.id, [mine.revision_id, mine_too.revision_id], {"venv-macos": 1,
                                                                                                   "venv-linux": 1}, conflict),
        writing=True)
    assert conflict_id == 1
    assert [r.revision for r in await same(stores, lambda s: s.revisions(node.id))] == [1]
    assert await same(stores, lambda tx: tx.solution_behaviours(node.id), writing=True) == {
        sid: {digest: 1} for sid, digest in node.solution_hashes.items()}
    assert await same(stores, lambda tx: tx.undo_token(mine.revision_id), writing=True) is None
    assert await same(stores, lambda s: s.get_node_for_read(node.id)) is not None

    # The remote's revision 2 takes the number; then the local edit is kept on top as revision 3.
    remote_doc = edited(document, symptom="Remote symptom.")
    remote_second = synced_revision(remote_doc, node_id=node.id, revision=2, revision_id="rev_remote2",
                                    at="2025-06-02T00:00:00.000000Z")
    await same(stores, lambda tx: apply_synced(tx, remote_doc, [remote_second], fresh=False), writing=True)
    tick(clock, 4)
    kept = await apply_same_edit(stores, node.id, edited(local_one, symptom="Local symptom."))
    assert kept.revision == 3
    await same(stores, lambda tx: tx.set_conflict_kept(conflict_id, kept.revision), writing=True)
    conflicts = await same(stores, lambda s: s.sync_conflicts())
    assert [(c["id"], c["kept_revision"], c["base_revision"], c["created_at"]) for c in conflicts] == [
        (1, 3, 1, "2026-01-01T00:00:03.000000Z")]
    assert conflicts[0]["both_changed"] == ["content.symptom"]
    assert await same(stores, lambda s: s.sync_conflicts(node.id)) == conflicts
    assert await same(stores, lambda s: s.sync_conflicts("python/other")) == []
    assert [r.revision_id for r in await same(stores, lambda s: s.revisions(node.id))] == [
        node.revision_id, "rev_remote2", kept.revision_id]
    await all_reads(stores, node.id)


async def test_postgres_refuses_to_change_a_version(stores, make_doc):
    import psycopg

    node = new_node(make_doc())
    store = stores["postgres"]
    async with store.write() as tx:
        await tx.insert_nodes([node])
    with pytest.raises(psycopg.errors.RestrictViolation):
        async with store.write() as tx:
            await tx.connection.execute("UPDATE node_versions SET document = '{}' WHERE version = %s", (node.version,))
    with pytest.raises(psycopg.errors.RestrictViolation):
        async with store.write() as tx:
            await tx.connection.execute("DELETE FROM article_revisions WHERE revision_id = %s", (node.revision_id,))
    assert (await store.get_node(node.id)).document == json.loads(node.document_json)  # and the writes rolled back
    assert [r.revision_id for r in await store.revisions(node.id)] == [node.revision_id]


async def test_ids_page_in_byte_order_whatever_the_collation(postgres_server, tmp_path, make_doc, clock, monkeypatch):
    """SQLite orders ids byte by byte; a PostgreSQL database with a language collation ('-' ignored at
    first, '_' before '-') must still page through ids in that order."""
    import psycopg
    from urllib.parse import urlsplit, urlunsplit

    from knowmesh_mcp.store import PostgresStore, SqliteStore

    name = f"knowmesh_icu_{secrets.token_hex(4)}"
    try:
        async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as admin:
            await admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8' "
                                "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'")
    except psycopg.Error as error:
        pytest.skip(f"no ICU collation on this server: {error}")
    stores = {"sqlite": await SqliteStore.open(tmp_path / "icu.db"),
              "postgres": await PostgresStore.open(urlunsplit(urlsplit(postgres_server)._replace(path=f"/{name}")))}
    try:
        if not hasattr(PostgresWriter, "write_search_rows"):
            async def no_index(self, rows, *, fresh=False):
                return None
            monkeypatch.setattr(PostgresWriter, "write_search_rows", no_index, raising=False)
        ids = ["python/a_x", "python/a-x", "python/a.x", "python/a1"]
        nodes = [new_node(make_doc(id=node_id)) for node_id in ids]
        await same(stores, lambda tx: tx.insert_nodes(nodes), writing=True)
        ((language_order,),) = await stores["postgres"]._fetchall(
            'SELECT array_agg(id ORDER BY id COLLATE "default") FROM nodes')
        assert language_order != sorted(ids)  # the database's own order is not the bytes' order
        listed = await same(stores, lambda s: s.list_nodes(ecosystem=None, after_id=None, limit=10))
        assert [n.id for n in listed] == sorted(ids)
        page = await same(stores, lambda s: s.list_nodes(ecosystem=None, after_id="python/a.x", limit=10))
        assert [n.id for n in page] == ["python/a1", "python/a_x"]

        async def documents_of(store):
            return [document["id"] async for document, _, _ in store.iter_current_documents(batch=1)]
        assert await same(stores, documents_of) == sorted(ids)
    finally:
        for store in stores.values():
            await store.close()
        async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as admin:
            await admin.execute(f"DROP DATABASE IF EXISTS {name}")
