"""`python -m knowmesh_mcp.store.postgres URL`: migrate an empty database, write store/postgres/schema.sql."""

import asyncio
import sys

from knowmesh_mcp.store.postgres.connection import migrate
from knowmesh_mcp.store.postgres.schema import dump_schema, postgres_dir

url = sys.argv[1]
asyncio.run(migrate(url))
(postgres_dir() / "schema.sql").write_text(dump_schema(url), encoding="utf-8")
