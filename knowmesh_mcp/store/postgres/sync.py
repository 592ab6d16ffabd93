"""What moves between meshes on PostgreSQL: the change feed, sync bookkeeping (cursors, merge
bases, conflicts), a remote's revisions written as they are, and whole tables a copy moves.

`SyncReads` is mixed into `store.PostgresStore`, `SyncWrites` into `writer.PostgresWriter` (see
`nodes`). A copy reads keys in byte order (`copy_keys`), as SQLite compares them; rows copied with
their ids move the identity sequences and the change counter past them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from knowmesh_mcp.core.rows import (
    ChangeRow,
    DuplicateRow,
    RevisionWithDocument,
    SyncedHead,
    SyncedRevision,
)
from knowmesh_mcp.store.common import (
    REVISION_COLUMNS,
    REVISIONS_WITH_DOCUMENTS,
    copy_select,
    copy_update,
    revision_with_document,
    utc_now,
)
from knowmesh_mcp.store.postgres.nodes import REVISION_MARKS, STATS_JSON, stats_json
from knowmesh_mcp.store.tables import CopiedTable, copied_table

REVISIONS_AFTER = REVISIONS_WITH_DOCUMENTS.format(mark="%s")


def copy_keys(table: CopiedTable) -> str:
    """A copied table's key columns as compared and ordered: text in byte order (`COLLATE "C"`), as SQLite does."""
    return ", ".join(column if column in table.numeric else f'{column} COLLATE "C"' for column in table.key)


