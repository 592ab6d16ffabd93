"""A big import prepares its documents in worker processes: the report and the stored mesh are
exactly what preparing them in-process gives."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from typing import Any

import pytest

from knowmesh_mcp.services import import_export, importing
from knowmesh_mcp.services import mesh as mesh_module
from knowmesh_mcp.services.importing import InvalidSource
from knowmesh_mcp.services.mesh import Mesh

from conftest import SEARCH_TABLES, fts5_segments, index_of

pytestmark = pytest.mark.anyio


def documents(make_doc) -> list[tuple[str, Any]]:
    """Valid nodes with, among them, every kind of problem an import reports."""
    items: list[tuple[str, Any]] = []
    for i in range(30):
        items.append((f"nodes.jsonl:{i + 1}", make_doc(id=f"python/imported-{i}",
                                                       error=f"ImportError: cannot import name 'n{i}' from 'pkg{i}'")))
    items.insert(3, ("bad.json", make_doc(id="Python/BAD")))
    items.insert(7, ("broken.json", InvalidSource("invalid JSON: Expecting value: line 1 column 1 (char 0)")))
    items.insert(11, ("again.json", make_doc(id="python/imported-2", error="ImportError: cannot import name 'x' from 'y'")))
    items.insert(15, ("twin.json", make_doc(id="python/imported-twin", error="ImportError: cannot import name 'n5' from 'pkg5'")))
    items.insert(19, ("versioned.json", {**make_doc(id="python/imported-versioned", error="KeyError: 'versioned'"),
                                         "version": "sha256:forged"}))
    items.append(("not-an-object.json", ["a", "list"]))
    return items


class CountingPool(ProcessPoolExecutor):
    tasks = 0

    def submit(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        CountingPool.tasks += 1
        return super().submit(*args, **kwargs)


async def import_into(path, items, **options) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    service = await Mesh.open(path, seed=False)
    try:
        report = await service.documents.import_documents(items, **options)
        exported = [document async for document in service.documents.export_documents()]
    finally:
        await service.close()
    return asdict(report), exported


async def test_worker_processes_prepare_what_the_event_loop_would(tmp_path, make_doc, monkeypatch):
    items = documents(make_doc)
    serial = await import_into(tmp_path / "serial.db", items)
    monkeypatch.setattr(importing, "PARALLEL_FROM", 5)
    monkeypatch.setattr(importing, "CHUNK", 4)
    monkeypatch.setattr(importing, "ProcessPoolExecutor", CountingPool)
    CountingPool.tasks = 0
    pooled = await import_into(tmp_path / "pooled.db", items)
    assert CountingPool.tasks == 8  # the 31 documents after the first 5, four at a time
    assert pooled == serial
    report, exported = pooled
    assert len(report["created"]) == 31 and len(exported) == 31
    assert [entry["source"] for entry in report["invalid"]] == ["bad.json", "broken.json", "not-an-object.json"]
    assert [entry["source"] for entry in report["skipped"]] == ["again.json", "twin.json"]
    assert next(d for d in exported if d["id"] == "python/imported-versioned")["version"] != "sha256:forged"


async def test_a_pooled_dry_run_writes_nothing(tmp_path, make_doc, monkeypatch):
    monkeypatch.setattr(importing, "PARALLEL_FROM", 2)
    report, exported = await import_into(tmp_path / "dry.db", documents(make_doc), dry_run=True)
    assert len(report["created"]) == 31
    assert exported == []


async def test_a_big_import_merges_each_search_table_into_one_segment(tmp_path, make_doc, monkeypatch):
    """Each import transaction leaves FTS5 a new segment, which every search then reads; an import that
    wrote a quarter of the mesh or more (and a rebuild of the index) merges them, a small one does not."""
    monkeypatch.setattr(import_export, "IMPORT_BATCH", 5)  # 12 transactions, as a big import makes
    path = tmp_path / "mesh.db"
    items = [(f"n{i}.json", make_doc(id=f"python/segment-{i}", error=f"ImportError: cannot import name 'n{i}' from 'pkg{i}'"))
             for i in range(60)]
    report, _ = await import_into(path, items)
    assert len(report["created"]) == 60
    assert [fts5_segments(path, table) for table in SEARCH_TABLES] == [1, 1, 1]

    report, _ = await import_into(path, [(f"m{i}.json", make_doc(id=f"python/later-{i}", error=f"KeyError: 'later{i}'"))
                                         for i in range(5)])  # 5 of 65 nodes: not worth rewriting the index
    assert len(report["created"]) == 5
    assert fts5_segments(path, "node_search") == 2

    connection = sqlite3.connect(path)
    with connection:
        connection.execute("UPDATE meta SET value = '0' WHERE key = 'search_index_version'")
    connection.close()
    service = await Mesh.open(path, seed=False)  # rebuilds the index: every row rewritten
    try:
        found = await service.searching.search("ImportError: cannot import name 'n7' from 'pkg7'")
    finally:
        await service.close()
    assert found["results"][0]["id"] == "python/segment-7"
    assert [fts5_segments(path, table) for table in SEARCH_TABLES] == [1, 1, 1]


def stale_search_index(path) -> None:
    """As an upgrade of the search code leaves a mesh: its index built by an older version."""
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE meta SET value = '0' WHERE key = 'search_index_version'")
    connection.close()


async def test_an_upgrade_rebuilds_a_big_index_in_a_process_pool_exactly_as_in_process(tmp_path, make_doc, monkeypatch):
    """Opening a mesh whose index an older version built rebuilds it; past PARALLEL_FROM nodes the
    pages are indexed by worker processes while the open writes those already indexed."""
    items = [(f"n{i}.json", make_doc(id=f"python/upgrade-{i}", error=f"ImportError: cannot import name 'u{i}' from 'pkg{i}'"))
             for i in range(90)]
    path = tmp_path / "mesh.db"
    await import_into(path, items)
    built = index_of(str(path))
    pooled_pages: list[int] = []
    pooled = importing.pooled

    async def counting(chunks, task):
        async for result in pooled(chunks, task):
            pooled_pages.append(len(result[1]))
            yield result

    for parallel_from in (importing.PARALLEL_FROM, 1):  # in-process (90 nodes), then in the pool
        monkeypatch.setattr(importing, "PARALLEL_FROM", parallel_from)
        monkeypatch.setattr(importing, "pooled", counting)
        monkeypatch.setattr(mesh_module, "CHUNK", 20)
        stale_search_index(path)
        seen: list[tuple[int, int]] = []
        service = await Mesh.open(path, seed=False, progress=lambda done, total: seen.append((done, total)))
        try:
            found = await service.searching.search("ImportError: cannot import name 'u77' from 'pkg77'")
        finally:
            await service.close()
        assert found["results"][0]["id"] == "python/upgrade-77"
        assert seen == [(20, 90), (40, 90), (60, 90), (80, 90), (90, 90)]
        assert index_of(str(path)) == built
    assert pooled_pages == [20, 20, 20, 20, 10]  # the in-process rebuild started no pool

