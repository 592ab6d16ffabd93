"""The SQLite backend, the embedded default: connections, migrations, and the SQL of every table.

One writer connection guarded by an asyncio lock (every write is one `BEGIN IMMEDIATE`
transaction; `busy_timeout` covers other processes) and one reader connection, both in
WAL mode so reads never wait for writes. All SQL of the package lives here and in the
migrations; callers get plain rows back and never build SQL themselves.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiosqlite

from knowmesh_mcp.core.errors import DatabaseUnusable, KnowmeshError, database_busy, read_only_database, storage_full
from knowmesh_mcp.core.identity import agent_object
from knowmesh_mcp.core.rows import (
    TOKEN_FIELDS,
    TOKEN_ID_LENGTH,
    CandidateText,
    DuplicateRow,
    Edit,
    Frequencies,
    NewNode,
    NodeRow,
    RevisionRow,
    SearchRow,
    StatsRow,
    SyncedHead,
    SyncedRevision,
    TermQuery,
)
from knowmesh_mcp.store.interface import STARTER_CORPUS, CopiedTable, copied_table
from knowmesh_mcp.store.shared import (
    CandidateTexts,
    DuplicateLookup,
    counted_keys,
    fold_channel_rows,
    listing_conditions,
    row_keys,
    term_count_delta,
)

BUSY_TIMEOUT_MS = 10_000


@contextmanager
def unique_rule_as_duplicate() -> Iterator[None]:
    """sqlite3's unique-constraint error as the backend-neutral `DuplicateRow` (other integrity errors stay)."""
    try:
        yield
    except sqlite3.IntegrityError as error:
        if "UNIQUE" not in str(error):
            raise
        raise DuplicateRow(str(error)) from None


def store_dir() -> Path:
    """The `store/` folder of SQL and data: inside the wheel as `knowmesh_mcp/_store`, beside the
    package in a checkout."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_store"
    return packaged if packaged.is_dir() else package.parent / "store"


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def split_sql(script: str) -> list[str]:
    """Split a migration into statements (triggers included) so it can run inside one transaction."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


