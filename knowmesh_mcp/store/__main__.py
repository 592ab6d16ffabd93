"""`python -m knowmesh_mcp.store`: write store/schema.sql from the SQLite migrations."""

from knowmesh_mcp.store.common import store_dir
from knowmesh_mcp.store.sqlite.schema import consolidated_schema

(store_dir() / "schema.sql").write_text(consolidated_schema(), encoding="utf-8")
