"""One write transaction on SQLite: the Writer half of `store.interface`.

Only `SqliteStore.write()` makes one, inside its `BEGIN IMMEDIATE`. The SQL is in the mixins of
`nodes`, `sync`, `search` and `evidence`; values are always bound parameters (`?`), table and
column names our constants.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import aiosqlite

from knowmesh_mcp.store.sqlite.connection import select_in
from knowmesh_mcp.store.sqlite.evidence import EvidenceWrites
from knowmesh_mcp.store.sqlite.nodes import NodeWrites
from knowmesh_mcp.store.sqlite.search import SearchWrites
from knowmesh_mcp.store.sqlite.sync import SyncWrites


class SqliteWriter(NodeWrites, SyncWrites, SearchWrites, EvidenceWrites):
    """The SQL of one write transaction. Only `SqliteStore.write()` makes one."""

    def __init__(self, connection: aiosqlite.Connection):
        self.connection = connection
        self.indexed_rows = 0  # nodes whose search-index rows this transaction wrote (see `SqliteStore.bulk_import`)

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # No row factory is set: sqlite3 returns plain tuples, whatever aiosqlite's stubs call them.
        return cast(list[tuple[Any, ...]], list(await self.connection.execute_fetchall(sql, params)))

    async def _all_in(self, sql: str, values: Iterable[Any]) -> list[tuple[Any, ...]]:
        return await select_in(self._all, sql, values)
