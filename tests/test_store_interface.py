"""`store.interface` is the whole store the service may use, and each backend implements it exactly."""

from __future__ import annotations

import inspect

import pytest

from knowmesh_mcp.store import interface
from knowmesh_mcp.store.postgres import PostgresStore, PostgresWriter
from knowmesh_mcp.store.sqlite import SqliteStore, SqliteWriter


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")}


@pytest.mark.parametrize(("protocol", "backend"), [
    (interface.Store, SqliteStore), (interface.Writer, SqliteWriter),
    (interface.Store, PostgresStore), (interface.Writer, PostgresWriter),
], ids=["sqlite-store", "sqlite-writer", "postgres-store", "postgres-writer"])
def test_each_backend_implements_the_interface_exactly(protocol, backend):
    wanted, offered = public_methods(protocol), public_methods(backend)
    assert set(wanted) == set(offered), f"only in the interface: {set(wanted) - set(offered)}; " \
                                        f"only in the backend: {set(offered) - set(wanted)}"
    for name, signature in wanted.items():
        if name in ("write", "bulk_import"):  # @asynccontextmanager generators; the interface names what they return
            assert list(offered[name].parameters) == ["self"]
            continue
        assert str(offered[name]) == str(signature), name
        for kind in (inspect.iscoroutinefunction, inspect.isasyncgenfunction):
            assert kind(getattr(backend, name)) == kind(getattr(protocol, name)), (name, kind.__name__)


def test_the_service_and_adapters_never_import_a_backend_or_a_driver():
    """Only the store package knows SQL drivers; the rest imports `knowmesh_mcp.store` names."""
    import pathlib

    package = pathlib.Path(interface.__file__).resolve().parent.parent
    for module in package.glob("*.py"):
        text = module.read_text(encoding="utf-8")
        for forbidden in ("import sqlite3", "import aiosqlite", "import psycopg", "store.sqlite", "store.postgres"):
            assert forbidden not in text, f"{module.name} uses {forbidden}"