def read_migrations(folder: Path) -> list[tuple[int, str, str]]:
    """(number, name, sql) of every NNNN_name.sql file in `folder`, in order."""
    found = []
    for path in sorted(folder.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        number, _, name = path.stem.partition("_")
        found.append((int(number), name, path.read_text(encoding="utf-8")))
    return found


def migrations() -> list[tuple[int, str, str]]:
    """The SQLite migrations, store/migrations."""
    return read_migrations(store_dir() / "migrations")


MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""


NODE_COLUMNS = """n.pk, n.id, n.ecosystem, n.status, n.title, n.current_version, n.current_revision,
    n.has_answer, n.created_at, n.updated_at, v.document, v.solution_revisions"""


def _node_row(row: Sequence[Any]) -> NodeRow:
    return NodeRow(
        pk=row[0],
        id=row[1],
        ecosystem=row[2],
        status=row[3],
        title=row[4],
        version=row[5],
        revision=row[6],
        has_answer=bool(row[7]),
        created_at=row[8],
        updated_at=row[9],
        document=json.loads(row[10]),
        solution_revisions=json.loads(row[11]),
        document_size=len(row[10]),
    )


STATS_COLUMNS = """solution_id, solution_revision, cluster, solved, failed, sample_size, success_score,
    failure_state, answer_state, solved_agents, failed_agents, last_verified"""
# A node's node_stats rows as one JSON array of arrays (STATS_COLUMNS order); `{where}` narrows the rows of node `n`.
STATS_JSON = (
    f"""(SELECT json_group_array(json_array({STATS_COLUMNS})) FROM node_stats s WHERE s.node_id = n.id{{where}})"""
)


def _stats_rows(stats_json: str) -> list[StatsRow]:
    """The StatsRows of one STATS_JSON value."""
    return [StatsRow(*values) for values in json.loads(stats_json)]


CANDIDATE_COLUMNS = (
    "i.node_pk, n.id, n.ecosystem, i.title_terms, s.signature, s.article, i.templates, "
    "i.template_terms, i.slug_terms, i.value_terms, i.value_shapes"
)


# FTS5 table and ranking of each TermQuery.table: title and signature weigh more than the article.
_TERM_TABLES = {
    "search": ("node_search", "bm25(node_search, 10.0, 5.0, 1.0)"),
    "heads": ("node_heads", "bm25(node_heads, 2.0, 1.0)"),
    "grams": ("node_grams", "bm25(node_grams)"),
}


def fts_quote(term: str) -> str:
    """One FTS5 string: node text and queries never reach MATCH as syntax."""
    return '"' + term.replace('"', '""') + '"'


def fts_any(terms: Sequence[str]) -> str:
    return " OR ".join(map(fts_quote, terms))


def fts_every(terms: Sequence[str]) -> str:
    return " AND ".join(map(fts_quote, terms))


# Every node write moves the node to the end of the change feed (the sync cursor's order).
NEXT_CHANGE_SEQ = "(SELECT coalesce(max(change_seq), 0) + 1 FROM nodes)"

# Feedback as it travels between meshes: everything but the local id and the address hash.
FEEDBACK_COLUMNS = (
    "node_id",
    "node_version",
    "solution_id",
    "solution_revision",
    "outcome",
    "cluster",
    "environment",
    "agent_id",
    "model",
    "reason",
    "note",
    "evidence_hash",
    "exit_code",
    "created_at",
    "proof",
)

REVISION_COLUMNS = """revision_id, node_id, revision, parent_revision, kind, version, agent_id, model, summary,
    changes, reverts_revision_id, created_at, agent_proof"""


def _revision_row(row: Sequence[Any]) -> RevisionRow:
    return RevisionRow(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        row[5],
        row[6],
        row[7],
        row[8],
        json.loads(row[9]),
        row[10],
        row[11],
        row[12],
    )


REVISIONS_WITH_DOCUMENTS = f"""SELECT {", ".join("r." + c.strip() for c in REVISION_COLUMNS.split(","))},
        v.document, v.solution_revisions
    FROM article_revisions r JOIN node_versions v ON v.version = r.version
    WHERE r.node_id = ? AND r.revision > ? ORDER BY r.revision"""


def _revision_with_document(row: Sequence[Any]) -> tuple[RevisionRow, dict[str, Any], dict[str, int]]:
    return _revision_row(row[:13]), json.loads(row[13]), json.loads(row[14])


# -- copying a whole mesh (`copying`): whole rows of the allow-listed `interface.COPIED_TABLES` ---------
# Table and column names come from that constant only; values are bound parameters.


def copy_select(
    table: CopiedTable, after: Sequence[Any] | None, until: Sequence[Any] | None, keys: str, mark: str
) -> tuple[str, list[Any]]:
    """SELECT of `table`'s rows with (`keys`) > `after` and <= `until`, in key order; LIMIT is the last parameter."""
    marks = ", ".join([mark] * len(table.key))
    where, params = [], []
    if after is not None:
        where.append(f"({keys}) > ({marks})")
        params += list(after)
    if until is not None:
        where.append(f"({keys}) <= ({marks})")
        params += list(until)
    sql = (
        f"SELECT {', '.join(table.columns)} FROM {table.name}"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + f" ORDER BY {keys} LIMIT {mark}"
    )
    return sql, params


def copy_update(table: CopiedTable, rows: Sequence[Sequence[Any]], mark: str) -> tuple[str, list[list[Any]]]:
    """UPDATE of `table`'s mutable columns by key, and the parameters of each whole row."""
    if not table.mutable:
        raise ValueError(f"{table.name} rows never change")
    position = {column: index for index, column in enumerate(table.columns)}
    sql = (
        f"UPDATE {table.name} SET {', '.join(f'{c} = {mark}' for c in table.mutable)} "
        f"WHERE {' AND '.join(f'{k} = {mark}' for k in table.key)}"
    )
    return sql, [[row[position[c]] for c in (*table.mutable, *table.key)] for row in rows]


async def select_in(
    fetch: Callable[[str, Sequence[Any]], Awaitable[list[sqlite3.Row]]],
    sql: str,
    values: Iterable[Any],
    before: Sequence[Any] = (),
) -> list[sqlite3.Row]:
    """`sql` with one `IN ({marks})` over `values` (after the `before` parameters), run in chunks
    under SQLite's variable limit."""
    values = list(values)
    rows: list[sqlite3.Row] = []
    for start in range(0, len(values), 500):
        chunk = values[start : start + 500]
        rows += await fetch(sql.format(marks=",".join("?" * len(chunk))), [*before, *chunk])
    return rows


class Writer(DuplicateLookup):
    """The SQL of one write transaction. Only `Store.write()` makes one."""

    def __init__(self, connection: aiosqlite.Connection):
        self.connection = connection
        self.indexed_rows = 0  # nodes whose search-index rows this transaction wrote (see `Store.bulk_import`)

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return list(await self.connection.execute_fetchall(sql, params))

    async def node_for_edit(self, node_id: str) -> tuple[int, dict[str, Any], str] | None:
        """(current revision, current document, status) read inside the write transaction."""
        rows = await self._all(
            """SELECT n.current_revision, v.document, n.status FROM nodes n
               JOIN node_versions v ON v.version = n.current_version WHERE n.id = ?""",
            (node_id,),
        )
        return (rows[0][0], json.loads(rows[0][1]), rows[0][2]) if rows else None

    async def revisions_after(self, node_id: str, revision: int) -> list[RevisionRow]:
        rows = await self._all(
            f"SELECT {REVISION_COLUMNS} FROM article_revisions WHERE node_id = ? AND revision > ? ORDER BY revision",
            (node_id, revision),
        )
        return [_revision_row(row) for row in rows]

    async def revision(self, revision_id: str) -> RevisionRow | None:
        rows = await self._all(
            f"SELECT {REVISION_COLUMNS} FROM article_revisions WHERE revision_id = ?", (revision_id,)
        )
        return _revision_row(rows[0]) if rows else None

    async def solution_behaviours(self, node_id: str) -> dict[str, dict[str, int]]:
        """{solution id: {behaviour hash: revision}} of every behaviour a solution ever had."""
        known: dict[str, dict[str, int]] = {}
        for solution_id, digest, revision in await self._all(
            "SELECT solution_id, behavior_hash, revision FROM solution_revisions WHERE node_id = ?", (node_id,)
        ):
            known.setdefault(solution_id, {})[digest] = revision
        return known

    async def undo_token(self, revision_id: str) -> tuple[str, str | None] | None:
        """(token hash, used_at) of a revision's undo token."""
        rows = await self._all("SELECT token_hash, used_at FROM undo_tokens WHERE revision_id = ?", (revision_id,))
        return (rows[0][0], rows[0][1]) if rows else None

    async def spend_undo_token(self, revision_id: str) -> bool:
        """Mark a token used; False when another undo spent it first."""
        cursor = await self.connection.execute(
            "UPDATE undo_tokens SET used_at = ? WHERE revision_id = ? AND used_at IS NULL", (utc_now(), revision_id)
        )
        return cursor.rowcount == 1

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

    async def feedback_of(self, node_id: str) -> list[tuple[str, int, str, str, str | None, str]]:
        """(solution id, revision, cluster, outcome, voter, created_at) of the reports that are
        evidence on a node; the voter is None for an anonymous one (a personal mesh's rule). Unproven
        reports (no token, on a server with auth on) are left out: kept and listed, they move no
        state at all, or one forged `solved` could show a known_failed answer again."""
        return [
            tuple(row)
            for row in await self._all(  # type: ignore[misc]
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

    async def dedupe_task(self, task_id: int) -> tuple[str, str, str] | None:
        """(node, candidate, status) of one task."""
        rows = await self._all("SELECT node_id, candidate_id, status FROM dedupe_tasks WHERE id = ?", (task_id,))
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

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

    async def dedupe_votes(self, task_id: int) -> list[tuple[str, str, str | None, str]]:
        """(agent id, vote, canonical id, proof) of a task's votes, oldest first."""
        return [
            tuple(r)
            for r in await self._all(  # type: ignore[misc]
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

    async def set_node_status(self, node_id: str, status: str) -> None:
        """A maintainer's status change; the node moves to the end of the change feed."""
        await self.connection.execute(
            f"UPDATE nodes SET status = ?, change_seq = {NEXT_CHANGE_SEQ} WHERE id = ?", (status, node_id)
        )

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

    async def issue_status(self, number: int) -> str | None:
        rows = await self._all("SELECT status FROM service_issues WHERE number = ?", (number,))
        return rows[0][0] if rows else None

    async def resolve_issue(self, number: int, status: str, resolution: dict[str, Any]) -> None:
        await self.connection.execute(
            "UPDATE service_issues SET status = ?, resolution = ? WHERE number = ?",
            (status, json.dumps(resolution, ensure_ascii=False, sort_keys=True), number),
        )

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

    async def _all_in(self, sql: str, values: Iterable[Any]) -> list[sqlite3.Row]:
        return await select_in(self._all, sql, values)

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

    async def duplicates_of(self, keys: Iterable[tuple[str, Sequence[str]]]) -> dict[tuple[str, tuple[str, ...]], str]:
        wanted = list(dict.fromkeys((digest, tuple(values)) for digest, values in keys))
        rows = await self._all(
            """SELECT k.key, (SELECT min(n.id) FROM nodes n WHERE n.signature_hash = json_extract(k.value, '$[0]')
                                                            AND n.quoted_values = json_extract(k.value, '$[1]'))
               FROM json_each(?) AS k""",
            (json.dumps([[digest, json.dumps(list(values), ensure_ascii=False)] for digest, values in wanted]),),
        )
        return {wanted[int(index)]: node_id for index, node_id in rows if node_id is not None}

    async def insert_nodes(self, nodes: Sequence[NewNode]) -> None:
        """Insert new nodes with their first version, revision 1, solution revisions and index rows."""
        if not nodes:
            return
        now = utc_now()
        async with self.connection.execute("SELECT coalesce(max(change_seq), 0) FROM nodes") as cursor:
            (last_seq,) = await cursor.fetchone()  # type: ignore[misc]
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

    async def write_search_rows(self, rows: Sequence[tuple[str, SearchRow]], *, fresh: bool = False) -> None:
        """(Re)write the index rows of existing nodes; `fresh` nodes have none to remove first."""
        if not rows:
            return
        self.indexed_rows += len(rows)
        pks = await self._pks([node_id for node_id, _ in rows])
        removed = []
        if not fresh:
            removed = [
                counted_keys(*row)
                for row in await self._all_in(
                    """SELECT s.title, s.signature, s.article, g.templates FROM node_search s
                   JOIN node_grams g ON g.rowid = s.rowid WHERE s.rowid IN ({marks})""",
                    [pks[i] for i, _ in rows],
                )
            ]
            for table, column in (
                ("node_search", "rowid"),
                ("node_heads", "rowid"),
                ("node_grams", "rowid"),
                ("node_signatures", "node_pk"),
                ("node_index", "node_pk"),
            ):
                await self.connection.executemany(
                    f"DELETE FROM {table} WHERE {column} = ?", [(pks[i],) for i, _ in rows]
                )
        await self._count_terms(term_count_delta(removed, (row_keys(r) for _, r in rows)))
        await self.connection.executemany(
            "INSERT INTO node_search (rowid, title, signature, article) VALUES (?, ?, ?, ?)",
            [(pks[i], r.title, r.signature, r.article) for i, r in rows],
        )
        await self.connection.executemany(
            "INSERT INTO node_heads (rowid, title, signature) VALUES (?, ?, ?)",
            [(pks[i], r.title, r.signature) for i, r in rows],
        )
        await self.connection.executemany(
            "INSERT INTO node_grams (rowid, templates) VALUES (?, ?)", [(pks[i], r.grams) for i, r in rows]
        )
        await self.connection.executemany(
            """INSERT OR IGNORE INTO node_signatures (hash, node_pk, source, quoted_values, specific)
               SELECT ?, pk, ?, quoted_values, ? FROM nodes WHERE pk = ?""",
            [(digest, source, int(r.specific), pks[i]) for i, r in rows for digest, source in r.signature_hashes],
        )
        await self.connection.executemany(
            """INSERT INTO node_index (node_pk, templates, title_terms, template_terms, slug_terms, value_terms,
                                       value_shapes)
               VALUES (?, ?, ?, ?, ?, ?, ?)""",
            [
                (pks[i], r.template, r.title, r.template_terms, r.slug_terms, r.value_terms, r.value_shapes)
                for i, r in rows
            ],
        )

    async def _optimize_search_tables(self) -> None:
        """Merge each FTS5 table's segments into one b-tree (FTS5's 'optimize'): the same rows, but a
        term's doclist is read from one segment instead of a dozen (see `Store.bulk_import`)."""
        for table, _ in _TERM_TABLES.values():
            await self.connection.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")

    async def _count_terms(self, delta: Counter[tuple[str, str]]) -> None:
        """Apply document-frequency changes to term_counts; counts that reach 0 are removed."""
        up = [(kind, term, n) for (kind, term), n in sorted(delta.items()) if n > 0]
        down = [(n, kind, term) for (kind, term), n in sorted(delta.items()) if n < 0]
        if up:
            await self.connection.executemany(
                """INSERT INTO term_counts (kind, term, doc) VALUES (?, ?, ?)
                   ON CONFLICT (kind, term) DO UPDATE SET doc = doc + excluded.doc""",
                up,
            )
        if down:  # an edit's rows mostly keep their terms: nothing to count down, no round trips
            await self.connection.executemany(
                "UPDATE term_counts SET doc = max(doc + ?, 0) WHERE kind = ? AND term = ?", down
            )
            await self.connection.executemany(
                "DELETE FROM term_counts WHERE kind = ? AND term = ? AND doc = 0",
                [(kind, term) for _, kind, term in down],
            )

    async def _pks(self, ids: Sequence[str]) -> dict[str, int]:
        return {row[0]: row[1] for row in await self._all_in("SELECT id, pk FROM nodes WHERE id IN ({marks})", ids)}

    async def delete_meta(self, key: str) -> None:
        await self.connection.execute("DELETE FROM meta WHERE key = ?", (key,))

    async def set_meta(self, key: str, value: str) -> None:
        await self.connection.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
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

    # -- sync -------------------------------------------------------------------------------

    async def revisions_with_documents(
        self, node_id: str, after: int = 0
    ) -> list[tuple[RevisionRow, dict[str, Any], dict[str, int]]]:
        return [_revision_with_document(row) for row in await self._all(REVISIONS_WITH_DOCUMENTS, (node_id, after))]

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

    async def insert_synced_feedback(self, rows: Sequence[dict[str, Any]]) -> int:
        """Feedback rows copied from a remote; one an agent already gave here is kept once. Returns how many."""
        before = self.connection.total_changes
        await self.connection.executemany(
            f"INSERT OR IGNORE INTO feedback ({', '.join(FEEDBACK_COLUMNS)}) VALUES ({', '.join('?' * len(FEEDBACK_COLUMNS))})",
            [[row[column] for column in FEEDBACK_COLUMNS] for row in rows],
        )
        return self.connection.total_changes - before

    async def touch_node(self, node_id: str) -> None:
        """Move a node to the end of the change feed (new evidence), leaving its content alone."""
        await self.connection.execute(f"UPDATE nodes SET change_seq = {NEXT_CHANGE_SEQ} WHERE id = ?", (node_id,))

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

    async def set_signature_hashes(self, hashes: Iterable[tuple[str, str]]) -> None:
        """(signature_hash, node_id) pairs, for recomputing derived hashes after a normalizer change."""
        await self.connection.executemany("UPDATE nodes SET signature_hash = ? WHERE id = ?", list(hashes))


class Store:
    """An open knowmesh database."""

    shared = False  # one process serves a SQLite file

    def __init__(
        self,
        path: str,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        created: bool,
        *,
        read_only: bool = False,
    ):
        self.path = path
        self.created = created  # True when this open made the database (a copy refuses such a source)
        self.read_only = read_only  # a file this process may only read: opened read-only, every write refused
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self.write_generation = 0  # bumped by every write transaction; caches of derived counts check it
        # ((data version, write generation), {(vocabulary, term): nodes holding it}): see document_frequencies
        self._frequencies: tuple[tuple[int, int], dict[tuple[str, str], int]] = ((-1, -1), {})
        self._candidate_texts = CandidateTexts()
        self._bulk_indexed: int | None = None  # inside `bulk_import`: index rows its transactions wrote

    @classmethod
    async def open(cls, path: str | Path) -> Store:
        """Open a knowmesh database, creating and migrating it if it is new.

        The folder must exist (callers create their default location themselves). A path
        that is not a database, a SQLite database of another application, or a file that
        cannot be read raises `DatabaseUnusable` before anything is written, and no
        connection (nor its thread) outlives a failed open. A mesh this process may read
        but not write (a read-only file, folder or mount) opens read-only: searches and
        reads work, every write is `read_only_database`.
        """
        path = str(path)
        writable = True
        if path != ":memory:":
            path = str(Path(path).expanduser())
            writable = check_database_file(path)
        opened: list[aiosqlite.Connection] = []
        try:
            writer = await _connect(path, identify=True, read_only=not writable)
            opened.append(writer)
            created = await _migrate(writer) if writable else await _check_migrated(writer, path)
            reader = await _connect(path, read_only=not writable) if path != ":memory:" else writer
        except BaseException as error:
            for connection in reversed(opened):
                await _discard(connection)
            if isinstance(error, sqlite3.Error):
                raise _unusable(path, error) from error
            raise
        return cls(path, writer, reader, created, read_only=not writable)

    async def close(self) -> None:
        if self._reader is not self._writer:
            await self._reader.close()
        await self._writer.close()

    @asynccontextmanager
    async def bulk_import(self) -> AsyncIterator[None]:
        """FTS5 merges its segments as it goes, but leaves a dozen a table after a big import, and a
        search reads each term from each of them. An import that wrote the index rows of at least
        a quarter of the mesh's nodes (a rebuild writes them all) then merges every search table
        into one segment, in one more write transaction (3.2 s at 100,000 nodes, against 215 s for
        their import; channel statements then took 4.31 against 5.04 ms, the same rows). A small
        import into a big mesh is not worth rewriting the whole index for."""
        self._bulk_indexed = 0
        try:
            yield
        finally:
            written, self._bulk_indexed = self._bulk_indexed, None
        if written and 4 * written >= await self.indexed_node_count():
            async with self.write() as tx:
                await tx._optimize_search_tables()  # backend-own upkeep, not in the interface

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Writer]:
        """One `BEGIN IMMEDIATE` transaction: all of it commits, or none of it does.

        A full disk (507 storage_full) and a database that may only be read (403 read_only_database)
        are named errors, not a 500 with a traceback. A failed COMMIT is rolled back too: SQLite
        rolls a transaction back by itself on SQLITE_FULL at COMMIT, and may not on other errors.
        """
        if self.read_only:
            raise read_only_database()
        async with self._write_lock:
            try:
                await self._writer.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                if _is_busy(error):  # past busy_timeout: another process holds the file's write lock
                    raise database_busy() from error
                fault = _write_fault(error, self.path)
                if fault is None:
                    raise
                raise fault from error
            writer = Writer(self._writer)
            try:
                yield writer
                await self._writer.execute("COMMIT")
            except BaseException as error:
                if self._writer.in_transaction:  # not after SQLite rolled it back itself
                    await self._writer.execute("ROLLBACK")
                fault = _write_fault(error, self.path)
                if fault is not None:
                    raise fault from error
                raise
            self.write_generation += 1
            if self._bulk_indexed is not None:
                self._bulk_indexed += writer.indexed_rows

    # -- reads ---------------------------------------------------------------------------

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        # One hop to the connection's thread (execute + fetchall would be two): reads are mostly hops.
        return list(await self._reader.execute_fetchall(sql, params))

    async def get_meta(self, key: str) -> str | None:
        rows = await self._fetchall("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    async def token(self, token_hash: str) -> tuple[str, str, str | None] | None:
        """(agent id, role, last used) of a live (unrevoked) token."""
        rows = await self._fetchall(
            "SELECT agent_id, role, last_used_at FROM agent_tokens WHERE token_hash = ? AND revoked_at IS NULL",
            (token_hash,),
        )
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    async def tokens(self) -> list[dict[str, Any]]:
        """Every token's id (the start of its hash), agent, role and dates, oldest first."""
        rows = await self._fetchall(
            """SELECT substr(token_hash, 1, ?), agent_id, role, created_at, last_used_at, revoked_at FROM agent_tokens
               ORDER BY created_at, agent_id, token_hash""",
            (TOKEN_ID_LENGTH,),
        )
        return [dict(zip(TOKEN_FIELDS, row)) for row in rows]

    async def get_node(self, node_id: str) -> NodeRow | None:
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS} FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE n.id = ?""",
            (node_id,),
        )
        return _node_row(rows[0]) if rows else None

    async def get_node_for_read(self, node_id: str) -> tuple[NodeRow, list[StatsRow], int] | None:
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
        return _node_row(rows[0]), _stats_rows(rows[0][12]), int(rows[0][13])

    async def get_nodes(self, ids: Sequence[str]) -> dict[str, NodeRow]:
        """{id: node} of those ids that exist, in one round trip."""
        rows = await select_in(
            self._fetchall,
            f"""SELECT {NODE_COLUMNS} FROM nodes n
                                    JOIN node_versions v ON v.version = n.current_version WHERE n.id IN ({{marks}})""",
            ids,
        )
        return {row.id: row for row in map(_node_row, rows)}

    async def get_nodes_by_pk(self, pks: Sequence[int]) -> list[NodeRow]:
        if not pks:
            return []
        marks = ",".join("?" * len(pks))
        rows = await self._fetchall(
            f"""SELECT {NODE_COLUMNS} FROM nodes n JOIN node_versions v ON v.version = n.current_version
                WHERE n.pk IN ({marks})""",
            list(pks),
        )
        by_pk = {row.pk: row for row in map(_node_row, rows)}
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
        by_pk = {row[0]: (_node_row(row), _stats_rows(row[12])) for row in rows}
        return [by_pk[pk] for pk in pks if pk in by_pk]

    async def get_version(self, node_id: str, version: str) -> tuple[dict[str, Any], dict[str, int], str] | None:
        """(document, solution revisions, created_at) of one pinned version of a node."""
        rows = await self._fetchall(
            "SELECT document, solution_revisions, created_at FROM node_versions WHERE node_id = ? AND version = ?",
            (node_id, version),
        )
        return (json.loads(rows[0][0]), json.loads(rows[0][1]), rows[0][2]) if rows else None

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
        return [_node_row(row) for row in rows]

    async def ecosystem_counts(self) -> list[tuple[str, int, int]]:
        """(ecosystem, nodes, open problems) of the non-deprecated nodes, by ecosystem."""
        rows = await self._fetchall(
            """SELECT ecosystem, count(*), sum(has_answer = 0) FROM nodes WHERE status != 'deprecated'
               GROUP BY ecosystem ORDER BY ecosystem"""
        )
        return [(row[0], int(row[1]), int(row[2])) for row in rows]

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

    # -- search channels: each bounded, all read in one statement; ranking happens in `ranking`

    async def channel_matches(
        self,
        hashes: Sequence[str],
        quoted: Sequence[str],
        signature_limit: int,
        queries: Sequence[TermQuery],
        family_limit: int = 0,
    ) -> list[tuple[str, int, str | None, str]]:
        """(channel, node pk, matched hash or None, node version) of every channel, in one round trip.

        `signature`: nodes indexed under any of `hashes`. A common error shape (`No module named
        '<*>'`) can match thousands of nodes; only the first `signature_limit` are read: those with
        the query's quoted values, then generic nodes (whose values are examples), then the rest.
        The term channels are FTS5 queries over quoted terms only (see `TermQuery`).
        """
        parts: list[str] = []
        params: list[Any] = []
        if hashes:
            marks = ",".join("?" * len(hashes))
            # UNION ALL keeps its arms' order and the inner LIMIT stops the scan early.
            parts.append(f"""SELECT 'signature' AS channel, node_pk, hash FROM
                  (SELECT node_pk, hash FROM node_signatures WHERE hash IN ({marks}) AND quoted_values = ?
                   UNION ALL
                   SELECT node_pk, hash FROM node_signatures WHERE hash IN ({marks}) AND specific = 0
                   UNION ALL
                   SELECT node_pk, hash FROM node_signatures WHERE hash IN ({marks}) AND specific = 1
                   LIMIT ?)""")
            params += [*hashes, json.dumps(list(quoted), ensure_ascii=False), *hashes, *hashes, 2 * signature_limit]
        for query in queries:
            if query.terms:
                table, rank = _TERM_TABLES[query.table]
                match = fts_every(query.terms) if query.every else fts_any(query.terms)
                if query.ranked and query.per_family:
                    parts.append(f"""SELECT '{query.channel}' AS channel, node_pk, NULL AS hash FROM
                          (SELECT node_pk FROM
                             (SELECT m.rowid AS node_pk, m.r,
                                     row_number() OVER (PARTITION BY i.templates ORDER BY m.r, m.rowid) AS family_rank
                              FROM (SELECT rowid, {rank} AS r FROM {table} WHERE {table} MATCH ? ORDER BY r LIMIT ?) AS m
                              JOIN node_index i ON i.node_pk = m.rowid)
                           WHERE family_rank <= ? ORDER BY r, node_pk LIMIT ?)""")
                    params += [match, query.pool, query.per_family, query.limit]
                    continue
                order = f"ORDER BY {rank} " if query.ranked else ""
                parts.append(
                    f"SELECT '{query.channel}' AS channel, rowid AS node_pk, NULL AS hash FROM "
                    f"(SELECT rowid FROM {table} WHERE {table} MATCH ? {order}LIMIT ?)"
                )
                params += [match, query.limit]
        if not parts:
            return []
        found = " UNION ALL ".join(parts)
        if family_limit:
            # Each specific node a term channel found brings the generic node of its family: of each of
            # its signature hashes, the generic node with the lowest pk (the index reads one row a hash).
            # CROSS JOIN keeps `found` outer: else SQLite scans every signature row for the join.
            found = f"""WITH found AS MATERIALIZED ({found})
                SELECT * FROM found UNION ALL
                SELECT 'family', node_pk, NULL FROM
                  (SELECT DISTINCT node_pk FROM
                     (SELECT (SELECT g.node_pk FROM node_signatures g WHERE g.hash = h.hash AND g.specific = 0
                              ORDER BY g.node_pk LIMIT 1) AS node_pk
                      FROM (SELECT DISTINCT s.hash FROM found f CROSS JOIN node_signatures s ON s.node_pk = f.node_pk
                            WHERE f.channel != 'signature' AND s.specific = 1) AS h) AS generic
                   WHERE node_pk IS NOT NULL ORDER BY node_pk LIMIT ?)"""
            params.append(family_limit)
        rows = await self._fetchall(
            "SELECT m.*, n.current_version FROM (" + found + ") AS m JOIN nodes n ON n.pk = m.node_pk", params
        )
        return fold_channel_rows(rows, signature_limit)

    async def candidate_texts(self, versions: dict[int, str]) -> list[CandidateText]:
        """The indexed text of each node of `versions` ({pk: current version}), in that order (kept per version)."""

        async def fetch(missing: list[int]) -> list[tuple[str, CandidateText]]:
            rows = await self._fetchall(
                f"""SELECT {CANDIDATE_COLUMNS}, n.current_version FROM node_index i JOIN nodes n ON n.pk = i.node_pk
                    JOIN node_search s ON s.rowid = i.node_pk WHERE i.node_pk IN ({",".join("?" * len(missing))})""",
                missing,
            )
            return [(row[-1], CandidateText(*row[:-1])) for row in rows]

        return await self._candidate_texts.texts(versions, fetch)

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

    # -- review queue: each query returns (node id, title, current revision, solution id, solution
    # revision, cluster, report count), in the order an item of that reason should be handled.

    _CURRENT_ANSWER = """json_extract(v.solution_revisions, '$."' || s.solution_id || '"') = s.solution_revision"""

    async def answers_in_state(self, failure_state: str, limit: int) -> list[tuple[Any, ...]]:
        """Current answers in `failure_state` in some cluster, most reports first."""
        return await self._fetchall(
            f"""SELECT n.id, n.title, n.current_revision, s.solution_id, s.solution_revision, s.cluster, s.sample_size
                FROM node_stats s JOIN nodes n ON n.id = s.node_id JOIN node_versions v ON v.version = n.current_version
                WHERE s.failure_state = ? AND s.solution_id != '' AND s.cluster != '' AND {self._CURRENT_ANSWER}
                  AND n.status != 'deprecated'
                ORDER BY s.sample_size DESC, n.id LIMIT ?""",
            (failure_state, limit),
        )

    async def unsolved_nodes(self, limit: int) -> list[tuple[Any, ...]]:
        return await self._fetchall(
            """SELECT id, title, current_revision, NULL, NULL, NULL, 0 FROM nodes
               WHERE has_answer = 0 AND status != 'deprecated' ORDER BY created_at, id LIMIT ?""",
            (limit,),
        )

    async def failures_after_edit(self, limit: int) -> list[tuple[Any, ...]]:
        """Failure reports newer than the article's current revision: nobody acted on them yet."""
        return await self._fetchall(
            """SELECT n.id, n.title, n.current_revision, f.solution_id, f.solution_revision, f.cluster, count(*)
               FROM feedback f JOIN nodes n ON n.id = f.node_id
               WHERE f.outcome IN ('failed', 'dangerous') AND f.created_at > n.updated_at AND n.status != 'deprecated'
               GROUP BY n.id, f.solution_id, f.solution_revision, f.cluster
               ORDER BY count(*) DESC, n.id LIMIT ?""",
            (limit,),
        )

    async def stale_nodes(self, before: str, limit: int) -> list[tuple[Any, ...]]:
        """Answered nodes never verified, or last verified before `before`."""
        return await self._fetchall(
            """SELECT n.id, n.title, n.current_revision, NULL, NULL, NULL, coalesce(s.sample_size, 0)
               FROM nodes n LEFT JOIN node_stats s
                 ON s.node_id = n.id AND s.solution_id = '' AND s.solution_revision = 0 AND s.cluster = ''
               WHERE n.has_answer = 1 AND n.status != 'deprecated' AND (s.last_verified IS NULL OR s.last_verified < ?)
               ORDER BY n.id LIMIT ?""",
            (before, limit),
        )

    async def awaiting_second_verification(self, before: str, limit: int) -> list[tuple[Any, ...]]:
        """Current answers, published before `before`, with exactly one independent solved report."""
        return await self._fetchall(
            f"""SELECT n.id, n.title, n.current_revision, s.solution_id, s.solution_revision, NULL, s.sample_size
                FROM node_stats s JOIN nodes n ON n.id = s.node_id JOIN node_versions v ON v.version = n.current_version
                WHERE s.cluster = '' AND s.solution_id != '' AND s.solved_agents = 1 AND n.updated_at < ?
                  AND {self._CURRENT_ANSWER} AND n.status != 'deprecated'
                ORDER BY n.id LIMIT ?""",
            (before, limit),
        )

    async def dedupe_tasks(self, status: str | None, limit: int) -> list[dict[str, Any]]:
        rows = await self._fetchall(
            """SELECT t.id, t.node_id, t.candidate_id, t.reason, t.status, t.canonical_id, t.created_at,
                      (SELECT count(*) FROM dedupe_votes v WHERE v.task_id = t.id AND v.vote = 'same'),
                      (SELECT count(*) FROM dedupe_votes v WHERE v.task_id = t.id AND v.vote = 'different')
               FROM dedupe_tasks t WHERE (:status IS NULL OR t.status = :status) ORDER BY t.id LIMIT :limit""",
            {"status": status, "limit": limit},  # type: ignore[arg-type]
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
            {"number": number, "limit": limit},  # type: ignore[arg-type]
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

    async def redirect(self, node_id: str) -> str | None:
        """The canonical node a merged node answers with, or None."""
        rows = await self._fetchall("SELECT canonical_id FROM node_redirects WHERE node_id = ?", (node_id,))
        return rows[0][0] if rows else None

    async def maintainer_actions(self, target: str | None, after: int, limit: int) -> list[dict[str, Any]]:
        """The audit log (optionally of one node or issue), oldest first, after action id `after`."""
        rows = await self._fetchall(
            """SELECT id, action, target, detail, note, maintainer_id, proof, created_at FROM maintainer_actions
               WHERE (:target IS NULL OR target = :target) AND id > :after ORDER BY id LIMIT :limit""",
            {"target": target, "after": after, "limit": limit},  # type: ignore[arg-type]
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

    async def count_changes_after(self, seq: int) -> int:
        rows = await self._fetchall("SELECT count(*) FROM nodes WHERE change_seq > ?", (seq,))
        return int(rows[0][0])

    async def changes_after(self, seq: int, limit: int) -> list[tuple[Any, ...]]:
        """(change_seq, id, version, status, title, created_at, updated_at, revision, has_answer,
        node-wide stats as JSON rows, last feedback id, ids of the nodes merged into it, the node it was merged
        into or None) of nodes written after `seq`, in write order."""
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
        return [(*row[:11], json.loads(row[11]), row[12]) for row in rows]

    async def revisions(self, node_id: str) -> list[RevisionRow]:
        rows = await self._fetchall(
            f"SELECT {REVISION_COLUMNS} FROM article_revisions WHERE node_id = ? ORDER BY revision", (node_id,)
        )
        return [_revision_row(row) for row in rows]

    async def revisions_with_documents(
        self, node_id: str, after: int = 0
    ) -> list[tuple[RevisionRow, dict[str, Any], dict[str, int]]]:
        """(revision, document, solution revisions) of every revision after `after`: what a sync copies."""
        return [
            _revision_with_document(row) for row in await self._fetchall(REVISIONS_WITH_DOCUMENTS, (node_id, after))
        ]

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

    async def feedback_after(self, node_id: str, after: int, limit: int) -> list[dict[str, Any]]:
        """A node's feedback rows after id `after`, without the address hash: what a sync copies."""
        rows = await self._fetchall(
            f"SELECT id, {', '.join(FEEDBACK_COLUMNS)} FROM feedback WHERE node_id = ? AND id > ? ORDER BY id LIMIT ?",
            (node_id, after, limit),
        )
        return [{**dict(zip(("id", *FEEDBACK_COLUMNS), row)), "environment": json.loads(row[7])} for row in rows]

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

    async def document_at(self, node_id: str, revision: int) -> dict[str, Any] | None:
        """The document an article revision published."""
        rows = await self._fetchall(
            """SELECT v.document FROM article_revisions r JOIN node_versions v ON v.version = r.version
               WHERE r.node_id = ? AND r.revision = ?""",
            (node_id, revision),
        )
        return json.loads(rows[0][0]) if rows else None

    async def iter_current_documents(self, batch: int = 500) -> AsyncIterator[tuple[dict[str, Any], str, str]]:
        """(document, status, version) of every node in id order."""
        after = ""
        while True:
            rows = await self._fetchall(
                """SELECT n.id, v.document, n.status, n.current_version FROM nodes n
                   JOIN node_versions v ON v.version = n.current_version
                   WHERE n.id > ? ORDER BY n.id LIMIT ?""",
                (after, batch),
            )
            for row in rows:
                yield json.loads(row[1]), row[2], row[3]
            if len(rows) < batch:
                return
            after = rows[-1][0]

    async def document_frequencies(
        self, terms: Sequence[str], grams: Sequence[str] = (), heads: Sequence[str] = ()
    ) -> Frequencies:
        """How many nodes hold each term (in any field), each template trigram of `grams` and each term
        of `heads` in title or signature (absent ones are left out), and `indexed_node_count`.

        Read from `term_counts` (primary-key probes) with the node count, in one statement; the counts
        read are kept while the database is unchanged, so most queries probe only their new terms.
        Unchanged means the same write generation and the same `PRAGMA data_version` of the reader,
        read in that statement: it moves with every commit of another connection, this store's writer
        or another process on the same file (a second agent's stdio server, the CLI), whose new node
        would else stay unfindable here by words counted as absent. The cache is swapped, never
        cleared in place, and filled only from rows read under the version it belongs to, so a write
        during the read cannot leave it half-updated for another request.
        """
        asked = (("term", terms), ("gram", grams), ("head", heads))
        wanted = [(kind, term) for kind, chosen in asked for term in dict.fromkeys(chosen)]
        generation = self.write_generation
        cached, known = self._frequencies
        if cached[1] != generation or len(known) > 200_000:
            known = {}
        version, nodes, fresh = await self._counted([key for key in wanted if key not in known])
        if (version, generation) != cached:
            if len(fresh) < len(wanted):  # the database changed since the kept counts were read
                version, nodes, fresh = await self._counted(wanted)
            known = {}
        if self.write_generation == generation:  # else a newer generation owns the cache now
            if known is not self._frequencies[1]:  # `known` holds counts of (version, generation) only
                self._frequencies = ((version, generation), known)
            known.update(fresh)
        counts = {key: fresh[key] if key in fresh else known[key] for key in wanted}
        return Frequencies(
            *({term: n for (k, term), n in counts.items() if k == kind and n} for kind, _ in asked), nodes=nodes
        )

    async def _counted(self, keys: list[tuple[str, str]]) -> tuple[int, int, dict[tuple[str, str], int]]:
        """(the reader's data version, the highest node pk, {key: count} of `keys`), in one statement:
        one snapshot of the database."""
        parts = [
            "SELECT 'version', '', data_version FROM pragma_data_version",
            "SELECT 'nodes', '', coalesce(max(pk), 0) FROM nodes",
        ]
        params: list[str] = []
        for kind in dict.fromkeys(kind for kind, _ in keys):
            chosen = [term for k, term in keys if k == kind]
            parts.append(
                f"SELECT kind, term, doc FROM term_counts WHERE kind = ? AND term IN ({','.join('?' * len(chosen))})"
            )
            params += [kind, *chosen]
        counted = {
            (kind, term): int(doc) for kind, term, doc in await self._fetchall(" UNION ALL ".join(parts), params)
        }
        return (counted.pop(("version", "")), counted.pop(("nodes", "")), {key: counted.get(key, 0) for key in keys})

    async def count_nodes(self) -> int:
        rows = await self._fetchall("SELECT count(*) FROM nodes")
        return int(rows[0][0])

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

        async def fact(name: str, sql: str) -> list[sqlite3.Row]:
            try:
                return await self._fetchall(sql)
            except sqlite3.DatabaseError as error:
                unreadable[name] = str(error)
                return []

        schema = await fact("schema version", "SELECT coalesce(max(version), 0) FROM schema_migrations")
        nodes = await fact("node count", "SELECT count(*) FROM nodes")
        indexed = await fact("search index's node count", "SELECT count(*) FROM node_index")
        tokens = dict(
            await fact(  # type: ignore[arg-type]
                "tokens", "SELECT role, count(*) FROM agent_tokens WHERE revoked_at IS NULL GROUP BY role"
            )
        )
        syncs = await fact("syncs", "SELECT remote, synced_at FROM sync_state ORDER BY remote")
        meta = dict(
            await fact(  # type: ignore[arg-type]
                "index versions",
                "SELECT key, value FROM meta WHERE key IN ('normalizer_version', 'search_index_version')",
            )
        )
        return {
            "schema_version": int(schema[0][0]) if schema else 0,
            "latest_schema_version": max(n for n, _, _ in migrations()),
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

    async def indexed_node_count(self) -> int:
        """The number of nodes BM25's document frequencies are relative to: the highest node pk, read as
        `document_frequencies` reads it."""
        return (await self._counted([]))[1]


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def check_database_file(path: str) -> bool:
    """Refuse, without opening it, a path that cannot hold a knowmesh database; True when this
    process may write it, False when it may only read it (then it is opened read-only).

    Accepted: an existing regular file that starts like a SQLite database, or is empty (then it
    must be writable); or a missing file in an existing, writable folder (the folder is never
    created here). A database is writable only with its folder: WAL mode keeps its -wal and -shm
    files beside it. Anything else raises `DatabaseUnusable`.
    """
    folder = Path(path).parent
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        if not folder.is_dir():
            what = f"{folder} is not a folder" if folder.exists() else f"folder {folder} does not exist"
            raise DatabaseUnusable(path, f"cannot create {path}: {what}") from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise DatabaseUnusable(path, f"cannot create {path}: folder {folder} is not writable") from None
        return True
    except OSError as error:  # e.g. a folder we may not enter, a name too long
        raise DatabaseUnusable(path, f"cannot open {path} ({error.strerror or error})") from None
    if stat.S_ISDIR(info.st_mode):
        raise DatabaseUnusable(path, f"{path} is a folder, not a database file")
    if not stat.S_ISREG(info.st_mode):
        raise DatabaseUnusable(path, f"{path} is not a knowmesh database (not a regular file)")
    try:
        with open(path, "rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as error:
        raise DatabaseUnusable(path, f"cannot read {path} ({error.strerror or error})") from None
    if header and header != SQLITE_HEADER:
        raise DatabaseUnusable(path, f"{path} is not a knowmesh database (file is not a database)")
    writable = os.access(path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK)
    if not header and not writable:
        raise DatabaseUnusable(path, f"{path} is empty and read-only: there is no mesh in it to read")
    return writable


def read_only_uri(path: str) -> str:
    """A `file:` URI that opens `path` read-only.

    In WAL mode even a reader needs the -shm file beside the database. Where the folder may not be
    written and holds none, SQLite cannot open the file with mode=ro (SQLITE_CANTOPEN), only as
    `immutable`: a file nothing changes while it is open. That holds there: no writer could make
    its -wal and -shm files in that folder either.
    """
    absolute = os.path.abspath(path)
    uri = f"file:{quote(absolute)}?mode=ro"
    if not os.access(os.path.dirname(absolute), os.W_OK | os.X_OK) and not os.path.exists(absolute + "-shm"):
        uri += "&immutable=1"
    return uri


def _error_code(error: BaseException) -> int:
    """SQLite's primary result code of an error (SQLITE_FULL, ...), 0 for anything else."""
    return getattr(error, "sqlite_errorcode", 0) & 0xFF


def _disk_is_full(path: str) -> bool:
    """Whether the file system holding `path` has no block left for this process. SQLite reports a
    full disk as SQLITE_FULL where a write says ENOSPC, but as an I/O error where it learns only
    that a write failed: growing the -shm file, which opening a WAL database on a full disk does."""
    if path == ":memory:":
        return False
    try:
        return os.statvfs(os.path.dirname(os.path.abspath(path))).f_bavail == 0
    except OSError:
        return False


def _is_disk_full(error: BaseException, path: str) -> bool:
    code = _error_code(error)
    return code == sqlite3.SQLITE_FULL or (code == sqlite3.SQLITE_IOERR and _disk_is_full(path))


def _write_fault(error: BaseException, path: str) -> KnowmeshError | None:
    """The named error for what a write transaction met, or None (then it is unexpected: a bug).

    A full disk is 507 storage_full; SQLITE_READONLY (a file made read-only, or a read-only mount
    remounted, while the mesh is open) is 403 read_only_database. Either way nothing was written.
    """
    if _is_disk_full(error, path):
        return storage_full()
    if _error_code(error) == sqlite3.SQLITE_READONLY:
        return read_only_database()
    return None


def _is_busy(error: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock (for longer than busy_timeout)."""
    message = str(error)
    return "locked" in message or "busy" in message


def _unusable(path: str, error: sqlite3.Error) -> DatabaseUnusable:
    """The one line for a SQLite error raised while opening `path`."""
    message = str(error) or type(error).__name__
    if _is_disk_full(error, path):  # a runtime fault, not bad usage: 507, the CLI exits 1
        return DatabaseUnusable(
            path,
            f"cannot open {path}: the disk holding it is full (nothing was written; free some space)",
            status=507,
            code="storage_full",
        )
    if _error_code(error) == sqlite3.SQLITE_CORRUPT:  # ours, damaged: not "not a knowmesh database"
        return DatabaseUnusable(
            path, f"{path} is damaged ({message}): restore it from a backup", status=500, code="database_corrupt"
        )
    if isinstance(error, sqlite3.OperationalError):
        if _is_busy(error):
            return DatabaseUnusable(path, f"cannot open {path} ({message})", status=503, code="database_busy")
        return DatabaseUnusable(path, f"cannot open {path} ({message})")
    return DatabaseUnusable(path, f"{path} is not a knowmesh database ({message})")


async def _identify(connection: aiosqlite.Connection, path: str) -> None:
    """Refuse a SQLite database that is not knowmesh's, before anything writes to it.

    Ours: no schema at all (new), or a `schema_migrations` table of knowmesh's shape whose
    applied migrations carry knowmesh's names (an empty one, left by an interrupted first
    open, may stand alone). Read-only: even `journal_mode = WAL` would rewrite the header.
    """
    rows = await connection.execute_fetchall(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    )
    tables = [row[0] for row in rows]
    if not tables:
        if list(await connection.execute_fetchall("SELECT 1 FROM sqlite_master LIMIT 1")):
            raise DatabaseUnusable(path, f"{path} is not a knowmesh database (it has no knowmesh tables)")
        return
    if "schema_migrations" not in tables:
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        raise DatabaseUnusable(
            path,
            f"{path} is not a knowmesh database (a SQLite database with no schema_migrations table; tables: {shown})",
        )
    columns = {row[1] for row in await connection.execute_fetchall("PRAGMA table_info(schema_migrations)")}
    if not {"version", "name", "applied_at"} <= columns:
        raise DatabaseUnusable(
            path, f"{path} is not a knowmesh database (its schema_migrations table is another application's)"
        )
    applied = list(await connection.execute_fetchall("SELECT version, name FROM schema_migrations"))
    known = {number: name for number, name, _ in migrations()}
    if any(known.get(version, name) != name for version, name in applied) or (not applied and len(tables) > 1):
        raise DatabaseUnusable(path, f"{path} is not a knowmesh database (its schema_migrations are not knowmesh's)")


async def _discard(connection: aiosqlite.Connection) -> None:
    """Close a connection after a failure without raising over it; aiosqlite ends its thread either way."""
    try:
        await connection.close()
    except Exception:
        pass


async def _connect(path: str, *, identify: bool = False, read_only: bool = False) -> aiosqlite.Connection:
    """A connection in WAL mode; with `identify`, only once the database is known to be ours (or new).
    With `read_only`, a connection that cannot write (`read_only_uri`), and leaves the journal mode
    as the file has it (setting WAL would rewrite its header).

    Closed again if anything fails, so its (non-daemon) worker thread never keeps the process alive.
    """
    if read_only:
        connection = await aiosqlite.connect(read_only_uri(path), isolation_level=None, uri=True)
    else:
        connection = await aiosqlite.connect(path, isolation_level=None)
    try:
        await connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if identify:
            await _identify(connection, path)
        if not read_only:
            await connection.execute("PRAGMA journal_mode = WAL")
        await connection.execute("PRAGMA synchronous = NORMAL")
        await connection.execute("PRAGMA foreign_keys = ON")
        await connection.execute("PRAGMA cache_size = -32000")  # 32 MB: FTS segment writes stay in memory
    except BaseException:
        await _discard(connection)
        raise
    return connection


async def _migrate(connection: aiosqlite.Connection) -> bool:
    """Apply pending migrations, each in its own transaction; True if the database was new."""
    await connection.execute(MIGRATIONS_TABLE)
    async with connection.execute("SELECT coalesce(max(version), 0) FROM schema_migrations") as cursor:
        (current,) = await cursor.fetchone()  # type: ignore[misc]
    created = current == 0
    for number, name, sql in migrations():
        if number <= current:
            continue
        await connection.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the lock.
            async with connection.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (number,)) as cursor:
                if await cursor.fetchone():
                    created = False
                    await connection.execute("ROLLBACK")
                    continue
            for statement in split_sql(sql):
                await connection.execute(statement)
            if number == 1:  # this open creates the mesh, in this transaction
                await connection.execute("INSERT INTO meta (key, value) VALUES (?, 'pending')", (STARTER_CORPUS,))
            await connection.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (number, name, utc_now()),
            )
        except BaseException:
            await connection.execute("ROLLBACK")
            raise
        await connection.execute("COMMIT")
    return created


async def _check_migrated(connection: aiosqlite.Connection, path: str) -> bool:
    """A read-only database cannot be migrated: it must already hold a mesh at this code's schema.
    Returns False (this open made nothing)."""
    tables = await connection.execute_fetchall(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    )
    current = 0
    if list(tables):
        ((current,),) = await connection.execute_fetchall("SELECT coalesce(max(version), 0) FROM schema_migrations")
    if current == 0:
        raise DatabaseUnusable(path, f"{path} is read-only and holds no mesh yet: there is nothing in it to read")
    latest = max(number for number, _, _ in migrations())
    if current < latest:
        raise DatabaseUnusable(
            path,
            f"{path} is read-only and its schema (version {current}) is older than this "
            f"code's ({latest}): open it once where it may be written, to migrate it",
        )
    return False


def consolidated_schema() -> str:
    """The schema every migration builds, as one script (written to store/schema.sql).

    Read back from a freshly migrated in-memory database, so it is what the migrations
    really produce; FTS5 shadow tables are left out because the virtual table makes them.
    """
    connection = sqlite3.connect(":memory:", isolation_level=None)
    try:
        connection.execute(MIGRATIONS_TABLE)
        for _, _, sql in migrations():
            for statement in split_sql(sql):
                connection.execute(statement)
        rows = connection.execute(
            """SELECT name, sql FROM sqlite_master
               WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"""
        ).fetchall()
        virtual = [name for name, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE")]
        statements = [sql for name, sql in rows if not any(name.startswith(v + "_") for v in virtual)]
    finally:
        connection.close()
    header = (
        "-- Consolidated schema: what applying store/migrations in order produces.\n"
        "-- Generated by `python -m knowmesh_mcp.store`; tests/test_store.py holds the two equal.\n"
    )
    return header + "\n" + ";\n\n".join(statements) + ";\n"
