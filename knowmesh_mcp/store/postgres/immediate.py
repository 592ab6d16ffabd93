"""The async face of a blocking psycopg connection, for the write transaction.

Every write of a team's mesh holds the mesh's lock (`connection.WRITE_LOCK`) until it commits, and
every server's writes wait for it. On an async connection each statement gave the event loop
away, and on a busy server the write waited behind every other request for its turn again: under
32 clients on three servers a write held the lock 81 ms at the median (ten statements of well
under a millisecond each), so writes queued for seconds across the mesh. `ImmediateConnection`
offers the calls the writer makes (`execute`, `cursor`, `copy`, `transaction`) as coroutines that
run the blocking call at once and never yield: a write, once it holds the lock, runs to its
commit. Only the wait for the lock itself runs in a thread (`store.PostgresStore.write`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any


class ImmediateCursor:
    def __init__(self, cursor: Any):
        self._cursor = cursor

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    async def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self._cursor.fetchall())

    async def fetchone(self) -> tuple[Any, ...] | None:
        return self._cursor.fetchone()

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._cursor.executemany(sql, rows)

    @asynccontextmanager
    async def copy(self, statement: str) -> AsyncIterator[ImmediateCopy]:
        with self._cursor.copy(statement) as copy:
            yield ImmediateCopy(copy)


class ImmediateCopy:
    def __init__(self, copy: Any):
        self._copy = copy

    async def write_row(self, row: Sequence[Any]) -> None:
        self._copy.write_row(row)


class ImmediateConnection:
    """A `psycopg.Connection` behind the `psycopg.AsyncConnection` calls the writer makes."""

    def __init__(self, connection: Any):
        self._connection = connection

    async def execute(self, sql: str, params: Sequence[Any] | None = None) -> ImmediateCursor:
        return ImmediateCursor(self._connection.execute(sql, params))

    @asynccontextmanager
    async def cursor(self) -> AsyncIterator[ImmediateCursor]:
        with self._connection.cursor() as cursor:
            yield ImmediateCursor(cursor)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """A savepoint inside the write's transaction (`_unique`)."""
        with self._connection.transaction():
            yield
