"""Evidence, failed approaches, write limits, dedupe, service issues, tokens, meta, the review queue and maintainer actions on PostgreSQL.

`EvidenceReads` is mixed into `store.PostgresStore` (reads: `self._fetchall(sql, params)`, outside any
transaction), `EvidenceWrites` into `writer.PostgresWriter` (one write transaction:
`self._all(sql, params)` and `self.connection`, a psycopg AsyncConnection). Same signatures and
results as `SqliteStore` / `SqliteWriter` (see `interface`); values are bound `%s` parameters.

Text ordering and comparisons use `COLLATE "C"`: SQLite compares bytes, and a server initialised
with a linguistic locale would otherwise order ids, agents and times differently. Where SQLite's
rows come back in an index's order without an ORDER BY (node_stats, feedback of a node), the same
order is asked for explicitly, so both backends list rows alike.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from knowmesh_mcp.core.identity import agent_object
from knowmesh_mcp.core.rows import (
    TOKEN_FIELDS,
    TOKEN_ID_LENGTH,
    DedupeTask,
    DedupeVote,
    DuplicateRow,
    LiveToken,
    OutcomeReport,
    ReviewRow,
    StatsRow,
)
from knowmesh_mcp.store.common import FEEDBACK_COLUMNS, STATS_COLUMNS, review_rows, utc_now
from knowmesh_mcp.store.postgres.schema import migrations

# The key `insert_row` returns (SQLite's rowid): the identity column of each table it is given.
ROW_KEYS = {
    "feedback": "id",
    "failures": "id",
    "service_issues": "number",
    "sync_conflicts": "id",
    "dedupe_tasks": "id",
    "maintainer_actions": "id",
}


# node_stats' primary key order (SQLite's table is WITHOUT ROWID: its rows come back in this order).
STATS_ORDER = 'node_id COLLATE "C", solution_id COLLATE "C", solution_revision, cluster COLLATE "C"'


# The current answer of a node: the stats row's solution revision is the one its current version publishes.
CURRENT_ANSWER = "(v.solution_revisions::jsonb -> s.solution_id) = to_jsonb(s.solution_revision)"


class EvidenceReads:
    _fetchall: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # PostgresStore's

    async def get_meta(self, key: str) -> str | None:
        rows = await self._fetchall("SELECT value FROM meta WHERE key = %s", (key,))
        return rows[0][0] if rows else None

    async def token(self, token_hash: str) -> LiveToken | None:
        """The agent, role and last use of a live (unrevoked) token."""
        rows = await self._fetchall(
            "SELECT agent_id, role, last_used_at FROM agent_tokens WHERE token_hash = %s AND revoked_at IS NULL",
            (token_hash,),
        )
        return LiveToken(rows[0][0], rows[0][1], rows[0][2]) if rows else None

    async def tokens(self) -> list[dict[str, Any]]:
        """Every token's id (the start of its hash), agent, role and dates, oldest first."""
        rows = await self._fetchall(
            """SELECT substr(token_hash, 1, %s), agent_id, role, created_at, last_used_at, revoked_at FROM agent_tokens
               ORDER BY created_at COLLATE "C", agent_id COLLATE "C", token_hash COLLATE "C"
            """,
            (TOKEN_ID_LENGTH,),
        )
        return [dict(zip(TOKEN_FIELDS, row)) for row in rows]

    async def stats_of(self, node_ids: Sequence[str]) -> dict[str, list[StatsRow]]:
        """{node id: its node_stats rows} (nodes without evidence are absent)."""
        if not node_ids:
            return {}
        found: dict[str, list[StatsRow]] = {}
        for row in await self._fetchall(
            f"SELECT node_id, {STATS_COLUMNS} FROM node_stats WHERE node_id = ANY(%s) ORDER BY {STATS_ORDER}",
            (list(node_ids),),
        ):
            found.setdefault(row[0], []).append(StatsRow(*row[1:]))
        return found

    async def feedback_after(self, node_id: str, after: int, limit: int) -> list[dict[str, Any]]:
        """A node's feedback rows after id `after`, without the address hash: what a sync copies."""
        rows = await self._fetchall(
            f"SELECT id, {', '.join(FEEDBACK_COLUMNS)} FROM feedback WHERE node_id = %s AND id > %s ORDER BY id LIMIT %s",
            (node_id, after, limit),
        )
        return [{**dict(zip(("id", *FEEDBACK_COLUMNS), row)), "environment": json.loads(row[7])} for row in rows]

    async def failures_of(self, node_id: str) -> list[dict[str, Any]]:
        """Every failed attempt on a node, visible and archived, oldest first."""
        rows = await self._fetchall(
            """SELECT id, environment, cluster, summary, steps, reason, agent_id, model, created_at, archived_at, archived_by,
                      proof
               FROM failures WHERE node_id = %s ORDER BY id""",
            (node_id,),
        )
        return [
            {
                "id": r[0],
                "environment": json.loads(r[1]),
                "cluster": r[2],
                "summary": r[3],
                "steps": json.loads(r[4]),
                "reason": r[5],
                "agent": agent_object({"id": r[6], "model": r[7]}, r[11]),
                "created_at": r[8],
                "archived": r[9] is not None,
                "archived_at": r[9],
                "archived_by_revision": r[10],
            }
            for r in rows
        ]

    async def answers_in_state(self, failure_state: str, limit: int) -> list[ReviewRow]:
        """Current answers in `failure_state` in some cluster, most reports first."""
        return review_rows(
            await self._fetchall(
                f"""SELECT n.id, n.title, n.current_revision, s.solution_id, s.solution_revision, s.cluster, s.sample_size
                FROM node_stats s JOIN nodes n ON n.id = s.node_id JOIN node_versions v ON v.version = n.current_version
                WHERE s.failure_state = %s AND s.solution_id != '' AND s.cluster != '' AND {CURRENT_ANSWER}
                  AND n.status != 'deprecated'
                ORDER BY s.sample_size DESC, n.id COLLATE "C" LIMIT %s""",
                (failure_state, limit),
            )
        )

    async def unsolved_nodes(self, limit: int) -> list[ReviewRow]:
        return review_rows(
            await self._fetchall(
                """SELECT id, title, current_revision, NULL, NULL, NULL, 0 FROM nodes
               WHERE has_answer = 0 AND status != 'deprecated' ORDER BY created_at COLLATE "C", id COLLATE "C" LIMIT %s""",
                (limit,),
            )
        )

    async def failures_after_edit(self, limit: int) -> list[ReviewRow]:
        """Failure reports newer than the article's current revision: nobody acted on them yet."""
        return review_rows(
            await self._fetchall(
                """SELECT n.id, n.title, n.current_revision, f.solution_id, f.solution_revision, f.cluster, count(*)
               FROM feedback f JOIN nodes n ON n.id = f.node_id
               WHERE f.outcome IN ('failed', 'dangerous') AND f.created_at > n.updated_at COLLATE "C"
                 AND n.status != 'deprecated'
               GROUP BY n.id, n.title, n.current_revision, f.solution_id, f.solution_revision, f.cluster
               ORDER BY count(*) DESC, n.id COLLATE "C", f.solution_id COLLATE "C", f.solution_revision,
                        f.cluster COLLATE "C" LIMIT %s""",
                (limit,),
            )
        )

    async def stale_nodes(self, before: str, limit: int) -> list[ReviewRow]:
        """Answered nodes never verified, or last verified before `before`."""
        return review_rows(
            await self._fetchall(
                """SELECT n.id, n.title, n.current_revision, NULL, NULL, NULL, coalesce(s.sample_size, 0)
               FROM nodes n LEFT JOIN node_stats s
                 ON s.node_id = n.id AND s.solution_id = '' AND s.solution_revision = 0 AND s.cluster = ''
               WHERE n.has_answer = 1 AND n.status != 'deprecated'
                 AND (s.last_verified IS NULL OR s.last_verified < %s COLLATE "C")
               ORDER BY n.id COLLATE "C" LIMIT %s""",
                (before, limit),
            )
        )

    async def awaiting_second_verification(self, before: str, limit: int) -> list[ReviewRow]:
        """Current answers, published before `before`, with exactly one independent solved report."""
        return review_rows(
            await self._fetchall(
                f"""SELECT n.id, n.title, n.current_revision, s.solution_id, s.solution_revision, NULL, s.sample_size
                FROM node_stats s JOIN nodes n ON n.id = s.node_id JOIN node_versions v ON v.version = n.current_version
                WHERE s.cluster = '' AND s.solution_id != '' AND s.solved_agents = 1 AND n.updated_at < %s COLLATE "C"
                  AND {CURRENT_ANSWER} AND n.status != 'deprecated'
                ORDER BY n.id COLLATE "C" LIMIT %s""",
                (before, limit),
            )
        )

    async def dedupe_tasks(self, status: str | None, limit: int) -> list[dict[str, Any]]:
        rows = await self._fetchall(
            """SELECT t.id, t.node_id, t.candidate_id, t.reason, t.status, t.canonical_id, t.created_at,
                      (SELECT count(*) FROM dedupe_votes v WHERE v.task_id = t.id AND v.vote = 'same'),
                      (SELECT count(*) FROM dedupe_votes v WHERE v.task_id = t.id AND v.vote = 'different')
               FROM dedupe_tasks t WHERE (%(status)s::text IS NULL OR t.status = %(status)s::text)
               ORDER BY t.id LIMIT %(limit)s""",
            {"status": status, "limit": limit},
        )
        return [
            {
                "task_id": r[0],
                "node": r[1],
                "candidate": r[2],
                "reason": r[3],
                "status": r[4],
                "canonical_id": r[5],
                "created_at": r[6],
                "votes": {"same": r[7], "different": r[8]},
            }
            for r in rows
        ]

    async def service_issues(self, number: int | None = None, limit: int = 200) -> list[dict[str, Any]]:
        rows = await self._fetchall(
            """SELECT number, title, body, details, agent_id, status, created_at, resolution FROM service_issues
               WHERE (%(number)s::bigint IS NULL OR number = %(number)s::bigint) ORDER BY number DESC LIMIT %(limit)s""",
            {"number": number, "limit": limit},
        )
        return [
            {
                "number": r[0],
                "title": r[1],
                "body": r[2],
                **json.loads(r[3]),
                "agent": r[4],
                "status": r[5],
                "created_at": r[6],
                **({"resolution": json.loads(r[7])} if r[7] else {}),
            }
            for r in rows
        ]

    async def maintainer_actions(self, target: str | None, after: int, limit: int) -> list[dict[str, Any]]:
        """The audit log (optionally of one node or issue), oldest first, after action id `after`."""
        rows = await self._fetchall(
            """SELECT id, action, target, detail, note, maintainer_id, proof, created_at FROM maintainer_actions
               WHERE (%(target)s::text IS NULL OR target = %(target)s::text) AND id > %(after)s
               ORDER BY id LIMIT %(limit)s""",
            {"target": target, "after": after, "limit": limit},
        )
        return [
            {
                "id": r[0],
                "action": r[1],
                "target": r[2],
                **json.loads(r[3]),
                "note": r[4],
                "maintainer": {"id": r[5], "proven": True},
                "proof": r[6],
                "created_at": r[7],
            }
            for r in rows
        ]

    async def health_facts(self) -> dict[str, Any]:
        """What `doctor` and GET /v1/health report: versions, counts, tokens, syncs, integrity.

        `schema_version` is the PostgreSQL series' own (store/postgres/migrations). PostgreSQL has
        no `PRAGMA quick_check`; `integrity` is "ok" unless the one cheap consistency check the
        database cannot enforce by itself fails: every node's current version exists.
        """
        ((schema, nodes, indexed, unreadable),) = await self._fetchall(
            """SELECT (SELECT coalesce(max(version), 0) FROM schema_migrations), (SELECT count(*) FROM nodes),
                      (SELECT count(*) FROM node_index),
                      (SELECT count(*) FROM nodes n
                       WHERE NOT EXISTS (SELECT 1 FROM node_versions v WHERE v.version = n.current_version))"""
        )
        tokens = dict(
            await self._fetchall("SELECT role, count(*) FROM agent_tokens WHERE revoked_at IS NULL GROUP BY role")
        )
        syncs = await self._fetchall('SELECT remote, synced_at FROM sync_state ORDER BY remote COLLATE "C"')
        meta = dict(
            await self._fetchall(
                "SELECT key, value FROM meta WHERE key IN ('normalizer_version', 'search_index_version')"
            )
        )
        integrity = "ok" if not unreadable else f"{unreadable} node(s) without their current version"
        return {
            "schema_version": int(schema),
            "latest_schema_version": max(migration.number for migration in migrations()),
            "backend": "postgresql",
            "nodes": int(nodes),
            "indexed_nodes": int(indexed),
            "tokens": {"agent": int(tokens.get("agent", 0)), "maintainer": int(tokens.get("maintainer", 0))},
            "syncs": [{"remote": remote, "synced_at": at} for remote, at in syncs],
            "integrity": integrity,
            "normalizer_version": meta.get("normalizer_version"),
            "search_index_version": meta.get("search_index_version"),
        }


