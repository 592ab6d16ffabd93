"""The PostgreSQL backend for a team's mesh: connections, migrations, and the transaction every
write is. Migrations live in `store/postgres/migrations/`, their consolidated form in
`store/postgres/schema.sql`, and `describe` reads a live database's schema so a test can hold
the two equal. The SQL of reads is in `PostgresStore`, of writes in `postgres_writer.PostgresWriter`.

Several servers share one database. Each migration runs in its own transaction under an advisory
lock, so exactly one server applies it. Each write transaction takes one more advisory lock
first: writes are serialized across servers exactly as SQLite's single writer serializes them,
so the service's read-then-write steps (base revisions, evidence replays) mean the same on both.

    python -m knowmesh_mcp.store.postgres postgresql://...   # migrate an empty database, write schema.sql
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from knowmesh_mcp.core.errors import DatabaseUnusable, KnowmeshError, database_busy, storage_full
from knowmesh_mcp.store.interface import STARTER_CORPUS
from knowmesh_mcp.store.pg_evidence import EvidenceReads
from knowmesh_mcp.store.pg_nodes import NodeReads
from knowmesh_mcp.store.pg_search import DEFERRED_KEY, SearchReads
from knowmesh_mcp.store.shared import CandidateTexts
from knowmesh_mcp.store.sqlite import read_migrations, store_dir, utc_now

if TYPE_CHECKING:
    from knowmesh_mcp.store.postgres_writer import PostgresWriter

MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""
MIGRATION_LOCK = 0x6B6E6F77  # "know": the advisory lock key every server takes to migrate
WRITE_LOCK = 0x6D657368  # "mesh": taken by every write transaction, held until it ends
POOL_SIZE = 8
LOCK_TIMEOUT_SECONDS = 10  # a write that waits longer for the write lock is 503 database_busy, as on SQLite
DEFER_BELOW = 10_000  # nodes: a bulk import into a mesh this small builds its GIN indexes at the end


def postgres_dir() -> Path:
    return store_dir() / "postgres"


def migrations() -> list[tuple[int, str, str]]:
    """The PostgreSQL migrations, store/postgres/migrations."""
    return read_migrations(postgres_dir() / "migrations")


async def migrate(conninfo: str) -> int:
    """Apply pending migrations; returns how many this call applied."""
    import psycopg

    applied = 0
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as connection:
        async with connection.transaction():  # CREATE TABLE IF NOT EXISTS is not safe against a racing server
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await connection.execute(MIGRATIONS_TABLE)
        for number, name, sql in migrations():
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                done = await (
                    await connection.execute("SELECT 1 FROM schema_migrations WHERE version = %s", (number,))
                ).fetchone()
                if done:
                    continue
                await connection.execute(sql)  # our own file, several statements: no parameters
                if number == 1:  # this open creates the mesh, in this transaction
                    await connection.execute("INSERT INTO meta (key, value) VALUES (%s, 'pending')", (STARTER_CORPUS,))
                await connection.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                    (number, name, utc_now()),
                )
                applied += 1
    return applied


def shown_url(url: str) -> str:
    """A conninfo URL as it may be printed: its password, in the address or as a `password=`
    parameter, shown as `***`; a socket URL (no host: `postgresql://u:p@/db?host=/run/x`) stays one."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username}:***@{netloc.rsplit('@', 1)[1]}"
    query = "&".join(
        f"{key}=***" if key == "password" else f"{key}={value}" if value else key
        for key, value in (item.partition("=")[::2] for item in parts.query.split("&") if item)
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


class PostgresStore(NodeReads, SearchReads, EvidenceReads):
    """An open team mesh on PostgreSQL: a pool of connections, reads outside transactions, and
    `write()` for one serialized transaction. Keeps no state that changes results: every
    server of a mesh sees what the database holds."""

    shared = True
    read_only = False  # a role without write rights is refused by PostgreSQL itself, per statement

    def __init__(self, url: str, pool: Any, writer_pool: Any, created: bool):
        self.url = url
        self.path = shown_url(url)
        self.created = created  # True when this open made the database (a copy refuses such a source)
        self._pool = pool
        self._writer_pool = writer_pool  # one blocking connection: see pg_immediate
        self._candidate_texts = CandidateTexts()
        # This server's writes queue here, not in the pool: a write waiting for the mesh's lock holds
        # no connection, so waiting writes never starve this server's reads.
        self._write_queue = asyncio.Lock()
        # The connection of the write transaction this task is inside: its reads use it (they see
        # what the transaction wrote, and never ask the pool for a second connection while the
        # mesh's lock is held: twelve such reports at once starved a pool of 8).
        self._held: ContextVar[Any] = ContextVar(f"knowmesh_write_{id(self)}", default=None)

    @classmethod
    async def open(cls, url: str) -> PostgresStore:
        """Connect, migrate and open the pool; an unreachable server or a refused login is one
        `DatabaseUnusable` line naming the URL (without its password)."""
        import psycopg
        from psycopg_pool import AsyncConnectionPool, ConnectionPool

        try:
            applied = await migrate(url)
        except psycopg.OperationalError as error:
            reason = str(error).strip().splitlines()[-1].strip() if str(error).strip() else type(error).__name__
            raise DatabaseUnusable(
                shown_url(url),
                f"cannot open the PostgreSQL database {shown_url(url)}: {reason}",
                status=503,
                code="database_unavailable",
            ) from None
        pool = AsyncConnectionPool(
            url, min_size=1, max_size=POOL_SIZE, open=False, kwargs={"autocommit": True}, configure=plan_for_searches
        )
        await pool.open()
        # Keepalives bound how long a write may block on a database host that vanished mid-statement.
        writer_pool = ConnectionPool(
            url,
            min_size=1,
            max_size=1,
            open=False,
            kwargs={
                "autocommit": True,
                "keepalives": 1,
                "keepalives_idle": 10,
                "keepalives_interval": 5,
                "keepalives_count": 3,
            },
        )
        await asyncio.to_thread(writer_pool.open, True)
        async with pool.connection() as connection:
            await connection.execute(
                "INSERT INTO change_counter (only_row, value) VALUES (TRUE, 0) ON CONFLICT (only_row) DO NOTHING"
            )
        store = cls(url, pool, writer_pool, created=applied == len(migrations()))
        await store._restore_indexes()  # a bulk import that died (or, harmlessly early, one still going)
        return store

    async def close(self) -> None:
        await self._pool.close()
        await asyncio.to_thread(self._writer_pool.close)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[PostgresWriter]:
        """One transaction, serialized with every other write of the mesh: all of it commits, or none of it does.

        It runs on this server's blocking writer connection (`pg_immediate`): once it holds the
        mesh's lock it never gives the event loop away, so it holds the lock for the time its
        statements take, not for the time every other request of a busy server takes. Only a
        wait for the lock (another server's write) runs in a thread."""

        from knowmesh_mcp.store.pg_immediate import ImmediateConnection
        from knowmesh_mcp.store.postgres_writer import PostgresWriter

        if self._held.get() is not None:
            raise RuntimeError("a write transaction inside another one would wait for its own lock")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOCK_TIMEOUT_SECONDS  # for the queue and the lock together
        try:
            await asyncio.wait_for(self._write_queue.acquire(), LOCK_TIMEOUT_SECONDS)
        except TimeoutError:
            raise database_busy() from None
        try:
            with nul_as_bad_input(), disk_full_as_storage_full():
                connection = await asyncio.to_thread(self._writer_pool.getconn, LOCK_TIMEOUT_SECONDS)
                try:
                    with connection.transaction():
                        await self._lock_mesh(connection, deadline - loop.time())
                        immediate = ImmediateConnection(connection)
                        held = self._held.set(immediate)
                        try:
                            yield PostgresWriter(immediate)
                        finally:
                            self._held.reset(held)
                finally:
                    self._writer_pool.putconn(connection)
        finally:
            self._write_queue.release()

    @staticmethod
    async def _lock_mesh(connection: Any, seconds_left: float) -> None:
        """Take the mesh's write lock in this transaction: at once when it is free, else waiting in a
        thread for at most `seconds_left` (another server's write, or a stuck session), then 503."""
        import psycopg

        if connection.execute("SELECT pg_try_advisory_xact_lock(%s)", (WRITE_LOCK,)).fetchone()[0]:
            return
        left_ms = max(1, int(seconds_left * 1000))  # 0 would mean "wait for ever"
        connection.execute("SELECT set_config('lock_timeout', %s, true)", (f"{left_ms}ms",))
        waiting = asyncio.ensure_future(
            asyncio.to_thread(connection.execute, "SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        )
        try:
            await asyncio.shield(waiting)
        except asyncio.CancelledError:
            # The thread still waits on the connection: let it finish (within the lock timeout)
            # before the rollback, which would otherwise block the event loop until it does.
            await asyncio.wait([waiting])
            raise
        except psycopg.errors.LockNotAvailable:
            raise database_busy() from None

    @asynccontextmanager
    async def bulk_import(self) -> AsyncIterator[None]:
        """An import into a mesh of fewer than DEFER_BELOW nodes drops the search tables' GIN
        indexes (`_defer_search_indexes`) and builds them again when it ends: at 30,000 nodes the
        server spends 0.32-0.36 ms a node instead of 0.44-0.47, the rebuild included. Searches
        meanwhile stay right, only slower. If this server dies first, the next one to open the
        mesh builds them."""
        async with self.write() as tx:
            await tx._defer_search_indexes(DEFER_BELOW)
        try:
            yield
        finally:
            await self._restore_indexes()

    async def _restore_indexes(self) -> None:
        if await self._fetchall("SELECT 1 FROM meta WHERE key LIKE %s LIMIT 1", (DEFERRED_KEY + "%",)):
            async with self.write() as tx:
                await tx._restore_search_indexes()

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with nul_as_bad_input():
            held = self._held.get()
            if held is not None:
                return await (await held.execute(sql, params)).fetchall()
            async with self._pool.connection() as connection:
                return await (await connection.execute(sql, params)).fetchall()


async def plan_for_searches(connection: Any) -> None:
    """Plan for short statements over an index in memory or on SSD. The default `random_page_cost`
    (4, a spinning disk) made the planner read every row of `node_search` rather than its GIN index
    for a term in 7 % of 10,000 nodes: 10.8 ms instead of 2.6 ms a channel (bench/pg_scale.py). A
    search's statement runs in milliseconds: parallel workers cost more to start than they save and
    take the cores that other requests (and other servers of the mesh) need (at 1,000,000 nodes,
    p95 64.8 -> 52.2 ms over five alternating runs), and JIT compiling them costs more than it saves
    (the planner's cost of a walk, an upper bound, crosses `jit_above_cost`: 54 of a phrase's 80 ms)."""
    await connection.execute(
        "SELECT set_config('random_page_cost', '1.1', false), "
        "set_config('max_parallel_workers_per_gather', '0', false), set_config('jit', 'off', false)"
    )


@contextmanager
def nul_as_bad_input() -> Iterator[None]:
    """PostgreSQL text cannot hold U+0000 (SQLite's can): a request carrying one is a 400, not a 500."""
    import psycopg

    try:
        yield
    except psycopg.DataError as error:
        if "NUL" not in str(error) and "0x00" not in str(error):
            raise
        raise KnowmeshError(400, "invalid_text", "text may not contain NUL (U+0000) characters on this mesh") from None

    # The reads (the Store half of `interface`) are in pg_nodes, pg_search and pg_evidence.


@contextmanager
def disk_full_as_storage_full() -> Iterator[None]:
    """SQLSTATE 53100 (`disk_full`: the server could not extend a file, at a statement or at COMMIT)
    is 507 storage_full, as SQLite's SQLITE_FULL is, not a 500: the transaction was rolled back, so
    nothing was written."""
    import psycopg

    try:
        yield
    except psycopg.errors.DiskFull:
        raise storage_full() from None


async def apply_script(conninfo: str, sql: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as connection:
        async with connection.transaction():
            await connection.execute(sql)


# The catalog, read so that two databases with the same schema describe alike on any server
# version: columns, constraints, indexes, triggers and functions of the public schema, and
# extensions by name.
DESCRIBE = {
    "columns": """SELECT table_name, column_name, data_type, is_nullable, coalesce(column_default, ''),
                         coalesce(generation_expression, ''), is_identity
                  FROM information_schema.columns WHERE table_schema = 'public'""",
    "constraints": """SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
                      FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
                      WHERE n.nspname = 'public'""",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "triggers": """SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t
                   WHERE NOT tgisinternal""",
    "functions": """SELECT p.proname, pg_get_function_identity_arguments(p.oid), md5(p.prosrc) FROM pg_proc p
                    JOIN pg_namespace n ON n.oid = p.pronamespace
                    WHERE n.nspname = 'public' AND NOT EXISTS (
                        SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')""",
    "extensions": "SELECT extname FROM pg_extension",
}


async def describe(conninfo: str) -> dict[str, list[tuple[Any, ...]]]:
    """The schema of a live database, each part sorted."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as connection:
        return {
            part: sorted(tuple(row) for row in await (await connection.execute(sql)).fetchall())
            for part, sql in DESCRIBE.items()
        }


def dump_schema(conninfo: str) -> str:
    """`pg_dump --schema-only` of a migrated database, without the settings and comments it adds."""
    dumped = subprocess.run(
        ["pg_dump", "--schema-only", "--no-owner", "--no-privileges", "--no-comments", conninfo],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    kept = [
        line
        for line in dumped.splitlines()
        if not line.startswith(("SET ", "SELECT pg_catalog.set_config", "--", "\\restrict", "\\unrestrict"))
    ]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    header = (
        "-- Consolidated PostgreSQL schema: what applying store/postgres/migrations in order produces.\n"
        "-- Generated by `python -m knowmesh_mcp.store.postgres URL`; tests/test_postgres_schema.py holds them equal.\n"
    )
    return header + "\n" + body + "\n"


if __name__ == "__main__":
    import asyncio

    url = sys.argv[1]
    asyncio.run(migrate(url))
    (postgres_dir() / "schema.sql").write_text(dump_schema(url), encoding="utf-8")
