"""Nodes, versions, revisions, edits and redirects on PostgreSQL.

`NodeReads` is mixed into `store.PostgresStore` (reads: `self._fetchall(sql, params)`, outside any
transaction), `NodeWrites` into `writer.PostgresWriter` (one write transaction:
`self._all(sql, params)` and `self.connection`, a psycopg AsyncConnection). Same signatures and
results as `SqliteStore` / `SqliteWriter` (see `interface`); values are bound `%s` parameters.

Where SQLite compares and orders node ids byte by byte, PostgreSQL would use the database's
collation: ids are compared and ordered `COLLATE "C"`, so pages and orders are the same on both.
The change feed's next number comes from the `change_counter` row, bumped in the same statement
that moves a node (and only when the node exists), so the numbers match SQLite's
`max(change_seq) + 1` one for one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

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

REVISION_MARKS = ", ".join(["%s"] * len(REVISION_COLUMNS.split(",")))


# A node's node_stats rows as one JSON array of arrays (STATS_COLUMNS order), in primary-key order as
# SQLite reads them; `{where}` narrows the rows of node `n`.
STATS_JSON = f"""(SELECT coalesce(json_agg(json_build_array({STATS_COLUMNS})
                    ORDER BY solution_id COLLATE "C", solution_revision, cluster COLLATE "C"), '[]'::json)
                  FROM node_stats s WHERE s.node_id = n.id{{where}})"""


# Move one node (`WHERE id = %s`, the first parameter) to the end of the change feed while setting
# `{sets}` (their parameters follow); the counter moves only when the node exists.
UPDATE_NODE = """WITH target AS (SELECT pk FROM nodes WHERE id = %s),
         seq AS (UPDATE change_counter SET value = value + 1 WHERE EXISTS (SELECT 1 FROM target) RETURNING value)
    UPDATE nodes SET {sets}change_seq = (SELECT value FROM seq) WHERE pk IN (SELECT pk FROM target)"""


def stats_values(values: Sequence[Any]) -> list[Any]:
    """One stats array read back from JSON with SQLite's types (JSON has no float/int distinction)."""
    (
        solution_id,
        solution_revision,
        cluster,
        solved,
        failed,
        sample_size,
        success_score,
        failure_state,
        answer_state,
        solved_agents,
        failed_agents,
        last_verified,
    ) = values
    return [
        solution_id,
        int(solution_revision),
        cluster,
        float(solved),
        float(failed),
        int(sample_size),
        float(success_score),
        failure_state,
        answer_state,
        int(solved_agents),
        int(failed_agents),
        last_verified,
    ]


def stats_json(rows: Sequence[Sequence[Any]]) -> str:
    """The stats column of `changes_after`, as SQLite's json_group_array writes it (compact)."""
    return json.dumps([stats_values(values) for values in rows], ensure_ascii=False, separators=(",", ":"))