class EvidenceWrites:
    connection: Any

    _all: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # PostgresWriter's

    @asynccontextmanager
    async def _unique(self) -> AsyncIterator[None]:
        """One statement in a savepoint, its unique violation as `DuplicateRow`.

        A failed statement aborts a PostgreSQL transaction; rolled back to the savepoint, the
        caller's transaction goes on as SQLite's does after a refused row.
        """
        import psycopg

        try:
            async with self.connection.transaction():
                yield
        except psycopg.errors.UniqueViolation as error:
            raise DuplicateRow(str(error)) from None

    async def _executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> int:
        if not params:
            return 0
        async with self.connection.cursor() as cursor:
            await cursor.executemany(sql, params)
            return cursor.rowcount

    async def insert_row(self, table: str, row: dict[str, Any]) -> int:
        """INSERT one row given as {column: value} into one of our tables; returns its key (SQLite's rowid).

        `table` and the column names are the caller's constants, never request data; values are
        bound parameters. A unique-index conflict raises `DuplicateRow`.
        """
        if table not in ROW_KEYS:
            raise ValueError(f"insert_row: no key column known for table {table!r}")
        columns = ", ".join(row)
        marks = ", ".join(["%s"] * len(row))
        async with self._unique():
            rows = await self._all(
                f"INSERT INTO {table} ({columns}) VALUES ({marks}) RETURNING {ROW_KEYS[table]}", list(row.values())
            )
        return int(rows[0][0])

    async def feedback_of(self, node_id: str) -> list[OutcomeReport]:
        """The reports that are evidence on a node (unproven reports left out), in SQLite's index order."""
        return [
            OutcomeReport(*row)
            for row in await self._all(
                """SELECT solution_id, solution_revision, cluster, outcome, agent_id, created_at
               FROM feedback WHERE node_id = %s AND proof <> 'unproven'
               ORDER BY solution_id COLLATE "C", solution_revision, cluster COLLATE "C", created_at COLLATE "C", id""",
                (node_id,),
            )
        ]

    async def replace_stats(self, node_id: str, rows: Sequence[StatsRow]) -> None:
        await self._all("DELETE FROM node_stats WHERE node_id = %s", (node_id,))
        now = utc_now()
        await self._executemany(
            """INSERT INTO node_stats (node_id, solution_id, solution_revision, cluster, solved, failed, sample_size,
                   success_score, failure_state, answer_state, solved_agents, failed_agents, last_verified, updated_at)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
            [
                (
                    node_id,
                    r.solution_id,
                    r.solution_revision,
                    r.cluster,
                    r.solved,
                    r.failed,
                    r.sample_size,
                    r.success_score,
                    r.failure_state,
                    r.answer_state,
                    r.solved_agents,
                    r.failed_agents,
                    r.last_verified,
                    now,
                )
                for r in rows
            ],
        )

    async def open_failures(self, node_id: str) -> list[tuple[int, dict[str, Any]]]:
        """(id, environment) of the node's failed attempts not yet archived."""
        rows = await self._all(
            "SELECT id, environment FROM failures WHERE node_id = %s AND archived_at IS NULL ORDER BY id", (node_id,)
        )
        return [(row[0], json.loads(row[1])) for row in rows]

    async def archive_failures(self, ids: Sequence[int], revision_id: str) -> None:
        if ids:
            await self._all(
                "UPDATE failures SET archived_at = %s, archived_by = %s WHERE id = ANY(%s)",
                (utc_now(), revision_id, list(ids)),
            )

    async def count_write(self, subject: str, hour: str) -> int:
        """Count one accepted submission of `subject` in `hour` (older hours are forgotten); returns the hour's count."""
        rows = await self._all(
            """INSERT INTO write_counts (subject, hour, count) VALUES (%s, %s, 1)
               ON CONFLICT (subject, hour) DO UPDATE SET count = write_counts.count + 1 RETURNING count""",
            (subject, hour),
        )
        await self._all('DELETE FROM write_counts WHERE hour < %s COLLATE "C"', (hour,))
        return int(rows[0][0])

    async def dedupe_task(self, task_id: int) -> DedupeTask | None:
        """The node, candidate and status of one task."""
        rows = await self._all("SELECT node_id, candidate_id, status FROM dedupe_tasks WHERE id = %s", (task_id,))
        return DedupeTask(rows[0][0], rows[0][1], rows[0][2]) if rows else None

    async def dedupe_task_for(self, first: str, second: str) -> int | None:
        rows = await self._all(
            """SELECT id FROM dedupe_tasks WHERE (node_id = %s AND candidate_id = %s) OR (node_id = %s AND candidate_id = %s)
               ORDER BY id LIMIT 1""",
            (first, second, second, first),
        )
        return int(rows[0][0]) if rows else None

    async def insert_dedupe_task(
        self, node_id: str, candidate_id: str, reason: str | None, agent_id: str | None
    ) -> int:
        async with self._unique():
            rows = await self._all(
                """INSERT INTO dedupe_tasks (node_id, candidate_id, reason, created_by, status, created_at)
                   VALUES (%s, %s, %s, %s, 'open', %s) RETURNING id""",
                (node_id, candidate_id, reason, agent_id, utc_now()),
            )
        return int(rows[0][0])

    async def add_dedupe_vote(
        self, task_id: int, agent_id: str, proof: str, vote: str, canonical_id: str | None
    ) -> None:
        """Raises `DuplicateRow` when this agent (so proven) already voted on the task."""
        async with self._unique():
            await self._all(
                """INSERT INTO dedupe_votes (task_id, agent_id, proof, vote, canonical_id, created_at)
                   VALUES (%s, %s, %s, %s, %s, %s)""",
                (task_id, agent_id, proof, vote, canonical_id, utc_now()),
            )

    async def dedupe_votes(self, task_id: int) -> list[DedupeVote]:
        """A task's votes, oldest first."""
        return [
            DedupeVote(*r)
            for r in await self._all(
                """SELECT agent_id, vote, canonical_id, proof FROM dedupe_votes WHERE task_id = %s
               ORDER BY created_at COLLATE "C", agent_id COLLATE "C"
            """,
                (task_id,),
            )
        ]

    async def dedupe_canonical(self, task_id: int) -> str | None:
        """The node two `same` votes agreed to keep (set when the task was flagged)."""
        rows = await self._all("SELECT canonical_id FROM dedupe_tasks WHERE id = %s", (task_id,))
        return rows[0][0] if rows else None

    async def set_dedupe_status(self, task_id: int, status: str, canonical_id: str | None) -> None:
        await self._all(
            "UPDATE dedupe_tasks SET status = %s, canonical_id = %s WHERE id = %s", (status, canonical_id, task_id)
        )

    async def delete_meta(self, key: str) -> None:
        await self._all("DELETE FROM meta WHERE key = %s", (key,))

    async def set_meta(self, key: str, value: str) -> None:
        await self._all(
            "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    async def add_token(self, token_hash: str, agent_id: str, role: str) -> None:
        await self._all(
            "INSERT INTO agent_tokens (token_hash, agent_id, role, created_at) VALUES (%s, %s, %s, %s)",
            (token_hash, agent_id, role, utc_now()),
        )

    async def revoke_tokens(self, agent_id: str, token_id: str | None = None) -> int:
        cursor = await self.connection.execute(
            """UPDATE agent_tokens SET revoked_at = %s
               WHERE agent_id = %s AND revoked_at IS NULL AND (%s::text IS NULL OR substr(token_hash, 1, %s) = %s)""",
            (utc_now(), agent_id, token_id, TOKEN_ID_LENGTH, token_id),
        )
        return cursor.rowcount

    async def touch_token(self, token_hash: str, at: str) -> None:
        await self._all("UPDATE agent_tokens SET last_used_at = %s WHERE token_hash = %s", (at, token_hash))

    async def insert_maintainer_action(
        self, action: str, target: str, detail: dict[str, Any], note: str | None, maintainer_id: str, proof: str
    ) -> int:
        rows = await self._all(
            """INSERT INTO maintainer_actions (action, target, detail, note, maintainer_id, proof, created_at)
               VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id""",
            (
                action,
                target,
                json.dumps(detail, ensure_ascii=False, sort_keys=True),
                note,
                maintainer_id,
                proof,
                utc_now(),
            ),
        )
        return int(rows[0][0])

    async def issue_status(self, number: int) -> str | None:
        rows = await self._all("SELECT status FROM service_issues WHERE number = %s", (number,))
        return rows[0][0] if rows else None

    async def resolve_issue(self, number: int, status: str, resolution: dict[str, Any]) -> None:
        await self._all(
            "UPDATE service_issues SET status = %s, resolution = %s WHERE number = %s",
            (status, json.dumps(resolution, ensure_ascii=False, sort_keys=True), number),
        )

    async def insert_synced_feedback(self, rows: Sequence[dict[str, Any]]) -> int:
        """Feedback rows copied from a remote; one an agent already gave here is kept once. Returns how many."""
        return await self._executemany(
            f"""INSERT INTO feedback ({", ".join(FEEDBACK_COLUMNS)}) VALUES ({", ".join(["%s"] * len(FEEDBACK_COLUMNS))})
                ON CONFLICT DO NOTHING""",
            [[row[column] for column in FEEDBACK_COLUMNS] for row in rows],
        )
