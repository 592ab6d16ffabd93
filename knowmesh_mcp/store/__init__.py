"""The store: every SQL statement of the package, behind `Store` (reads) and `Writer` (one write
transaction), the Protocols of `interface`. The service and everything above it type against
these two and see only the plain rows they return.

`sqlite` is the embedded backend (a personal mesh, `SqliteStore`); `postgres` the team backend
(`PostgresStore`, its migrations in `store/postgres/`). Both have the same modules, one a concern
(`connection`, `schema`, `nodes`, `sync`, `search`, `evidence`, `writer`, `store`); `common` holds
what both share, `tables` what a copy moves. `open_store` picks a backend by the target.
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
from knowmesh_mcp.store.common import store_dir, utc_now
from knowmesh_mcp.store.interface import STARTER_CORPUS, Store, Writer, meta_made_once
from knowmesh_mcp.store.postgres import PostgresStore, PostgresWriter
from knowmesh_mcp.store.sqlite import SqliteStore, SqliteWriter
from knowmesh_mcp.store.sqlite.schema import consolidated_schema, migrations

POSTGRES_SCHEMES = ("postgresql://", "postgres://")

# mypy holds each backend to the interface here: a method whose signature drifts from the
# Protocol's fails these assignments (tests/test_store_interface.py checks the same at run time).
_STORES: tuple[type[Store], ...] = (SqliteStore, PostgresStore)
_WRITERS: tuple[type[Writer], ...] = (SqliteWriter, PostgresWriter)


def is_postgres(target: str | Path) -> bool:
    return str(target).startswith(POSTGRES_SCHEMES)


async def open_store(target: str | Path) -> Store:
    """The store at `target`: a PostgreSQL URL opens the team backend, anything else a SQLite file."""
    if is_postgres(target):
        return await PostgresStore.open(str(target))
    return await SqliteStore.open(target)


__all__ = [
    "STARTER_CORPUS",
    "meta_made_once",
    "CandidateText",
    "DuplicateRow",
    "Edit",
    "Frequencies",
    "NewNode",
    "NodeRow",
    "PostgresStore",
    "RevisionRow",
    "SearchRow",
    "SqliteStore",
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
