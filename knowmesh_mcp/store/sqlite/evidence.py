"""Evidence, failed approaches, write limits, dedupe, service issues, tokens, meta, the review
queue, maintainer actions and health on SQLite.

`EvidenceReads` is mixed into `store.SqliteStore`, `EvidenceWrites` into `writer.SqliteWriter` (see
`nodes`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiosqlite

from knowmesh_mcp.core.identity import agent_object
from knowmesh_mcp.core.rows import (
    TOKEN_FIELDS,
    TOKEN_ID_LENGTH,
    DedupeTask,
    DedupeVote,
    LiveToken,
    OutcomeReport,
    ReviewRow,
    StatsRow,
)
from knowmesh_mcp.store.common import FEEDBACK_COLUMNS, STATS_COLUMNS, review_rows, utc_now
from knowmesh_mcp.store.sqlite.connection import unique_rule_as_duplicate
from knowmesh_mcp.store.sqlite.schema import migrations

# The current answer of a node: the stats row's solution revision is the one its current version publishes.
CURRENT_ANSWER = """json_extract(v.solution_revisions, '$."' || s.solution_id || '"') = s.solution_revision"""


class EvidenceReads:
    _fetchall: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # SqliteStore's

    async def get_meta(self, key: str) -> str | None:
        rows = await self._fetchall("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    # -- agent tokens ------------------------------------------------------------------------

    async def token(self, token_hash: str) -> LiveToken | None:
        """The agent, role and last use of a live (unrevoked) token."""
        rows = await self._fetchall(
            "SELECT agent_id, role, last_used_at FROM agent_tokens WHERE token_hash = ? AND revoked_at IS NULL",
            (token_hash,),
        )
        return LiveToken(rows[0][0], rows[0][1], rows[0][2]) if rows else None

    async def tokens(self) -> list[dict[str, Any]]:
        """Every token's id (the start of its hash), agent, role and dates, oldest first."""
        rows = await self._fetchall(
            """SELECT substr(token_hash, 1, ?), agent_id, role, created_at, last_used_at, revoked_at FROM agent_tokens
               ORDER BY created_at, agent_id, token_hash""",
            (TOKEN_ID_LENGTH,),
        )
        return [dict(zip(TOKEN_FIELDS, row)) for row in rows]

    # -- evidence ----------------------------------------------------------------------------

    async def stats_of(self, node_ids: Sequence[str]) -> dict[str, list[StatsRow]]:
        """{node id: its node_stats rows} (nodes without evidence are absent)."""
        if not node_ids:
            return {}
        marks = ",".join("?" * len(node_ids))
        found: dict[str, list[StatsRow]] = {}
        for row in await self._fetchall(
            f"SELECT node_id, {STATS_COLUMNS} FROM node_stats WHERE node_id IN ({marks})", list(node_ids)
        ):
            found.setdefault(row[0], []).append(StatsRow(*row[1:]))
        return found

    async def feedback_after(self, node_id: str, after: int, limit: int) -> list[dict[str, Any]]:
        """A node's feedback rows after id `after`, without the address hash: what a sync copies."""
        rows = await self._fetchall(
            f"SELECT id, {', '.join(FEEDBACK_COLUMNS)} FROM feedback WHERE node_id = ? AND id > ? ORDER BY id LIMIT ?",
            (node_id, after, limit),
        )
        return [{**dict(zip(("id", *FEEDBACK_COLUMNS), row)), "environment": json.loads(row[7])} for row in rows]

    async def failures_of(self, node_id: str) -> list[dict[str, Any]]:
        """Every failed attempt on a node, visible and archived, oldest first."""
        rows = await self._fetchall(
            """SELECT id, environment, cluster, summary, steps, reason, agent_id, model, created_at, archived_at, archived_by,
                      proof
               FROM failures WHERE node_id = ? ORDER BY id""",
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

    # -- review queue: each query returns (node id, title, current revision, solution id, solution
    # revision, cluster, report count), in the order an item of that reason should be handled.

    async def answers_in_state(self, failure_state: str, limit: int) -> list[ReviewRow]:
        """Current answers in `failure_state` in some cluster, most reports first."""
        return review_rows(
            await self._fetchall(
                f"""SELECT n.id, n.title, n.current_revision, s.solution_id, s.solution_revision, s.cluster, s.sample_size
                FROM node_stats s JOIN nodes n ON n.id = s.node_id JOIN node_versions v ON v.version = n.current_version
                WHERE s.failure_state = ? AND s.solution_id != '' AND s.cluster != '' AND {CURRENT_ANSWER}
                  AND n.status != 'deprecated'
                ORDER BY s.sample_size DESC, n.id LIMIT ?""",
                (failure_state, limit),
            )
        )

    async def unsolved_nodes(self, limit: int) -> list[ReviewRow]:
        return review_rows(
            await self._fetchall(
                """SELECT id, title, current_revision, NULL, NULL, NULL, 0 FROM nodes
               WHERE has_answer = 0 AND status != 'deprecated' ORDER BY created_at, id LIMIT ?""",
                (limit,),
            )
        )

    async def failures_after_edit(self, limit: int) -> list[ReviewRow]:
        """Failure reports newer than the article's current revision: nobody acted on them yet."""
        return review_rows(
            await self._fetchall(
                """SELECT n.id, n.title, n.current_revision, f.solution_id, f.solution_revision, f.cluster, count(*)
               FROM feedback f JOIN nodes n ON n.id = f.node_id
               WHERE f.outcome IN ('failed', 'dangerous') AND f.created_at > n.updated_at AND n.status != 'deprecated'
               GROUP BY n.id, f.solution_id, f.solution_revision, f.cluster
               ORDER BY count(*) DESC, n.id LIMIT ?""",
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
               WHERE n.has_answer = 1 AND n.status != 'deprecated' AND (s.last_verified IS NULL OR s.last_verified < ?)
               ORDER BY n.id LIMIT ?""",
                (before, limit),
            )
        )

    async def awaiting_second_verification(self, before: str, limit: int) -> list[ReviewRow]:
        """Current answers, published before `before`, with exactly one independent solved report."""
        return review_rows(
            await self._fetchall(
                f"""SELECT n.id, n.title, n.current_revision, s.solution_id, s.solution_revision, NULL, s.sample_size
                FROM node_stats s JOIN nodes n ON n.id = s.node_id JOIN node_versions v ON v.version = n.current_version
                WHERE s.cluster = '' AND s.solution_id != '' AND s.solved_agents = 1 AND n.updated_at < ?
                  AND {CURRENT_ANSWER} AND n.status != 'deprecated'
                ORDER BY n.id LIMIT ?""",
                (before, limit),
            )
        )

    # -- dedupe, issues, the audit log --------------------------------------------------------

    async def dedupe_tasks(self, status: str | None, limit: int) -> list[dict[str, Any]]:
        rows = await self._fetchall(
            """SELECT t.id, t.node_id, t.candidate_id, t.reason, t.status, t.canonical_id, t.created_at,
                      (SELECT count(*) FROM dedupe_votes v WHERE v.task_id = t.id AND v.vote = 'same'),
                      (SELECT count(*) FROM dedupe_votes v WHERE v.task_id = t.id AND v.vote = 'different')
               FROM dedupe_tasks t WHERE (:status IS NULL OR t.status = :status) ORDER BY t.id LIMIT :limit""",
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
               WHERE (:number IS NULL OR number = :number) ORDER BY number DESC LIMIT :limit""",
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
               WHERE (:target IS NULL OR target = :target) AND id > :after ORDER BY id LIMIT :limit""",
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

    # -- health ------------------------------------------------------------------------------

    async def health_facts(self) -> dict[str, Any]:
        """What `doctor` and GET /v1/health report: versions, counts, tokens, syncs, integrity.

        A damaged file is what this report is for, so no read here may fail it: the integrity
        check comes first, and a fact whose pages cannot be read is left at its empty value and
        named in `unreadable` (fact: SQLite's error) instead of raising. That key is there only
        when something could not be read: a sound mesh's facts are the same on both backends.
        """
        try:
            ((integrity,),) = await self._fetchall("PRAGMA quick_check(1)")
            # "*** in database main ***\nPage 760: btreeInitPage() returns error code 11": one line, for doctor's
            integrity = " ".join(line for line in str(integrity).splitlines() if not line.startswith("***"))
        except sqlite3.DatabaseError as error:  # damage the check itself trips over (e.g. the schema's pages)
            integrity = str(error)
        unreadable: dict[str, str] = {}

        async def fact(name: str, sql: str) -> list[tuple[Any, ...]]:
            try:
                return await self._fetchall(sql)
            except sqlite3.DatabaseError as error:
                unreadable[name] = str(error)
                return []

        schema = await fact("schema version", "SELECT coalesce(max(version), 0) FROM schema_migrations")
        nodes = await fact("node count", "SELECT count(*) FROM nodes")
        indexed = await fact("search index's node count", "SELECT count(*) FROM node_index")
        tokens = dict(
            await fact("tokens", "SELECT role, count(*) FROM agent_tokens WHERE revoked_at IS NULL GROUP BY role")
        )
        syncs = await fact("syncs", "SELECT remote, synced_at FROM sync_state ORDER BY remote")
        meta = dict(
            await fact(
                "index versions",
                "SELECT key, value FROM meta WHERE key IN ('normalizer_version', 'search_index_version')",
            )
        )
        return {
            "schema_version": int(schema[0][0]) if schema else 0,
            "latest_schema_version": max(migration.number for migration in migrations()),
            "backend": "sqlite",
            "nodes": int(nodes[0][0]) if nodes else 0,
            "indexed_nodes": int(indexed[0][0]) if indexed else 0,
            "tokens": {"agent": int(tokens.get("agent", 0)), "maintainer": int(tokens.get("maintainer", 0))},
            "syncs": [{"remote": remote, "synced_at": at} for remote, at in syncs],
            "integrity": integrity,
            "normalizer_version": meta.get("normalizer_version"),
            "search_index_version": meta.get("search_index_version"),
            **({"unreadable": unreadable} if unreadable else {}),
        }


class EvidenceWrites:
    connection: aiosqlite.Connection
    _all: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # SqliteWriter's

    async def insert_row(self, table: str, row: dict[str, Any]) -> int:
        """INSERT one row given as {column: value} into one of our tables; returns its rowid.

        `table` and the column names are the caller's constants, never request data; values are
        bound parameters. A unique-index conflict raises `DuplicateRow`.
        """
        columns = ", ".join(row)
        marks = ", ".join("?" * len(row))
        with unique_rule_as_duplicate():
            cursor = await self.connection.execute(
                f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(row.values())
            )
        return int(cursor.lastrowid or 0)

    async def feedback_of(self, node_id: str) -> list[OutcomeReport]:
        """The reports that are evidence on a node; the voter is None for an anonymous one (a personal
        mesh's rule). Unproven reports (no token, on a server with auth on) are left out: kept and
        listed, they move no state at all, or one forged `solved` could show a known_failed answer again."""
        return [
            OutcomeReport(*row)
            for row in await self._all(
                """SELECT solution_id, solution_revision, cluster, outcome, agent_id, created_at
               FROM feedback WHERE node_id = ? AND proof <> 'unproven'""",
                (node_id,),
            )
        ]

    async def replace_stats(self, node_id: str, rows: Sequence[StatsRow]) -> None:
        await self.connection.execute("DELETE FROM node_stats WHERE node_id = ?", (node_id,))
        await self.connection.executemany(
            """INSERT INTO node_stats (node_id, solution_id, solution_revision, cluster, solved, failed, sample_size,
                   success_score, failure_state, answer_state, solved_agents, failed_agents, last_verified, updated_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
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
                    utc_now(),
                )
                for r in rows
            ],
        )

    async def open_failures(self, node_id: str) -> list[tuple[int, dict[str, Any]]]:
        """(id, environment) of the node's failed attempts not yet archived."""
        rows = await self._all(
            "SELECT id, environment FROM failures WHERE node_id = ? AND archived_at IS NULL", (node_id,)
        )
        return [(row[0], json.loads(row[1])) for row in rows]

    async def archive_failures(self, ids: Sequence[int], revision_id: str) -> None:
        await self.connection.executemany(
            "UPDATE failures SET archived_at = ?, archived_by = ? WHERE id = ?",
            [(utc_now(), revision_id, failure_id) for failure_id in ids],
        )

    async def count_write(self, subject: str, hour: str) -> int:
        """Count one accepted submission of `subject` in `hour` (older hours are forgotten); returns the hour's count."""
        rows = await self._all(
            """INSERT INTO write_counts (subject, hour, count) VALUES (?, ?, 1)
               ON CONFLICT (subject, hour) DO UPDATE SET count = count + 1 RETURNING count""",
            (subject, hour),
        )
        await self.connection.execute("DELETE FROM write_counts WHERE hour < ?", (hour,))
        return int(rows[0][0])

    # -- dedupe ------------------------------------------------------------------------------

    async def dedupe_task(self, task_id: int) -> DedupeTask | None:
        """The node, candidate and status of one task."""
        rows = await self._all("SELECT node_id, candidate_id, status FROM dedupe_tasks WHERE id = ?", (task_id,))
        return DedupeTask(rows[0][0], rows[0][1], rows[0][2]) if rows else None

    async def dedupe_task_for(self, first: str, second: str) -> int | None:
        rows = await self._all(
            "SELECT id FROM dedupe_tasks WHERE (node_id = ? AND candidate_id = ?) OR (node_id = ? AND candidate_id = ?)",
            (first, second, second, first),
        )
        return int(rows[0][0]) if rows else None

    async def insert_dedupe_task(
        self, node_id: str, candidate_id: str, reason: str | None, agent_id: str | None
    ) -> int:
        """Raises `DuplicateRow` when the pair already has a task."""
        with unique_rule_as_duplicate():
            cursor = await self.connection.execute(
                """INSERT INTO dedupe_tasks (node_id, candidate_id, reason, created_by, status, created_at)
                   VALUES (?, ?, ?, ?, 'open', ?)""",
                (node_id, candidate_id, reason, agent_id, utc_now()),
            )
        return int(cursor.lastrowid or 0)

    async def add_dedupe_vote(
        self, task_id: int, agent_id: str, proof: str, vote: str, canonical_id: str | None
    ) -> None:
        """Raises `DuplicateRow` when this agent (so proven) already voted on the task."""
        with unique_rule_as_duplicate():
            await self.connection.execute(
                """INSERT INTO dedupe_votes (task_id, agent_id, proof, vote, canonical_id, created_at)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                (task_id, agent_id, proof, vote, canonical_id, utc_now()),
            )

    async def dedupe_votes(self, task_id: int) -> list[DedupeVote]:
        """A task's votes, oldest first."""
        return [
            DedupeVote(*r)
            for r in await self._all(
                """SELECT agent_id, vote, canonical_id, proof FROM dedupe_votes WHERE task_id = ?
               ORDER BY created_at, agent_id""",
                (task_id,),
            )
        ]

    async def dedupe_canonical(self, task_id: int) -> str | None:
        """The node two `same` votes agreed to keep (set when the task was flagged)."""
        rows = await self._all("SELECT canonical_id FROM dedupe_tasks WHERE id = ?", (task_id,))
        return rows[0][0] if rows else None

    async def set_dedupe_status(self, task_id: int, status: str, canonical_id: str | None) -> None:
        await self.connection.execute(
            "UPDATE dedupe_tasks SET status = ?, canonical_id = ? WHERE id = ?", (status, canonical_id, task_id)
        )

    # -- meta --------------------------------------------------------------------------------

    async def delete_meta(self, key: str) -> None:
        await self.connection.execute("DELETE FROM meta WHERE key = ?", (key,))

    async def set_meta(self, key: str, value: str) -> None:
        await self.connection.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- agent tokens ------------------------------------------------------------------------

    async def add_token(self, token_hash: str, agent_id: str, role: str) -> None:
        await self.connection.execute(
            "INSERT INTO agent_tokens (token_hash, agent_id, role, created_at) VALUES (?, ?, ?, ?)",
            (token_hash, agent_id, role, utc_now()),
        )

    async def revoke_tokens(self, agent_id: str, token_id: str | None = None) -> int:
        cursor = await self.connection.execute(
            """UPDATE agent_tokens SET revoked_at = ?
               WHERE agent_id = ? AND revoked_at IS NULL AND (? IS NULL OR substr(token_hash, 1, ?) = ?)""",
            (utc_now(), agent_id, token_id, TOKEN_ID_LENGTH, token_id),
        )
        return cursor.rowcount

    async def touch_token(self, token_hash: str, at: str) -> None:
        await self.connection.execute("UPDATE agent_tokens SET last_used_at = ? WHERE token_hash = ?", (at, token_hash))

    # -- maintainers and issues --------------------------------------------------------------

    async def insert_maintainer_action(
        self, action: str, target: str, detail: dict[str, Any], note: str | None, maintainer_id: str, proof: str
    ) -> int:
        cursor = await self.connection.execute(
            """INSERT INTO maintainer_actions (action, target, detail, note, maintainer_id, proof, created_at)
               VALUES (?, ?, ?, ?, ?, ?, ?)""",
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
        return int(cursor.lastrowid or 0)

    async def issue_status(self, number: int) -> str | None:
        rows = await self._all("SELECT status FROM service_issues WHERE number = ?", (number,))
        return rows[0][0] if rows else None

    async def resolve_issue(self, number: int, status: str, resolution: dict[str, Any]) -> None:
        await self.connection.execute(
            "UPDATE service_issues SET status = ?, resolution = ? WHERE number = ?",
            (status, json.dumps(resolution, ensure_ascii=False, sort_keys=True), number),
        )

    # -- sync --------------------------------------------------------------------------------

    async def insert_synced_feedback(self, rows: Sequence[dict[str, Any]]) -> int:
        """Feedback rows copied from a remote; one an agent already gave here is kept once. Returns how many."""
        before = self.connection.total_changes
        await self.connection.executemany(
            f"INSERT OR IGNORE INTO feedback ({', '.join(FEEDBACK_COLUMNS)}) VALUES ({', '.join('?' * len(FEEDBACK_COLUMNS))})",
            [[row[column] for column in FEEDBACK_COLUMNS] for row in rows],
        )
        return self.connection.total_changes - before
