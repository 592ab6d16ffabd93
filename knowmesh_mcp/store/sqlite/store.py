"""An open SQLite mesh, the embedded default: the Store half of `store.interface`.

Reads run on the reader connection, outside any transaction; `write()` is one `BEGIN IMMEDIATE`
transaction on the writer connection, one at a time (`connection` opens both). The SQL of reads is
in the mixins of `nodes`, `sync`, `search` and `evidence`.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import aiosqlite

from knowmesh_mcp.core.errors import database_busy, read_only_database
from knowmesh_mcp.store.common import CandidateTexts
from knowmesh_mcp.store.sqlite.connection import is_busy, open_connections, write_fault
from knowmesh_mcp.store.sqlite.evidence import EvidenceReads
from knowmesh_mcp.store.sqlite.nodes import NodeReads
from knowmesh_mcp.store.sqlite.search import SearchReads
from knowmesh_mcp.store.sqlite.sync import SyncReads
from knowmesh_mcp.store.sqlite.writer import SqliteWriter


class SqliteStore(NodeReads, SyncReads, SearchReads, EvidenceReads):
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
    async def open(cls, path: str | Path) -> SqliteStore:
        """Open a knowmesh database, creating and migrating it if it is new.

        The folder must exist (callers create their default location themselves). A path
        that is not a database, a SQLite database of another application, or a file that
        cannot be read raises `DatabaseUnusable` before anything is written, and no
        connection (nor its thread) outlives a failed open. A mesh this process may read
        but not write (a read-only file, folder or mount) opens read-only: searches and
        reads work, every write is `read_only_database`.
        """
        opened = await open_connections(path)
        return cls(opened.path, opened.writer, opened.reader, opened.created, read_only=opened.read_only)

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
    async def write(self) -> AsyncIterator[SqliteWriter]:
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
                if is_busy(error):  # past busy_timeout: another process holds the file's write lock
                    raise database_busy() from error
                fault = write_fault(error, self.path)
                if fault is None:
                    raise
                raise fault from error
            writer = SqliteWriter(self._writer)
            try:
                yield writer
                await self._writer.execute("COMMIT")
            except BaseException as error:
                if self._writer.in_transaction:  # not after SQLite rolled it back itself
                    await self._writer.execute("ROLLBACK")
                fault = write_fault(error, self.path)
                if fault is not None:
                    raise fault from error
                raise
            self.write_generation += 1
            if self._bulk_indexed is not None:
                self._bulk_indexed += writer.indexed_rows

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # One hop to the connection's thread (execute + fetchall would be two): reads are mostly hops.
        # No row factory is set: sqlite3 returns plain tuples, whatever aiosqlite's stubs call them.
        return cast(list[tuple[Any, ...]], list(await self._reader.execute_fetchall(sql, params)))
