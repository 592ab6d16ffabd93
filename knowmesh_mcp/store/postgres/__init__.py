"""The PostgreSQL backend for a team's mesh: `PostgresStore` and `PostgresWriter`.

The same modules as `sqlite`, for the same concerns: `connection` (migrating, the write lock, the
planner's settings, PostgreSQL's faults), `schema` (store/postgres/migrations and the consolidated
store/postgres/schema.sql), and `nodes`, `sync`, `search` and `evidence` with the SQL of each concern
as mixins of the store (reads) and the writer (one write transaction); `immediate` runs that
transaction on a blocking connection. What both backends share is in `store.common`.

    python -m knowmesh_mcp.store.postgres postgresql://...   # migrate an empty database, write schema.sql
"""

from knowmesh_mcp.store.postgres.store import PostgresStore
from knowmesh_mcp.store.postgres.writer import PostgresWriter

__all__ = ["PostgresStore", "PostgresWriter"]
