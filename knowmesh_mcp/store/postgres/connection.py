"""PostgreSQL connections: migrating under an advisory lock, the mesh's write lock, the planner
settings of every pooled connection, and PostgreSQL's errors as the package's named faults.

Several servers share one database. Each migration runs in its own transaction under an advisory
lock, so exactly one server applies it. Each write transaction takes one more advisory lock
first (`WRITE_LOCK`, `store.PostgresStore.write`): writes are serialized across servers exactly as
SQLite's single writer serializes them, so the service's read-then-write steps (base revisions,
evidence replays) mean the same on both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from knowmesh_mcp.core.errors import KnowmeshError, storage_full
from knowmesh_mcp.store.common import MIGRATIONS_TABLE, utc_now
from knowmesh_mcp.store.interface import STARTER_CORPUS
from knowmesh_mcp.store.postgres.schema import migrations

MIGRATION_LOCK = 0x6B6E6F77  # "know": the advisory lock key every server takes to migrate
WRITE_LOCK = 0x6D657368  # "mesh": taken by every write transaction, held until it ends
POOL_SIZE = 8
LOCK_TIMEOUT_SECONDS = 10  # a write that waits longer for the write lock is 503 database_busy, as on SQLite


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
