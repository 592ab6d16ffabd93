"""A bulk import into a small PostgreSQL mesh builds the search tables' GIN indexes once, at its
end, instead of row by row; whatever happens, the mesh ends up with every index its schema has."""

from __future__ import annotations

from typing import Any

import pytest

from knowmesh_mcp.services.import_export import ImportExport
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.store import PostgresStore
from knowmesh_mcp.store.postgres import store as pg_store
from knowmesh_mcp.store.postgres.connection import migrate
from knowmesh_mcp.store.postgres.schema import describe
from knowmesh_mcp.store.postgres.search import DEFERRED_INDEXES, DEFERRED_KEY

pytestmark = pytest.mark.anyio


async def search_indexes(url: str) -> set[str]:
    """The DEFERRED_INDEXES the database holds; each one missing has its definition kept in `meta`."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as db:
        present = {name for (name,) in await (await db.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexname = ANY(%s)",
            (list(DEFERRED_INDEXES),))).fetchall()}
        kept = {key.removeprefix(DEFERRED_KEY) for (key,) in await (await db.execute(
            "SELECT key FROM meta WHERE key LIKE %s", (DEFERRED_KEY + "%",))).fetchall()}
    assert kept == set(DEFERRED_INDEXES) - present
    return present


def items(make_doc, count: int) -> list[tuple[str, Any]]:
    return [(f"n{i}.json", make_doc(id=f"python/bulk-{i}", error=f"ImportError: cannot import name 'bulk{i}' from 'pkg{i}'"))
            for i in range(count)]


async def test_an_import_into_a_small_mesh_builds_the_indexes_at_its_end(pg_database: str, make_doc, monkeypatch):
    seen_during: list[set[str]] = []
    write_batch = ImportExport._import_batch

    async def watched(self: ImportExport, *args: Any, **kwargs: Any) -> None:
        seen_during.append(await search_indexes(pg_database))
        await write_batch(self, *args, **kwargs)

    monkeypatch.setattr(ImportExport, "_import_batch", watched)
    service = await Mesh.open(pg_database, seed=False)
    try:
        report = await service.documents.import_documents(items(make_doc, 12))
        assert len(report.created) == 12
        assert seen_during and all(found == set() for found in seen_during)  # written without them
        assert await search_indexes(pg_database) == set(DEFERRED_INDEXES)
        found = await service.searching.search("ImportError: cannot import name 'bulk7' from 'pkg7'")
        assert found["results"][0]["id"] == "python/bulk-7"
    finally:
        await service.close()
    await migrate(pg_database)  # the schema is whole: nothing left to apply, nothing missing
    described = await describe(pg_database)
    assert set(DEFERRED_INDEXES) <= {row[1] for row in described["indexes"]}


async def test_an_import_that_fails_still_builds_the_indexes(pg_database: str, make_doc, monkeypatch):
    async def broken(self: ImportExport, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(ImportExport, "_import_batch", broken)
    service = await Mesh.open(pg_database, seed=False)
    try:
        with pytest.raises(RuntimeError):
            await service.documents.import_documents(items(make_doc, 3))
        assert await search_indexes(pg_database) == set(DEFERRED_INDEXES)
    finally:
        await service.close()


async def dying_import(url: str) -> None:
    """What entering `bulk_import` does, by a server that dies before it leaves."""
    store = await PostgresStore.open(url)
    try:
        async with store.write() as tx:
            await tx._defer_search_indexes(pg_store.DEFER_BELOW)
    finally:
        await store.close()


async def indexes_after_reopening(url: str) -> set[str]:
    reopened = await PostgresStore.open(url)
    try:
        return await search_indexes(url)
    finally:
        await reopened.close()


async def test_a_server_that_dies_mid_import_leaves_the_indexes_to_the_next_open(pg_database: str):
    await dying_import(pg_database)
    assert await search_indexes(pg_database) == set()
    assert await indexes_after_reopening(pg_database) == set(DEFERRED_INDEXES)


async def test_an_index_someone_already_built_is_left_as_it_is(pg_database: str):
    import psycopg

    await dying_import(pg_database)
    async with await psycopg.AsyncConnection.connect(pg_database, autocommit=True) as db:  # an operator's repair
        await db.execute("CREATE INDEX node_heads_terms ON public.node_heads USING gin (terms)")
    assert await indexes_after_reopening(pg_database) == set(DEFERRED_INDEXES)


async def test_an_import_into_a_big_mesh_keeps_its_indexes(pg_database: str, make_doc, monkeypatch):
    monkeypatch.setattr(pg_store, "DEFER_BELOW", 1)
    service = await Mesh.open(pg_database, seed=False)
    try:
        await service.documents.import_documents(items(make_doc, 1))
        async with service.store.bulk_import():  # 1 node: not below DEFER_BELOW
            assert await search_indexes(pg_database) == set(DEFERRED_INDEXES)
        dry = await service.documents.import_documents(items(make_doc, 3), dry_run=True)
        assert len(dry.created) == 2
    finally:
        await service.close()
