"""An open team mesh on PostgreSQL: the Store half of `store.interface`.

A pool of connections for reads, outside transactions, and one blocking writer connection for
`write()` (`immediate`), each write serialized across every server of the mesh by its write lock
(`connection`). The SQL of reads is in the mixins of `nodes`, `sync`, `search` and `evidence`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

from knowmesh_mcp.core.errors import DatabaseUnusable, database_busy
from knowmesh_mcp.store.common import CandidateTexts
from knowmesh_mcp.store.postgres.connection import (
    LOCK_TIMEOUT_SECONDS,
    POOL_SIZE,
    WRITE_LOCK,
    disk_full_as_storage_full,
    migrate,
    nul_as_bad_input,
    plan_for_searches,
    shown_url,
)
from knowmesh_mcp.store.postgres.evidence import EvidenceReads
from knowmesh_mcp.store.postgres.immediate import ImmediateConnection
from knowmesh_mcp.store.postgres.nodes import NodeReads
from knowmesh_mcp.store.postgres.schema import migrations
from knowmesh_mcp.store.postgres.search import DEFERRED_KEY, SearchReads
from knowmesh_mcp.store.postgres.sync import SyncReads
from knowmesh_mcp.store.postgres.writer import PostgresWriter

DEFER_BELOW = 10_000  # nodes: a bulk import into a mesh this small builds its GIN indexes at the end


class PostgresStore(NodeReads, SyncReads, SearchReads, EvidenceReads):
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
        self._writer_pool = writer_pool  # one blocking connection: see `immediate`
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

        It runs on this server's blocking writer connection (`immediate`): once it holds the
        mesh's lock it never gives the event loop away, so it holds the lock for the time its
        statements take, not for the time every other request of a busy server takes. Only a
        wait for the lock (another server's write) runs in a thread."""

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
