"""Nodes, versions, revisions, edits, the change feed, sync bookkeeping and redirects on PostgreSQL.

`NodeReads` is mixed into `postgres.PostgresStore` (reads: `self._fetchall(sql, params)`, outside any
transaction), `NodeWrites` into `postgres_writer.PostgresWriter` (one write transaction:
`self._all(sql, params)` and `self.connection`, a psycopg AsyncConnection). Same signatures and
results as `sqlite.Store` / `sqlite.Writer` (see `interface`); values are bound `%s` parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class NodeReads:
    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


class NodeWrites:
    connection: Any

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
