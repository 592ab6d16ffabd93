"""One write transaction on PostgreSQL: the Writer half of `store.interface`.

Only `PostgresStore.write()` makes one, inside a transaction that holds the mesh's write lock. The
SQL is in the mixins of `pg_nodes`, `pg_search` and `pg_evidence`; values are always bound
parameters (`%s`), table and column names our constants.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from knowmesh_mcp.store.pg_evidence import EvidenceWrites
from knowmesh_mcp.store.pg_nodes import NodeWrites
from knowmesh_mcp.store.pg_search import SearchWrites


class PostgresWriter(NodeWrites, SearchWrites, EvidenceWrites):
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