class SyncReads:
    _fetchall: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # PostgresStore's

    async def count_changes_after(self, seq: int) -> int:
        rows = await self._fetchall("SELECT count(*) FROM nodes WHERE change_seq > %s", (seq,))
        return int(rows[0][0])

    async def changes_after(self, seq: int, limit: int) -> list[ChangeRow]:
        """The nodes written after `seq`, in write order."""
        rows = await self._fetchall(
            f"""SELECT n.change_seq, n.id, n.current_version, n.status, n.title, n.created_at, n.updated_at,
                       n.current_revision, n.has_answer,
                       {STATS_JSON.format(where=" AND s.solution_id != '' AND s.cluster != ''")},
                       (SELECT coalesce(max(f.id), 0) FROM feedback f WHERE f.node_id = n.id),
                       (SELECT coalesce(json_agg(r.node_id ORDER BY r.node_id), '[]') FROM node_redirects r
                        WHERE r.canonical_id = n.id),
                       (SELECT r.canonical_id FROM node_redirects r WHERE r.node_id = n.id)
                FROM nodes n WHERE n.change_seq > %s ORDER BY n.change_seq LIMIT %s""",
            (seq, limit),
        )
        return [
            ChangeRow._make((int(row[0]), *row[1:8], int(row[8]), stats_json(row[9]), int(row[10]), row[11], row[12]))
            for row in rows
        ]

    async def revisions_with_documents(self, node_id: str, after: int = 0) -> list[RevisionWithDocument]:
        """(revision, document, solution revisions) of every revision after `after`: what a sync copies."""
        return [revision_with_document(row) for row in await self._fetchall(REVISIONS_AFTER, (node_id, after))]

    async def synced_states(self, remote: str, node_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """{node id: (the last revision known identical here and on `remote`, i.e. the merge base;
        the remote's last feedback id copied here)} of the nodes synced before."""
        if not node_ids:
            return {}
        rows = await self._fetchall(
            "SELECT node_id, revision, evidence_after FROM synced_nodes WHERE remote = %s AND node_id = ANY(%s::text[])",
            (remote, list(node_ids)),
        )
        return {row[0]: (int(row[1]), int(row[2])) for row in rows}

    async def sync_cursor(self, remote: str) -> str | None:
        rows = await self._fetchall("SELECT cursor FROM sync_state WHERE remote = %s", (remote,))
        return rows[0][0] if rows else None

    async def sync_conflicts(self, node_id: str | None = None) -> list[dict[str, Any]]:
        rows = await self._fetchall(
            """SELECT id, remote, node_id, base_revision, remote_revision, local_revisions, both_changed, kept_revision,
                      created_at FROM sync_conflicts WHERE %s::text IS NULL OR node_id = %s::text ORDER BY id""",
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
            {
                **dict(zip(keys, row)),
                "id": int(row[0]),
                "local_revisions": json.loads(row[5]),
                "both_changed": json.loads(row[6]),
            }
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
        sql, params = copy_select(spec, after, until, copy_keys(spec), "%s")
        return [tuple(row) for row in await self._fetchall(sql, [*params, limit])]


class SyncWrites:
    connection: Any

    _all: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # PostgresWriter's
    _many: Callable[[str, Sequence[Sequence[Any]]], Awaitable[None]]  # PostgresWriter's

    if TYPE_CHECKING:  # nodes.NodeWrites'

        async def _update_node(self, node_id: str, sets: str, values: Sequence[Any] = ()) -> None: ...

    async def revisions_with_documents(self, node_id: str, after: int = 0) -> list[RevisionWithDocument]:
        return [revision_with_document(row) for row in await self._all(REVISIONS_AFTER, (node_id, after))]

    async def set_synced(self, remote: str, node_id: str, revision: int) -> None:
        await self.connection.execute(
            """INSERT INTO synced_nodes (remote, node_id, revision) VALUES (%s, %s, %s)
               ON CONFLICT (remote, node_id) DO UPDATE SET revision = excluded.revision""",
            (remote, node_id, revision),
        )

    async def set_evidence_synced(self, remote: str, node_id: str, after: int) -> None:
        await self.connection.execute(
            "UPDATE synced_nodes SET evidence_after = %s WHERE remote = %s AND node_id = %s", (after, remote, node_id)
        )

    async def set_sync_cursor(self, remote: str, cursor: str) -> None:
        await self.connection.execute(
            """INSERT INTO sync_state (remote, cursor, synced_at) VALUES (%s, %s, %s)
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
        row = {**conflict, "node_id": node_id, "created_at": utc_now()}  # column names: the caller's constants
        ((conflict_id,),) = await self._all(
            f"INSERT INTO sync_conflicts ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))}) RETURNING id",
            list(row.values()),
        )
        conflict_id = int(conflict_id)
        ids = [(revision_id,) for revision_id in revision_ids]
        await self._many(
            "INSERT INTO moved_revisions (revision_id, conflict_id) VALUES (%s, %s)", [(i, conflict_id) for (i,) in ids]
        )
        await self._many("UPDATE failures SET archived_at = NULL, archived_by = NULL WHERE archived_by = %s", ids)
        await self._many("DELETE FROM undo_tokens WHERE revision_id = %s", ids)
        for solution_id, revision in await self._all(
            "SELECT solution_id, revision FROM solution_revisions WHERE node_id = %s", (node_id,)
        ):
            if revision > keep_solution_revisions.get(solution_id, 0):
                await self.connection.execute(
                    "DELETE FROM solution_revisions WHERE node_id = %s AND solution_id = %s AND revision = %s",
                    (node_id, solution_id, revision),
                )
        # One statement: moved revisions may refer to each other.
        await self.connection.execute(
            "DELETE FROM article_revisions WHERE revision_id = ANY(%s::text[])", (list(revision_ids),)
        )
        return conflict_id

    async def set_conflict_kept(self, conflict_id: int, revision: int) -> None:
        await self.connection.execute(
            "UPDATE sync_conflicts SET kept_revision = %s WHERE id = %s", (revision, conflict_id)
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
                """WITH seq AS (UPDATE change_counter SET value = value + 1 RETURNING value)
                   INSERT INTO nodes (id, ecosystem, status, title, current_version, current_revision, has_answer,
                       signature_hash, quoted_values, updated_at, created_at, change_seq)
                   SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, value FROM seq""",
                (head.id, head.ecosystem, *values, revisions[0].row.created_at),
            )
        else:
            await self._update_node(
                head.id,
                """status = %s, title = %s, current_version = %s, current_revision = %s, has_answer = %s,
                   signature_hash = %s, quoted_values = %s, updated_at = %s""",
                values,
            )
        await self._many(
            """INSERT INTO node_versions (version, node_id, document, solution_revisions, created_at)
               VALUES (%s, %s, %s, %s, %s) ON CONFLICT (version) DO NOTHING""",
            [
                (r.row.version, head.id, r.document_json, json.dumps(r.solution_revisions), r.row.created_at)
                for r in revisions
            ],
        )
        await self._many(
            f"INSERT INTO article_revisions ({REVISION_COLUMNS}) VALUES ({REVISION_MARKS})",
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
        await self._many(
            """INSERT INTO solution_revisions (node_id, solution_id, revision, behavior_hash, created_at)
               VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
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
        sql, params = copy_select(spec, after, until, copy_keys(spec), "%s")
        return [tuple(row) for row in await self._all(sql, [*params, limit])]

    async def load_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> int:
        """INSERT whole rows (in the table's column order, explicit ids included) of one `COPIED_TABLES` table; PostgreSQL's identity and change counter move past them."""
        import psycopg

        spec = copied_table(table)
        if not rows:
            return 0
        try:
            await self._many(
                f"INSERT INTO {spec.name} ({', '.join(spec.columns)}) VALUES ({', '.join(['%s'] * len(spec.columns))})",
                [list(row) for row in rows],
            )
        except psycopg.errors.UniqueViolation as error:  # the transaction is lost either way: no savepoint
            raise DuplicateRow(str(error)) from None
        if (
            spec.identity
        ):  # identity columns are GENERATED BY DEFAULT: the next generated id must follow the copied ones
            await self._all(
                f"""SELECT setval(pg_get_serial_sequence('{spec.name}', '{spec.identity}'), max({spec.identity}))
                    FROM {spec.name} HAVING max({spec.identity}) IS NOT NULL"""
            )
        if spec.name == "nodes":
            await self._follow_change_seq()
        return len(rows)

    async def update_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> int:
        """Set the `mutable` columns of existing rows (whole rows, matched by key) of one `COPIED_TABLES` table."""
        spec = copied_table(table)
        sql, params = copy_update(spec, rows, "%s")
        await self._many(sql, params)
        if spec.name == "nodes" and rows:
            await self._follow_change_seq()
        return len(rows)

    async def _follow_change_seq(self) -> None:
        """The change counter at least at the highest copied change_seq, so the next write comes after them."""
        await self._all(
            "UPDATE change_counter SET value = greatest(value, (SELECT coalesce(max(change_seq), 0) FROM nodes))"
        )
