"""The SQLite backend, the embedded default (a personal mesh): `SqliteStore` and `SqliteWriter`.

`connection` opens a file (checked, identified, migrated) and names SQLite's faults; `schema`
reads the migrations; `nodes`, `sync`, `search` and `evidence` hold the SQL of each concern, as
mixins of the store (reads) and of the writer (one write transaction). `postgres` mirrors these
modules; what both share is in `store.common`.
"""

from knowmesh_mcp.store.sqlite.store import SqliteStore
from knowmesh_mcp.store.sqlite.writer import SqliteWriter

__all__ = ["SqliteStore", "SqliteWriter"]
