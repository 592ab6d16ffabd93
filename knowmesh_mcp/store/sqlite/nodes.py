"""Nodes, versions, revisions, edits and redirects on SQLite.

`NodeReads` is mixed into `store.SqliteStore` (reads: `self._fetchall(sql, params)` on the reader
connection), `NodeWrites` into `writer.SqliteWriter` (one write transaction: `self._all(sql, params)`
and `self.connection`). Same signatures and results as PostgreSQL's (see `interface`); values are
bound `?` parameters.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import aiosqlite

from knowmesh_mcp.core.rows import (
    CurrentDocument,
    EcosystemCount,
    Edit,
    NewNode,
    NodeForEdit,
    NodeForRead,
    NodeRow,
    PinnedVersion,
    RevisionRow,
    SearchRow,
    StatsRow,
    UndoToken,
)
from knowmesh_mcp.store.common import (
    NODE_COLUMNS,
    REVISION_COLUMNS,
    STATS_COLUMNS,
    listing_conditions,
    node_row,
    revision_row,
    utc_now,
)
from knowmesh_mcp.store.sqlite.connection import select_in

# A node's node_stats rows as one JSON array of arrays (STATS_COLUMNS order); `{where}` narrows the rows of node `n`.
STATS_JSON = (
    f"""(SELECT json_group_array(json_array({STATS_COLUMNS})) FROM node_stats s WHERE s.node_id = n.id{{where}})"""
)


def stats_rows(stats_json: str) -> list[StatsRow]:
    """The StatsRows of one STATS_JSON value."""
    return [StatsRow(*values) for values in json.loads(stats_json)]


# Every node write moves the node to the end of the change feed (the sync cursor's order).
NEXT_CHANGE_SEQ = "(SELECT coalesce(max(change_seq), 0) + 1 FROM nodes)"


class NodeReads:
    _fetchall: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # SqliteStore's

    async def get_node(self, node_id: str) -> NodeRow | None:
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS} FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE n.id = ?""",
            (node_id,),
        )
        return node_row(rows[0]) if rows else None

    async def get_node_for_read(self, node_id: str) -> NodeForRead | None:
        """A node with its node_stats rows and its count of failed attempts, in one round trip."""
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS},
                  {STATS_JSON.format(where="")},
                  (SELECT count(*) FROM failures WHERE node_id = n.id)
                FROM nodes n JOIN node_versions v ON v.version = n.current_version WHERE n.id = ?""",
            (node_id,),
        )
        if not rows:
            return None
        return NodeForRead(node_row(rows[0]), stats_rows(rows[0][12]), int(rows[0][13]))

    async def get_nodes(self, ids: Sequence[str]) -> dict[str, NodeRow]:
        """{id: node} of those ids that exist, in one round trip."""
        rows = await select_in(
            self._fetchall,
            f"""SELECT {NODE_COLUMNS} FROM nodes n
                                    JOIN node_versions v ON v.version = n.current_version WHERE n.id IN ({{marks}})""",
            ids,
        )
        return {row.id: row for row in map(node_row, rows)}

    async def get_nodes_by_pk(self, pks: Sequence[int]) -> list[NodeRow]:
        if not pks:
            return []
        marks = ",".join("?" * len(pks))
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS} FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE n.pk IN ({marks})""",
            list(pks),
        )
        by_pk = {row.pk: row for row in map(node_row, rows)}
        return [by_pk[pk] for pk in pks if pk in by_pk]

    async def get_nodes_with_stats_by_pk(self, pks: Sequence[int]) -> list[tuple[NodeRow, list[StatsRow]]]:
        """The nodes of `pks` (in that order, absent ones left out), each with its node_stats rows, in one round trip."""
        if not pks:
            return []
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS},
                  {STATS_JSON.format(where="")}
                FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE n.pk IN ({",".join("?" * len(pks))})""",
            list(pks),
        )
        by_pk = {row[0]: (node_row(row), stats_rows(row[12])) for row in rows}
        return [by_pk[pk] for pk in pks if pk in by_pk]

    async def get_version(self, node_id: str, version: str) -> PinnedVersion | None:
        """One pinned version of a node: its document, solution revisions and created_at."""
        rows = await self._fetchall(
            "SELECT document, solution_revisions, created_at FROM node_versions WHERE node_id = ? AND version = ?",
            (node_id, version),
        )
        return PinnedVersion(json.loads(rows[0][0]), json.loads(rows[0][1]), rows[0][2]) if rows else None

    async def revision_of_version(self, node_id: str, version: str) -> int:
        """The latest article revision that published `version`."""
        rows = await self._fetchall(
            "SELECT max(revision) FROM article_revisions WHERE node_id = ? AND version = ?", (node_id, version)
        )
        return int(rows[0][0] or 1)

    async def list_nodes(self, *, ecosystem: str | None, after_id: str | None, limit: int) -> list[NodeRow]:
        """Current, non-deprecated nodes in id order, after `after_id`."""
        where, params = listing_conditions(ecosystem, after_id, mark="?", node_id="n.id")
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS} FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE {where} ORDER BY n.id LIMIT ?""",
            [*params, limit],
        )
        return [node_row(row) for row in rows]

    async def ecosystem_counts(self) -> list[EcosystemCount]:
        """The non-deprecated nodes and open problems of each ecosystem, by ecosystem."""
        rows = await self._fetchall(
            """SELECT ecosystem, count(*), sum(has_answer = 0) FROM nodes WHERE status != 'deprecated'
               GROUP BY ecosystem ORDER BY ecosystem"""
        )
        return [EcosystemCount(row[0], int(row[1]), int(row[2])) for row in rows]

    async def answered_nodes(self, offset: int, limit: int) -> list[tuple[str, str]]:
        """(id, updated_at) of the answered, non-deprecated nodes in id order, from `offset` (the sitemap's)."""
        # The offset is walked in the index alone (an OFFSET of the outer query read every row it skipped).
        rows = await self._fetchall(
            """SELECT id, updated_at FROM nodes WHERE has_answer = 1 AND status != 'deprecated'
                 AND id >= (SELECT id FROM nodes WHERE has_answer = 1 AND status != 'deprecated'
                            ORDER BY id LIMIT 1 OFFSET ?)
               ORDER BY id LIMIT ?""",
            (offset, limit),
        )
        return [(row[0], row[1]) for row in rows]

    async def count_nodes(self) -> int:
        rows = await self._fetchall("SELECT count(*) FROM nodes")
        return int(rows[0][0])

    async def revisions(self, node_id: str) -> list[RevisionRow]:
        rows = await self._fetchall(
            f"SELECT {REVISION_COLUMNS} FROM article_revisions WHERE node_id = ? ORDER BY revision", (node_id,)
        )
        return [revision_row(row) for row in rows]

    async def document_at(self, node_id: str, revision: int) -> dict[str, Any] | None:
        """The document an article revision published."""
        rows = await self._fetchall(
            """SELECT v.document FROM article_revisions r JOIN node_versions v ON v.version = r.version
               WHERE r.node_id = ? AND r.revision = ?""",
            (node_id, revision),
        )
        return json.loads(rows[0][0]) if rows else None

    async def iter_current_documents(self, batch: int = 500) -> AsyncIterator[CurrentDocument]:
        """The current document, status and version of every node in id order."""
        after = ""
        while True:
            rows = await self._fetchall(
                """SELECT n.id, v.document, n.status, n.current_version FROM nodes n
                   JOIN node_versions v ON v.version = n.current_version
                   WHERE n.id > ? ORDER BY n.id LIMIT ?""",
                (after, batch),
            )
            for row in rows:
                yield CurrentDocument(json.loads(row[1]), row[2], row[3])
            if len(rows) < batch:
                return
            after = rows[-1][0]

    async def redirect(self, node_id: str) -> str | None:
        """The canonical node a merged node answers with, or None."""
        rows = await self._fetchall("SELECT canonical_id FROM node_redirects WHERE node_id = ?", (node_id,))
        return rows[0][0] if rows else None


