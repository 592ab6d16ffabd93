"""The store: every SQL statement of the package, behind `Store` (reads) and `Writer` (one write
transaction). The service and everything above it see only these names and the plain rows they
return.

`sqlite` is the embedded backend (a personal mesh); `postgres` the team backend (its SQL in
`pg_nodes`, `pg_search`, `pg_evidence`, its write transaction in `postgres_writer`, its migrations in
`store/postgres/`); `shared` holds what both compute alike in Python. `open_store` picks one by the
target.
"""

from pathlib import Path

from knowmesh_mcp.core.rows import (
    CandidateText,
    DuplicateRow,
    Edit,
    Frequencies,
    NewNode,
    NodeRow,
    RevisionRow,
    SearchRow,
    StatsRow,
    SyncedHead,
    SyncedRevision,
    TermQuery,
)
from knowmesh_mcp.store.interface import STARTER_CORPUS, meta_made_once
from knowmesh_mcp.store.sqlite import Store, Writer, consolidated_schema, migrations, store_dir, utc_now

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(target: str | Path) -> bool:
    return str(target).startswith(POSTGRES_SCHEMES)


async def open_store(target: str | Path) -> Store:
    """The store at `target`: a PostgreSQL URL opens the team backend, anything else a SQLite file."""
    if is_postgres(target):
        from knowmesh_mcp.store.postgres import PostgresStore

        return await PostgresStore.open(str(target))  # type: ignore[return-value]
    return await Store.open(target)


__all__ = [
    "STARTER_CORPUS",
    "meta_made_once",
    "CandidateText",
    "DuplicateRow",
    "Edit",
    "Frequencies",
    "NewNode",
    "NodeRow",
    "RevisionRow",
    "SearchRow",
    "StatsRow",
    "Store",
    "SyncedHead",
    "SyncedRevision",
    "TermQuery",
    "Writer",
    "consolidated_schema",
    "is_postgres",
    "migrations",
    "open_store",
    "store_dir",
    "utc_now",
]
