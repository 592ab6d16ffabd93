"""The PostgreSQL schema on a real server: migrations equal `store/postgres/schema.sql`, several
servers migrating at once apply each migration once, and the database itself refuses to change
versions, revisions, feedback and the audit log."""

from __future__ import annotations

import asyncio

import pytest

from knowmesh_mcp.store.postgres import connection as pg_connection
from knowmesh_mcp.store.postgres import schema as pg_schema

from conftest import new_pg_database

pytestmark = pytest.mark.anyio


async def test_migrations_build_exactly_the_consolidated_schema(postgres_server: str, pg_database: str):
    assert await pg_connection.migrate(pg_database) == len(pg_schema.migrations())
    with new_pg_database(postgres_server) as from_script:
        await pg_schema.apply_script(from_script, (pg_schema.postgres_dir() / "schema.sql").read_text(encoding="utf-8"))
        migrated, consolidated = await pg_schema.describe(pg_database), await pg_schema.describe(from_script)
    for part in pg_schema.DESCRIBE:
        assert migrated[part] == consolidated[part], (
            f"store/postgres/schema.sql differs in its {part}: run `python -m knowmesh_mcp.store.postgres URL`")
    assert {"pg_trgm"} <= {name for (name,) in migrated["extensions"]}
    tables = {row[0] for row in migrated["columns"]}
    assert {"nodes", "node_versions", "article_revisions", "feedback", "agent_tokens", "maintainer_actions",
            "node_redirects", "node_search", "term_counts", "change_counter"} <= tables


async def test_servers_migrating_at_once_apply_each_migration_once(pg_database: str):
    import psycopg

    # Which server applies which migration depends on who takes the lock first; each applies once.
    applied = await asyncio.gather(*(pg_connection.migrate(pg_database) for _ in range(3)))
    assert sum(applied) == len(pg_schema.migrations())
    assert await pg_connection.migrate(pg_database) == 0
    async with await psycopg.AsyncConnection.connect(pg_database) as db:
        versions = [row[0] for row in await (await db.execute("SELECT version FROM schema_migrations ORDER BY version")).fetchall()]
    assert versions == [number for number, _, _ in pg_schema.migrations()]


async def test_the_database_refuses_to_change_facts(pg_database: str):
    import psycopg

    await pg_connection.migrate(pg_database)
    async with await psycopg.AsyncConnection.connect(pg_database, autocommit=True) as db:
        await db.execute("""INSERT INTO nodes (id, ecosystem, status, title, current_version, current_revision, has_answer,
                                               signature_hash, quoted_values, created_at, updated_at, change_seq)
                            VALUES ('python/x', 'python', 'draft', 'X', 'sha256:a', 1, 0, 'h', '[]', 't', 't', 1)""")
        await db.execute("INSERT INTO node_versions VALUES ('sha256:a', 'python/x', '{}', '{}', 't')")
        await db.execute("""INSERT INTO article_revisions (revision_id, node_id, revision, kind, version, summary, changes,
                                                           created_at) VALUES ('r1', 'python/x', 1, 'create', 'sha256:a', 's', '[]', 't')""")
        await db.execute("""INSERT INTO feedback (node_id, solution_id, solution_revision, outcome, cluster, environment,
                                                  created_at) VALUES ('python/x', 's', 1, 'solved', '', '{}', 't')""")
        await db.execute("""INSERT INTO maintainer_actions (action, target, detail, maintainer_id, proof, created_at)
                            VALUES ('set_status', 'python/x', '{}', 'mia', 'token', 't')""")
        for statement in ("UPDATE node_versions SET document = '[]'", "DELETE FROM node_versions",
                          "UPDATE article_revisions SET summary = 'forged'", "DELETE FROM article_revisions",
                          "UPDATE feedback SET outcome = 'failed'", "UPDATE maintainer_actions SET note = 'x'",
                          "DELETE FROM maintainer_actions"):
            with pytest.raises(psycopg.errors.RestrictViolation):
                await db.execute(statement)
        # A sync moves a revision aside only after recording it: then it may go.
        await db.execute("""INSERT INTO sync_conflicts (remote, node_id, base_revision, remote_revision, local_revisions,
                                                        both_changed, created_at) VALUES ('r', 'python/x', 1, 2, '[]', '[]', 't')""")
        await db.execute("INSERT INTO moved_revisions SELECT 'r1', id FROM sync_conflicts")
        await db.execute("DELETE FROM article_revisions WHERE revision_id = 'r1'")
        assert (await (await db.execute("SELECT count(*) FROM article_revisions")).fetchone()) == (0,)