class NodeWrites:
    connection: aiosqlite.Connection
    _all: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # SqliteWriter's
    _all_in: Callable[[str, Iterable[Any]], Awaitable[list[tuple[Any, ...]]]]  # SqliteWriter's

    if TYPE_CHECKING:  # the search index's (search.SearchWrites); every node write calls it

        async def write_search_rows(self, rows: Sequence[tuple[str, SearchRow]], *, fresh: bool = False) -> None: ...

    async def node_for_edit(self, node_id: str) -> NodeForEdit | None:
        """The node's current revision, document and status, read inside the write transaction."""
        rows = await self._all(
            """SELECT n.current_revision, v.document, n.status FROM nodes n
               JOIN node_versions v ON v.version = n.current_version WHERE n.id = ?""",
            (node_id,),
        )
        return NodeForEdit(rows[0][0], json.loads(rows[0][1]), rows[0][2]) if rows else None

    async def revisions_after(self, node_id: str, revision: int) -> list[RevisionRow]:
        rows = await self._all(
            f"SELECT {REVISION_COLUMNS} FROM article_revisions WHERE node_id = ? AND revision > ? ORDER BY revision",
            (node_id, revision),
        )
        return [revision_row(row) for row in rows]

    async def revision(self, revision_id: str) -> RevisionRow | None:
        rows = await self._all(
            f"SELECT {REVISION_COLUMNS} FROM article_revisions WHERE revision_id = ?", (revision_id,)
        )
        return revision_row(rows[0]) if rows else None

    async def solution_behaviours(self, node_id: str) -> dict[str, dict[str, int]]:
        """{solution id: {behaviour hash: revision}} of every behaviour a solution ever had."""
        known: dict[str, dict[str, int]] = {}
        for solution_id, digest, revision in await self._all(
            "SELECT solution_id, behavior_hash, revision FROM solution_revisions WHERE node_id = ?", (node_id,)
        ):
            known.setdefault(solution_id, {})[digest] = revision
        return known

    async def undo_token(self, revision_id: str) -> UndoToken | None:
        """A revision's undo token: its hash and when it was used."""
        rows = await self._all("SELECT token_hash, used_at FROM undo_tokens WHERE revision_id = ?", (revision_id,))
        return UndoToken(rows[0][0], rows[0][1]) if rows else None

    async def spend_undo_token(self, revision_id: str) -> bool:
        """Mark a token used; False when another undo spent it first."""
        cursor = await self.connection.execute(
            "UPDATE undo_tokens SET used_at = ? WHERE revision_id = ? AND used_at IS NULL", (utc_now(), revision_id)
        )
        return cursor.rowcount == 1

    async def set_node_status(self, node_id: str, status: str) -> None:
        """A maintainer's status change; the node moves to the end of the change feed."""
        await self.connection.execute(
            f"UPDATE nodes SET status = ?, change_seq = {NEXT_CHANGE_SEQ} WHERE id = ?", (status, node_id)
        )

    async def insert_redirect(self, node_id: str, canonical_id: str, action_id: int) -> None:
        """`node_id` now answers with `canonical_id`; nodes merged into `node_id` follow it there too."""
        await self.connection.execute(
            "INSERT INTO node_redirects (node_id, canonical_id, action_id, created_at) VALUES (?, ?, ?, ?)",
            (node_id, canonical_id, action_id, utc_now()),
        )
        await self.connection.execute(
            "UPDATE node_redirects SET canonical_id = ? WHERE canonical_id = ?", (canonical_id, node_id)
        )

    async def redirect(self, node_id: str) -> str | None:
        rows = await self._all("SELECT canonical_id FROM node_redirects WHERE node_id = ?", (node_id,))
        return rows[0][0] if rows else None

    async def apply_edit(self, edit: Edit) -> str:
        """Publish an edit: new current version, its revision, undo token and index rows. Returns the time."""
        now = utc_now()
        await self.connection.execute(
            f"""UPDATE nodes SET title = ?, current_version = ?, current_revision = ?, has_answer = ?,
                   signature_hash = ?, quoted_values = ?, updated_at = ?,
                   change_seq = {NEXT_CHANGE_SEQ}
               WHERE id = ?""",
            (
                edit.title,
                edit.version,
                edit.revision,
                int(edit.has_answer),
                edit.signature_hash,
                json.dumps(edit.quoted_values, ensure_ascii=False),
                now,
                edit.node_id,
            ),
        )
        await self.connection.execute(
            """INSERT OR IGNORE INTO node_versions (version, node_id, document, solution_revisions, created_at)
               VALUES (?, ?, ?, ?, ?)""",
            (edit.version, edit.node_id, edit.document_json, json.dumps(edit.solution_revisions), now),
        )
        await self.connection.execute(
            f"INSERT INTO article_revisions ({REVISION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                edit.revision_id,
                edit.node_id,
                edit.revision,
                edit.revision - 1,
                edit.kind,
                edit.version,
                edit.agent_id,
                edit.model,
                edit.summary,
                edit.changes_json,
                edit.reverts_revision_id,
                now,
                edit.agent_proof,
            ),
        )
        await self.connection.execute(
            "INSERT INTO undo_tokens (revision_id, token_hash) VALUES (?, ?)", (edit.revision_id, edit.undo_token_hash)
        )
        await self.connection.executemany(
            """INSERT INTO solution_revisions (node_id, solution_id, revision, behavior_hash, created_at)
               VALUES (?, ?, ?, ?, ?)""",
            [(edit.node_id, sid, revision, digest, now) for sid, revision, digest in edit.new_solution_revisions],
        )
        await self.write_search_rows([(edit.node_id, edit.index)])
        return now

    async def current_revision(self, node_id: str) -> int:
        async with self.connection.execute("SELECT current_revision FROM nodes WHERE id = ?", (node_id,)) as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def versions_of(self, ids: Sequence[str]) -> dict[str, str]:
        """{id: current version} of those ids that exist."""
        rows = await self._all_in("SELECT id, current_version FROM nodes WHERE id IN ({marks})", ids)
        return {row[0]: row[1] for row in rows}

    async def current_documents(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        rows = await self._all_in(
            """SELECT n.id, v.document FROM nodes n JOIN node_versions v ON v.version = n.current_version
               WHERE n.id IN ({marks})""",
            ids,
        )
        return {row[0]: json.loads(row[1]) for row in rows}

    async def insert_nodes(self, nodes: Sequence[NewNode]) -> None:
        """Insert new nodes with their first version, revision 1, solution revisions and index rows."""
        if not nodes:
            return
        now = utc_now()
        ((last_seq,),) = await self.connection.execute_fetchall("SELECT coalesce(max(change_seq), 0) FROM nodes")
        await self.connection.executemany(
            """INSERT INTO nodes (id, ecosystem, status, title, current_version, current_revision,
                   has_answer, signature_hash, quoted_values, created_at, updated_at, change_seq)
               VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)""",
            [
                (
                    n.id,
                    n.ecosystem,
                    n.status,
                    n.title,
                    n.version,
                    int(n.has_answer),
                    n.signature_hash,
                    json.dumps(n.quoted_values, ensure_ascii=False),
                    now,
                    now,
                    last_seq + i + 1,
                )
                for i, n in enumerate(nodes)
            ],
        )
        await self.connection.executemany(
            """INSERT OR IGNORE INTO node_versions (version, node_id, document, solution_revisions, created_at)
               VALUES (?, ?, ?, ?, ?)""",
            [(n.version, n.id, n.document_json, json.dumps(n.solution_revisions), now) for n in nodes],
        )
        await self.connection.executemany(
            """INSERT INTO article_revisions (revision_id, node_id, revision, parent_revision, kind, version,
                   agent_id, model, summary, changes, created_at, agent_proof)
               VALUES (?, ?, 1, NULL, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [
                (
                    n.revision_id,
                    n.id,
                    n.kind,
                    n.version,
                    n.agent_id,
                    n.model,
                    n.summary,
                    n.changes_json,
                    now,
                    n.agent_proof,
                )
                for n in nodes
            ],
        )
        await self.connection.executemany(
            """INSERT INTO solution_revisions (node_id, solution_id, revision, behavior_hash, created_at)
               VALUES (?, ?, ?, ?, ?)""",
            [
                (n.id, sid, n.solution_revisions[sid], digest, now)
                for n in nodes
                for sid, digest in n.solution_hashes.items()
            ],
        )
        await self.write_search_rows([(n.id, n.index) for n in nodes], fresh=True)

    async def touch_node(self, node_id: str) -> None:
        """Move a node to the end of the change feed (new evidence), leaving its content alone."""
        await self.connection.execute(f"UPDATE nodes SET change_seq = {NEXT_CHANGE_SEQ} WHERE id = ?", (node_id,))
