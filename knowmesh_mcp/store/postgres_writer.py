"""One write transaction on PostgreSQL: the Writer half of `store.interface`.

Only `PostgresStore.write()` makes one, inside a transaction that holds the mesh's write lock. The
SQL is in the mixins of `pg_nodes`, `pg_search` and `pg_evidence`; values are always bound
parameters (`%s`), table and column names our constants.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .pg_evidence import EvidenceWrites
from .pg_nodes import NodeWrites
from .pg_search import SearchWrites


class PostgresWriter(NodeWrites, SearchWrites, EvidenceWrites):
    def __init__(self, connection: Any):
        self.connection = connection

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = await self.connection.execute(sql, params)
        return await cursor.fetchall() if cursor.description else []
