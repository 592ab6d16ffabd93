"""What moves between meshes on SQLite: the change feed, sync bookkeeping (cursors, merge bases,
conflicts), a remote's revisions written as they are, and whole tables a copy moves.

`SyncReads` is mixed into `store.SqliteStore`, `SyncWrites` into `writer.SqliteWriter` (see `nodes`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import aiosqlite

from knowmesh_mcp.core.rows import ChangeRow, RevisionWithDocument, SyncedHead, SyncedRevision
from knowmesh_mcp.store.common import (
    REVISION_COLUMNS,
    REVISIONS_WITH_DOCUMENTS,
    copy_select,
    copy_update,
    revision_with_document,
    utc_now,
)
from knowmesh_mcp.store.sqlite.connection import select_in, unique_rule_as_duplicate
from knowmesh_mcp.store.sqlite.nodes import NEXT_CHANGE_SEQ, STATS_JSON
from knowmesh_mcp.store.tables import copied_table

REVISIONS_AFTER = REVISIONS_WITH_DOCUMENTS.format(mark="?")


class SyncReads:
    _fetchall: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # SqliteStore's

    async def count_changes_after(self, seq: int) -> int:
        rows = await self._fetchall("SELECT count(*) FROM nodes WHERE change_seq > ?", (seq,))
        return int(rows[0][0])

    async def changes_after(self, seq: int, limit: int) -> list[ChangeRow]:
        """The nodes written after `seq`, in write order."""
        rows = await self._fetchall(
            f"""SELECT n.change_seq, n.id, n.current_version, n.status, n.title, n.created_at, n.updated_at,
                       n.current_revision, n.has_answer,
                       {STATS_JSON.format(where=" AND s.solution_id != '' AND s.cluster != ''")},
                       (SELECT coalesce(max(f.id), 0) FROM feedback f WHERE f.node_id = n.id),
                       (SELECT json_group_array(node_id) FROM (SELECT r.node_id FROM node_redirects r
                                                               WHERE r.canonical_id = n.id ORDER BY r.node_id)),
                       (SELECT r.canonical_id FROM node_redirects r WHERE r.node_id = n.id)
                FROM nodes n WHERE n.change_seq > ? ORDER BY n.change_seq LIMIT ?""",
            (seq, limit),
        )
        return [ChangeRow._make((*row[:11], json.loads(row[11]), row[12])) for row in rows]

    async def revisions_with_documents(self, node_id: str, after: int = 0) -> list[RevisionWithDocument]:
        """(revision, document, solution revisions) of every revision after `after`: what a sync copies."""
        return [revision_with_document(row) for row in await self._fetchall(REVISIONS_AFTER, (node_id, after))]

    async def synced_states(self, remote: str, node_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """{node id: (the last revision known identical here and on `remote`, i.e. the merge base;
        the remote's last feedback id copied here)} of the nodes synced before."""
        rows = await select_in(
            self._fetchall,
            "SELECT node_id, revision, evidence_after FROM synced_nodes WHERE remote = ? AND node_id IN ({marks})",
            node_ids,
            before=[remote],
        )
        return {row[0]: (int(row[1]), int(row[2])) for row in rows}

    async def sync_cursor(self, remote: str) -> str | None:
        rows = await self._fetchall("SELECT cursor FROM sync_state WHERE remote = ?", (remote,))
        return rows[0][0] if rows else None

    async def sync_conflicts(self, node_id: str | None = None) -> list[dict[str, Any]]:
        rows = await self._fetchall(
            """SELECT id, remote, node_id, base_revision, remote_revision, local_revisions, both_changed, kept_revision,
                      created_at FROM sync_conflicts WHERE ? IS NULL OR node_id = ? ORDER BY id""",
            (node_id, node_id),
        )
        keys = (
            "id",
            "remote",
            "node_id",
            "base_revision",
            "remote_revision",
            "local_revisions",
            "both_changed",
            "kept_revision",
            "created_at",
        )
        return [
            {**dict(zip(keys, row)), "local_revisions": json.loads(row[5]), "both_changed": json.loads(row[6])}
            for row in rows
        ]

    # -- copying a whole mesh ---------------------------------------------------------------

    async def count_rows(self, table: str) -> int:
        """How many rows one `COPIED_TABLES` table holds."""
        rows = await self._fetchall(f"SELECT count(*) FROM {copied_table(table).name}")
        return int(rows[0][0])

    async def dump_table(
        self, table: str, after: Sequence[Any] | None, limit: int, until: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """Rows of one `COPIED_TABLES` table (its columns, in key order) with key > `after` and <= `until`: what a copy reads."""
        spec = copied_table(table)
        sql, params = copy_select(spec, after, until, ", ".join(spec.key), "?")
        return [tuple(row) for row in await self._fetchall(sql, [*params, limit])]


class SyncWrites:
    connection: aiosqlite.Connection
    _all: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # SqliteWriter's

    if TYPE_CHECKING:  # evidence.EvidenceWrites'

        async def insert_row(self, table: str, row: dict[str, Any]) -> int: ...

    async def revisions_with_documents(self, node_id: str, after: int = 0) -> list[RevisionWithDocument]:
        return [revision_with_document(row) for row in await self._all(REVISIONS_AFTER, (node_id, after))]

    async def set_synced(self, remote: str, node_id: str, revision: int) -> None:
        await self.connection.execute(
            """INSERT INTO synced_nodes (remote, node_id, revision) VALUES (?, ?, ?)
               ON CONFLICT (remote, node_id) DO UPDATE SET revision = excluded.revision""",
            (remote, node_id, revision),
        )

    async def set_evidence_synced(self, remote: str, node_id: str, after: int) -> None:
        await self.connection.execute(
            "UPDATE synced_nodes SET evidence_after = ? WHERE remote = ? AND node_id = ?", (after, remote, node_id)
        )

    async def set_sync_cursor(self, remote: str, cursor: str) -> None:
        await self.connection.execute(
            """INSERT INTO sync_state (remote, cursor, synced_at) VALUES (?, ?, ?)
               ON CONFLICT (remote) DO UPDATE SET cursor = excluded.cursor, synced_at = excluded.synced_at""",
            (remote, cursor, utc_now()),
        )

    async def move_revisions(
        self,
        node_id: str,
        revision_ids: Sequence[str],
        keep_solution_revisions: dict[str, int],
        conflict: dict[str, Any],
    ) -> int:
        """Move local revisions into a new sync_conflicts row (documents included) and out of history,
        with the solution revision numbers only they used (the remote's take those numbers)."""
        conflict_id = await self.insert_row("sync_conflicts", {**conflict, "node_id": node_id, "created_at": utc_now()})
        ids = [(revision_id,) for revision_id in revision_ids]
        await self.connection.executemany(
            "INSERT INTO moved_revisions (revision_id, conflict_id) VALUES (?, ?)", [(i, conflict_id) for (i,) in ids]
        )
        await self.connection.executemany(
            "UPDATE failures SET archived_at = NULL, archived_by = NULL WHERE archived_by = ?", ids
        )
        await self.connection.executemany("DELETE FROM undo_tokens WHERE revision_id = ?", ids)
        for solution_id, revision in await self._all(
            "SELECT solution_id, revision FROM solution_revisions WHERE node_id = ?", (node_id,)
        ):
            if revision > keep_solution_revisions.get(solution_id, 0):
                await self.connection.execute(
                    "DELETE FROM solution_revisions WHERE node_id = ? AND solution_id = ? AND revision = ?",
                    (node_id, solution_id, revision),
                )
        marks = ",".join("?" * len(ids))  # one statement: moved revisions may refer to each other
        await self.connection.execute(
            f"DELETE FROM article_revisions WHERE revision_id IN ({marks})", list(revision_ids)
        )
        return conflict_id

    async def set_conflict_kept(self, conflict_id: int, revision: int) -> None:
        await self.connection.execute(
            "UPDATE sync_conflicts SET kept_revision = ? WHERE id = ?", (revision, conflict_id)
        )

    async def apply_synced(self, head: SyncedHead, revisions: Sequence[SyncedRevision], *, fresh: bool) -> None:
        """Write the remote's revisions with their ids, numbers, authors and times, and make the last current
        (not its index rows: a sync writes a page's at once)."""
        last = revisions[-1].row
        values = (
            head.status,
            head.title,
            last.version,
            last.revision,
            int(head.has_answer),
            head.signature_hash,
            json.dumps(head.quoted_values, ensure_ascii=False),
            last.created_at,
        )
        if fresh:
            await self.connection.execute(
                f"""INSERT INTO nodes (id, ecosystem, status, title, current_version, current_revision, has_answer,
                       signature_hash, quoted_values, updated_at, created_at, change_seq)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {NEXT_CHANGE_SEQ})""",
                (head.id, head.ecosystem, *values, revisions[0].row.created_at),
            )
        else:
            await self.connection.execute(
                f"""UPDATE nodes SET status = ?, title = ?, current_version = ?, current_revision = ?, has_answer = ?,
                       signature_hash = ?, quoted_values = ?, updated_at = ?,
                       change_seq = {NEXT_CHANGE_SEQ}
                   WHERE id = ?""",
                (*values, head.id),
            )
        await self.connection.executemany(
            """INSERT OR IGNORE INTO node_versions (version, node_id, document, solution_revisions, created_at)
               VALUES (?, ?, ?, ?, ?)""",
            [
                (r.row.version, head.id, r.document_json, json.dumps(r.solution_revisions), r.row.created_at)
                for r in revisions
            ],
        )
        await self.connection.executemany(
            f"INSERT INTO article_revisions ({REVISION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    r.revision_id,
                    head.id,
                    r.revision,
                    r.parent_revision,
                    r.kind,
                    r.version,
                    r.agent_id,
                    r.model,
                    r.summary,
                    json.dumps(r.changes, ensure_ascii=False),
                    r.reverts_revision_id,
                    r.created_at,
                    r.agent_proof,
                )
                for r in (s.row for s in revisions)
            ],
        )
        await self.connection.executemany(
            """INSERT OR IGNORE INTO solution_revisions (node_id, solution_id, revision, behavior_hash, created_at)
               VALUES (?, ?, ?, ?, ?)""",
            [
                (head.id, sid, r.solution_revisions[sid], digest, r.row.created_at)
                for r in revisions
                for sid, digest in r.solution_hashes.items()
            ],
        )

    # -- copying a whole mesh ---------------------------------------------------------------

    async def dump_table(
        self, table: str, after: Sequence[Any] | None, limit: int, until: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """Rows of one `COPIED_TABLES` table (its columns, in key order) with key > `after` and <= `until`, read in this transaction."""
        spec = copied_table(table)
        sql, params = copy_select(spec, after, until, ", ".join(spec.key), "?")
        return [tuple(row) for row in await self._all(sql, [*params, limit])]

    async def load_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> int:
        """INSERT whole rows (in the table's column order, explicit ids included) of one `COPIED_TABLES` table; PostgreSQL's identity and change counter move past them."""
        spec = copied_table(table)
        with unique_rule_as_duplicate():
            await self.connection.executemany(
                f"INSERT INTO {spec.name} ({', '.join(spec.columns)}) VALUES ({', '.join('?' * len(spec.columns))})",
                [list(row) for row in rows],
            )
        return len(rows)

    async def update_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> int:
        """Set the `mutable` columns of existing rows (whole rows, matched by key) of one `COPIED_TABLES` table."""
        sql, params = copy_update(copied_table(table), rows, "?")
        await self.connection.executemany(sql, params)
        return len(rows)
