"""The store: SQLite's migrations and pragmas; on both backends, immutability and all-or-nothing writes."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from knowmesh_mcp.core.model import validate_node
from knowmesh_mcp.core.normalize import NORMALIZER_VERSION
from knowmesh_mcp.services.publishing import Prepared
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.store import SqliteStore, consolidated_schema, migrations, store_dir

pytestmark = pytest.mark.backends("sqlite", "postgres")


def schema_of(connection: sqlite3.Connection) -> list[tuple[str, str, str]]:
    rows = connection.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    return [(kind, name, " ".join(sql.split())) for kind, name, sql in rows]


def test_schema_sql_equals_the_migrations(tmp_path):
    assert (store_dir() / "schema.sql").read_text(encoding="utf-8") == consolidated_schema(), (
        "store/schema.sql is out of date: run `python -m knowmesh_mcp.store`"
    )
    from_schema = sqlite3.connect(":memory:")
    from_schema.executescript((store_dir() / "schema.sql").read_text(encoding="utf-8"))
    migrated = sqlite3.connect(tmp_path / "m.db")
    migrated.close()

    async def migrate() -> None:
        store = await SqliteStore.open(tmp_path / "m.db")
        await store.close()

    import anyio

    anyio.run(migrate)
    assert schema_of(sqlite3.connect(tmp_path / "m.db")) == schema_of(from_schema)


@pytest.mark.anyio
async def test_migrations_are_recorded_and_applied_once(tmp_path):
    path = tmp_path / "k.db"
    first = await SqliteStore.open(path)
    assert first.created
    await first.close()
    second = await SqliteStore.open(path)
    assert not second.created
    await second.close()
    rows = sqlite3.connect(path).execute("SELECT version, name FROM schema_migrations").fetchall()
    assert rows == [(number, name) for number, name, _ in migrations()]


@pytest.mark.anyio
async def test_pragmas(tmp_path):
    store = await SqliteStore.open(tmp_path / "k.db")
    try:
        async with store.write() as tx:
            for pragma, expected in (("journal_mode", "wal"), ("foreign_keys", 1), ("busy_timeout", 10000)):
                async with tx.connection.execute(f"PRAGMA {pragma}") as cursor:
                    assert (await cursor.fetchone())[0] == expected
    finally:
        await store.close()


# What each backend raises when its constraints or triggers refuse a write.
INTEGRITY_ERRORS = (sqlite3.IntegrityError, psycopg.IntegrityError)


async def count_rows(connection, table: str) -> int:
    """A table's row count through a writer's own connection (aiosqlite's and psycopg's read alike)."""
    cursor = await connection.execute(f"SELECT count(*) FROM {table}")
    return (await cursor.fetchone())[0]


@pytest.mark.anyio
async def test_versions_and_revisions_are_immutable(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    for statement in (
        "UPDATE node_versions SET document = '{}'",
        "DELETE FROM node_versions",
        "UPDATE article_revisions SET summary = 'x'",
        "DELETE FROM article_revisions",
    ):
        with pytest.raises(INTEGRITY_ERRORS):
            async with service.store.write() as tx:
                await tx.connection.execute(statement)
    read = await service.nodes.read_node("python/module-not-found-venv")
    assert read.body["content"]["symptom"].startswith("Import fails")


@pytest.mark.anyio
async def test_a_failing_write_leaves_nothing_behind(service: Mesh, make_doc):
    """Node row, version, revision and index entry commit together or not at all."""
    prepared = Prepared.of(validate_node(make_doc()))
    broken = prepared.new_node(kind="create", agent=None, summary="Create node")
    # A second node whose revision id collides with the first: its insert fails mid-transaction.
    other = Prepared.of(validate_node(make_doc(id="python/other", error="KeyError: 'x'")))
    collide = other.new_node(kind="create", agent=None, summary="x")
    object.__setattr__(collide, "revision_id", broken.revision_id)
    with pytest.raises(INTEGRITY_ERRORS):
        async with service.store.write() as tx:
            await tx.insert_nodes([broken, collide])
    assert await service.store.count_nodes() == 0
    async with service.store.write() as tx:
        for table in ("nodes", "node_versions", "article_revisions", "solution_revisions", "node_search", "node_index",
                      "node_signatures"):
            assert await count_rows(tx.connection, table) == 0, table


@pytest.mark.anyio
async def test_normalizer_version_change_recomputes_hashes(tmp_path, make_doc):
    path = tmp_path / "k.db"
    service = await Mesh.open(path, seed=False)
    await service.creation.create_node(make_doc())
    async with service.store.write() as tx:
        await tx.connection.execute("UPDATE nodes SET signature_hash = 'stale'")
        await tx.set_meta("normalizer_version", "0")
    await service.close()

    reopened = await Mesh.open(path, seed=False)
    try:
        assert await reopened.store.get_meta("normalizer_version") == str(NORMALIZER_VERSION)
        with pytest.raises(Exception) as caught:
            await reopened.creation.create_node(make_doc(id="python/copy"))
        assert caught.value.code == "duplicate_node"  # type: ignore[attr-defined]
    finally:
        await reopened.close()


@pytest.mark.anyio
async def test_new_database_gets_the_starter_corpus_unless_empty(tmp_path):
    seeded = await Mesh.open(tmp_path / "seeded.db")
    empty = await Mesh.open(tmp_path / "empty.db", seed=False)
    try:
        assert await seeded.store.count_nodes() >= 40
        assert await empty.store.count_nodes() == 0
    finally:
        await seeded.close()
        await empty.close()