class NodeReads:
    _fetchall: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # PostgresStore's

    if TYPE_CHECKING:  # evidence.EvidenceReads'

        async def stats_of(self, node_ids: Sequence[str]) -> dict[str, list[StatsRow]]: ...

    async def get_node(self, node_id: str) -> NodeRow | None:
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS} FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE n.id = %s""",
            (node_id,),
        )
        return node_row(rows[0]) if rows else None

    async def get_node_for_read(self, node_id: str) -> NodeForRead | None:
        """A node with its node_stats rows and its count of failed attempts, in one round trip."""
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS}, {STATS_JSON.format(where="")},
                  (SELECT count(*) FROM failures WHERE node_id = n.id)
                FROM nodes n JOIN node_versions v ON v.version = n.current_version WHERE n.id = %s""",
            (node_id,),
        )
        if not rows:
            return None
        return NodeForRead(
            node_row(rows[0]), [StatsRow(*stats_values(values)) for values in rows[0][12]], int(rows[0][13])
        )

    async def get_nodes(self, ids: Sequence[str]) -> dict[str, NodeRow]:
        """{id: node} of those ids that exist, in one round trip."""
        if not ids:
            return {}
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS} FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE n.id = ANY(%s::text[])""",
            (list(ids),),
        )
        return {row.id: row for row in map(node_row, rows)}

    async def get_nodes_by_pk(self, pks: Sequence[int]) -> list[NodeRow]:
        if not pks:
            return []
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS} FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE n.pk = ANY(%s::bigint[])""",
            (list(pks),),
        )
        by_pk = {row.pk: row for row in map(node_row, rows)}
        return [by_pk[pk] for pk in pks if pk in by_pk]

    async def get_nodes_with_stats_by_pk(self, pks: Sequence[int]) -> list[tuple[NodeRow, list[StatsRow]]]:
        """The nodes of `pks` (in that order, absent ones left out), each with its node_stats rows.

        Two statements: one with each node's stats as `STATS_JSON` took 2.56 ms a search against 1.69
        for both (100,000 nodes, 300 bench searches), where SQLite saves a hop by it."""
        rows = await self.get_nodes_by_pk(pks)
        stats = await self.stats_of([row.id for row in rows])
        return [(row, stats.get(row.id, [])) for row in rows]

    async def get_version(self, node_id: str, version: str) -> PinnedVersion | None:
        """One pinned version of a node: its document, solution revisions and created_at."""
        rows = await self._fetchall(
            "SELECT document, solution_revisions, created_at FROM node_versions WHERE node_id = %s AND version = %s",
            (node_id, version),
        )
        return PinnedVersion(json.loads(rows[0][0]), json.loads(rows[0][1]), rows[0][2]) if rows else None

    async def revision_of_version(self, node_id: str, version: str) -> int:
        """The latest article revision that published `version`."""
        rows = await self._fetchall(
            "SELECT max(revision) FROM article_revisions WHERE node_id = %s AND version = %s", (node_id, version)
        )
        return int(rows[0][0] or 1)

    async def list_nodes(self, *, ecosystem: str | None, after_id: str | None, limit: int) -> list[NodeRow]:
        """Current, non-deprecated nodes in id order, after `after_id`."""
        where, params = listing_conditions(ecosystem, after_id, mark="%s", node_id='n.id COLLATE "C"')
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS} FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE {where} ORDER BY n.id COLLATE "C" LIMIT %s""",
            [*params, limit],
        )
        return [node_row(row) for row in rows]

    async def ecosystem_counts(self) -> list[EcosystemCount]:
        """The non-deprecated nodes and open problems of each ecosystem, by ecosystem."""
        rows = await self._fetchall(
            """SELECT ecosystem, count(*), count(*) FILTER (WHERE has_answer = 0) FROM nodes
               WHERE status != 'deprecated' GROUP BY ecosystem ORDER BY ecosystem COLLATE "C" """
        )
        return [EcosystemCount(row[0], int(row[1]), int(row[2])) for row in rows]

    async def answered_nodes(self, offset: int, limit: int) -> list[tuple[str, str]]:
        """(id, updated_at) of the answered, non-deprecated nodes in id order, from `offset` (the sitemap's)."""
        # The offset is walked in the index alone (an OFFSET of the outer query read every row it skipped).
        rows = await self._fetchall(
            """SELECT id, updated_at FROM nodes WHERE has_answer = 1 AND status != 'deprecated'
                 AND id COLLATE "C" >= (SELECT id FROM nodes WHERE has_answer = 1 AND status != 'deprecated'
                                        ORDER BY id COLLATE "C" LIMIT 1 OFFSET %s)
               ORDER BY id COLLATE "C" LIMIT %s""",
            (offset, limit),
        )
        return [(row[0], row[1]) for row in rows]

    async def count_nodes(self) -> int:
        rows = await self._fetchall("SELECT count(*) FROM nodes")
        return int(rows[0][0])

    async def revisions(self, node_id: str) -> list[RevisionRow]:
        rows = await self._fetchall(
            f"SELECT {REVISION_COLUMNS} FROM article_revisions WHERE node_id = %s ORDER BY revision", (node_id,)
        )
        return [revision_row(row) for row in rows]

    async def document_at(self, node_id: str, revision: int) -> dict[str, Any] | None:
        """The document an article revision published."""
        rows = await self._fetchall(
            """SELECT v.document FROM article_revisions r JOIN node_versions v ON v.version = r.version
               WHERE r.node_id = %s AND r.revision = %s""",
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
                   WHERE n.id COLLATE "C" > %s::text ORDER BY n.id COLLATE "C" LIMIT %s""",
                (after, batch),
            )
            for row in rows:
                yield CurrentDocument(json.loads(row[1]), row[2], row[3])
            if len(rows) < batch:
                return
            after = rows[-1][0]

    async def redirect(self, node_id: str) -> str | None:
        """The canonical node a merged node answers with, or None."""
        rows = await self._fetchall("SELECT canonical_id FROM node_redirects WHERE node_id = %s", (node_id,))
        return rows[0][0] if rows else None


class NodeWrites:
    connection: Any

    _all: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # PostgresWriter's
    _copy: Callable[[str, str, Iterable[Sequence[Any]]], Awaitable[None]]  # PostgresWriter's
    _many: Callable[[str, Sequence[Sequence[Any]]], Awaitable[None]]  # PostgresWriter's

    if TYPE_CHECKING:  # the search index's (search.SearchWrites); every node write calls it

        async def write_search_rows(self, rows: Sequence[tuple[str, SearchRow]], *, fresh: bool = False) -> None: ...

    async def _update_node(self, node_id: str, sets: str, values: Sequence[Any] = ()) -> None:
        """Set `sets` ("column = %s, ..." with `values`) on a node and move it to the end of the change feed."""
        await self.connection.execute(UPDATE_NODE.format(sets=f"{sets}, " if sets else ""), (node_id, *values))

    async def node_for_edit(self, node_id: str) -> NodeForEdit | None:
        """The node's current revision, document and status, read inside the write transaction."""
        rows = await self._all(
            """SELECT n.current_revision, v.document, n.status FROM nodes n
               JOIN node_versions v ON v.version = n.current_version WHERE n.id = %s""",
            (node_id,),
        )
        return NodeForEdit(rows[0][0], json.loads(rows[0][1]), rows[0][2]) if rows else None

    async def revisions_after(self, node_id: str, revision: int) -> list[RevisionRow]:
        rows = await self._all(
            f"SELECT {REVISION_COLUMNS} FROM article_revisions WHERE node_id = %s AND revision > %s ORDER BY revision",
            (node_id, revision),
        )
        return [revision_row(row) for row in rows]

    async def revision(self, revision_id: str) -> RevisionRow | None:
        rows = await self._all(
            f"SELECT {REVISION_COLUMNS} FROM article_revisions WHERE revision_id = %s", (revision_id,)
        )
        return revision_row(rows[0]) if rows else None

    async def solution_behaviours(self, node_id: str) -> dict[str, dict[str, int]]:
        """{solution id: {behaviour hash: revision}} of every behaviour a solution ever had."""
        known: dict[str, dict[str, int]] = {}
        for solution_id, digest, revision in await self._all(
            "SELECT solution_id, behavior_hash, revision FROM solution_revisions WHERE node_id = %s", (node_id,)
        ):
            known.setdefault(solution_id, {})[digest] = revision
        return known

    async def undo_token(self, revision_id: str) -> UndoToken | None:
        """A revision's undo token: its hash and when it was used."""
        rows = await self._all("SELECT token_hash, used_at FROM undo_tokens WHERE revision_id = %s", (revision_id,))
        return UndoToken(rows[0][0], rows[0][1]) if rows else None

    async def spend_undo_token(self, revision_id: str) -> bool:
        """Mark a token used; False when another undo spent it first."""
        cursor = await self.connection.execute(
            "UPDATE undo_tokens SET used_at = %s WHERE revision_id = %s AND used_at IS NULL", (utc_now(), revision_id)
        )
        return cursor.rowcount == 1

    async def set_node_status(self, node_id: str, status: str) -> None:
        """A maintainer's status change; the node moves to the end of the change feed."""
        await self._update_node(node_id, "status = %s", (status,))

    async def insert_redirect(self, node_id: str, canonical_id: str, action_id: int) -> None:
        """`node_id` now answers with `canonical_id`; nodes merged into `node_id` follow it there too."""
        await self.connection.execute(
            "INSERT INTO node_redirects (node_id, canonical_id, action_id, created_at) VALUES (%s, %s, %s, %s)",
            (node_id, canonical_id, action_id, utc_now()),
        )
        await self.connection.execute(
            "UPDATE node_redirects SET canonical_id = %s WHERE canonical_id = %s", (canonical_id, node_id)
        )

    async def redirect(self, node_id: str) -> str | None:
        rows = await self._all("SELECT canonical_id FROM node_redirects WHERE node_id = %s", (node_id,))
        return rows[0][0] if rows else None

    async def apply_edit(self, edit: Edit) -> str:
        """Publish an edit: new current version, its revision, undo token and index rows. Returns the time."""
        now = utc_now()
        await self._update_node(
            edit.node_id,
            """title = %s, current_version = %s, current_revision = %s, has_answer = %s,
               signature_hash = %s, quoted_values = %s, updated_at = %s""",
            (
                edit.title,
                edit.version,
                edit.revision,
                int(edit.has_answer),
                edit.signature_hash,
                json.dumps(edit.quoted_values, ensure_ascii=False),
                now,
            ),
        )
        await self.connection.execute(
            """INSERT INTO node_versions (version, node_id, document, solution_revisions, created_at)
               VALUES (%s, %s, %s, %s, %s) ON CONFLICT (version) DO NOTHING""",
            (edit.version, edit.node_id, edit.document_json, json.dumps(edit.solution_revisions), now),
        )
        await self.connection.execute(
            f"INSERT INTO article_revisions ({REVISION_COLUMNS}) VALUES ({REVISION_MARKS})",
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
            "INSERT INTO undo_tokens (revision_id, token_hash) VALUES (%s, %s)",
            (edit.revision_id, edit.undo_token_hash),
        )
        await self._many(
            """INSERT INTO solution_revisions (node_id, solution_id, revision, behavior_hash, created_at)
               VALUES (%s, %s, %s, %s, %s)""",
            [(edit.node_id, sid, revision, digest, now) for sid, revision, digest in edit.new_solution_revisions],
        )
        await self.write_search_rows([(edit.node_id, edit.index)])
        return now

    async def current_revision(self, node_id: str) -> int:
        rows = await self._all("SELECT current_revision FROM nodes WHERE id = %s", (node_id,))
        return int(rows[0][0]) if rows else 0

    async def versions_of(self, ids: Sequence[str]) -> dict[str, str]:
        """{id: current version} of those ids that exist."""
        if not ids:
            return {}
        rows = await self._all("SELECT id, current_version FROM nodes WHERE id = ANY(%s::text[])", (list(ids),))
        return {row[0]: row[1] for row in rows}

    async def current_documents(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        rows = await self._all(
            """SELECT n.id, v.document FROM nodes n JOIN node_versions v ON v.version = n.current_version
               WHERE n.id = ANY(%s::text[])""",
            (list(ids),),
        )
        return {row[0]: json.loads(row[1]) for row in rows}

    async def _pks(self, ids: Sequence[str]) -> dict[str, int]:
        """{id: pk} of those ids that exist (what the index rows are keyed by)."""
        if not ids:
            return {}
        rows = await self._all("SELECT id, pk FROM nodes WHERE id = ANY(%s::text[])", (list(ids),))
        return {row[0]: int(row[1]) for row in rows}

    async def insert_nodes(self, nodes: Sequence[NewNode]) -> None:
        """Insert new nodes with their first version, revision 1, solution revisions and index rows."""
        if not nodes:
            return
        now = utc_now()
        ((last_seq,),) = await self._all("UPDATE change_counter SET value = value + %s RETURNING value", (len(nodes),))
        first_seq = int(last_seq) - len(nodes) + 1
        await self._copy(
            "nodes",
            """id, ecosystem, status, title, current_version, current_revision, has_answer, signature_hash,
                        quoted_values, created_at, updated_at, change_seq""",
            (
                (
                    n.id,
                    n.ecosystem,
                    n.status,
                    n.title,
                    n.version,
                    1,
                    int(n.has_answer),
                    n.signature_hash,
                    json.dumps(n.quoted_values, ensure_ascii=False),
                    now,
                    now,
                    first_seq + i,
                )
                for i, n in enumerate(nodes)
            ),
        )
        stored = {
            version
            for (version,) in await self._all(
                "SELECT version FROM node_versions WHERE version = ANY (%s::text[])", [[n.version for n in nodes]]
            )
        }
        await self._copy(
            "node_versions",
            "version, node_id, document, solution_revisions, created_at",
            (
                (n.version, n.id, n.document_json, json.dumps(n.solution_revisions), now)
                for n in {n.version: n for n in nodes if n.version not in stored}.values()
            ),
        )
        await self._copy(
            "article_revisions",
            """revision_id, node_id, revision, parent_revision, kind, version, agent_id, model,
                                    summary, changes, created_at, agent_proof""",
            (
                (
                    n.revision_id,
                    n.id,
                    1,
                    None,
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
            ),
        )
        await self._copy(
            "solution_revisions",
            "node_id, solution_id, revision, behavior_hash, created_at",
            (
                (n.id, sid, n.solution_revisions[sid], digest, now)
                for n in nodes
                for sid, digest in n.solution_hashes.items()
            ),
        )
        await self.write_search_rows([(n.id, n.index) for n in nodes], fresh=True)

    async def touch_node(self, node_id: str) -> None:
        """Move a node to the end of the change feed (new evidence), leaving its content alone."""
        await self._update_node(node_id, "")
