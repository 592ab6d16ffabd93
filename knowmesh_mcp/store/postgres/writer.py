"""One write transaction on PostgreSQL: the Writer half of `store.interface`.

Only `PostgresStore.write()` makes one, inside a transaction that holds the mesh's write lock. The
SQL is in the mixins of `nodes`, `sync`, `search` and `evidence`; values are always bound
parameters (`%s`), table and column names our constants.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from knowmesh_mcp.store.postgres.evidence import EvidenceWrites
from knowmesh_mcp.store.postgres.nodes import NodeWrites
from knowmesh_mcp.store.postgres.search import SearchWrites
from knowmesh_mcp.store.postgres.sync import SyncWrites


class PostgresWriter(NodeWrites, SyncWrites, SearchWrites, EvidenceWrites):
    """The SQL of one write transaction. Only `PostgresStore.write()` makes one."""

    def __init__(self, connection: Any):
        self.connection = connection

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = await self.connection.execute(sql, params)
        return await cursor.fetchall() if cursor.description else []

    async def _copy(self, table: str, columns: str, rows: Iterable[Sequence[Any]]) -> None:
        """Append rows with COPY: the bulk path of imports, several times cheaper per row than
        INSERT (`table` and `columns` are our constants; the rows travel as COPY data, never SQL)."""
        async with self.connection.cursor() as cursor:
            async with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    await copy.write_row(row)

    async def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            async with self.connection.cursor() as cursor:
                await cursor.executemany(sql, rows)
