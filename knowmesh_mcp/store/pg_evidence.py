"""Evidence, failed approaches, write limits, dedupe, service issues, tokens, meta, the review queue and maintainer actions on PostgreSQL.

`EvidenceReads` is mixed into `postgres.PostgresStore` (reads: `self._fetchall(sql, params)`, outside any
transaction), `EvidenceWrites` into `postgres_writer.PostgresWriter` (one write transaction:
`self._all(sql, params)` and `self.connection`, a psycopg AsyncConnection). Same signatures and
results as `sqlite.Store` / `sqlite.Writer` (see `interface`); values are bound `%s` parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class EvidenceReads:
    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


class EvidenceWrites:
    connection: Any

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
