"""Shared fixtures: a real store on disk, a real HTTP server on a loopback port, sample documents."""

from __future__ import annotations

import copy
import itertools
import os
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import pytest
import uvicorn
from hypothesis import settings
from mcp import Client

from knowmesh_mcp.api.app import build_app, server_config
from knowmesh_mcp.mcp.server import build_mcp_server
from knowmesh_mcp.services.remote import RemoteMesh
from knowmesh_mcp.services.remote_api import RemoteApi
from knowmesh_mcp.services.mesh import Mesh

# Speed belongs to bench/, not to tests: no per-example deadline, so a busy machine cannot flake.
settings.register_profile("knowmesh", deadline=None)
settings.load_profile("knowmesh")

BASE_DOCUMENT: dict[str, Any] = {
    "id": "python/module-not-found-venv",
    "ecosystem": "python",
    "title": "ModuleNotFoundError although the package is installed",
    "signature": {
        "error": "ModuleNotFoundError: No module named 'requests'",
        "environment": ["python>=3.8"],
        "aliases": ["ImportError: No module named requests"],
    },
    "content": {
        "symptom": "Import fails even though pip says the package is installed.",
        "context": "python 3.12, pip, a virtualenv created but not used by the interpreter.",
        "root_cause": "pip installed into a different interpreter than the one running the script.",
        "solutions": [
            {
                "id": "venv-macos",
                "title": "Use the venv interpreter (macOS)",
                "env": ["macos"],
                "fix": ["python3 -m venv .venv", ".venv/bin/python -m pip install requests"],
                "verify": {"command": ".venv/bin/python -c 'import requests'", "expected": "exit 0"},
                "notes": "Homebrew python and python.org python are different interpreters.",
            },
            {
                "id": "venv-linux",
                "title": "Use the venv interpreter (Linux)",
                "env": ["linux"],
                "fix": ["python3 -m venv .venv", ".venv/bin/python -m pip install requests"],
                "verify": {"command": ".venv/bin/python -c 'import requests'", "expected": "exit 0"},
            },
        ],
        "alternatives": ["pip install --user requests"],
        "failed_attempts": ["pip install requests (went to the system interpreter)"],
        "boundaries": ["Not for editable installs broken by a moved project."],
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def make_doc() -> Callable[..., dict[str, Any]]:
    """A valid node document; keyword arguments replace top-level keys, `error=` the signature error."""

    def make(**overrides: Any) -> dict[str, Any]:
        document = copy.deepcopy(BASE_DOCUMENT)
        error = overrides.pop("error", None)
        if error is not None:
            document["signature"]["error"] = error
        document.update(overrides)
        return document

    return make


@pytest.fixture
def invalid_documents(make_doc) -> list[tuple[str, dict[str, Any], str]]:
    """(label, document, JSON Pointer of the broken field): the bad inputs every interface must refuse."""

    def with_(path, value):
        document = make_doc()
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return document

    return [
        ("id with ..", with_(("id",), "python/.."), "/id"),
        ("id with extra slashes", with_(("id",), "python//x"), "/id"),
        ("id with three segments", with_(("id",), "python/a/b"), "/id"),
        ("upper-case id", with_(("id",), "Python/Module"), "/id"),
        ("unicode id", with_(("id",), "python/ﬁx"), "/id"),
        ("zero-width id", with_(("id",), "python/a\u200bb"), "/id"),
        ("empty id", with_(("id",), ""), "/id"),
        ("empty title", with_(("title",), ""), "/title"),
        ("whitespace symptom", with_(("content", "symptom"), " \t\n "), "/content/symptom"),
        ("title wrong type", with_(("title",), {"a": 1}), "/title"),
        ("fix wrong type", with_(("content", "solutions", 0, "fix"), "rm -rf"), "/content/solutions/0/fix"),
        ("unknown field", with_(("surprise",), 1), "/surprise"),
        ("unknown content field", with_(("content", "extra"), "x"), "/content/extra"),
        ("legacy fix", with_(("content", "fix"), ["x"]), "/content/fix"),
        ("missing solutions", {**make_doc(), "content": {k: v for k, v in make_doc()["content"].items() if k != "solutions"}},
         "/content/solutions"),
        ("NUL in error", with_(("signature", "error"), ""), "/signature/error"),
    ]


@asynccontextmanager
async def opened(path: Any, *, seed: bool = False) -> AsyncIterator[Mesh]:
    """A real Mesh on a database file, closed afterwards."""
    service = await Mesh.open(path, seed=seed)
    try:
        yield service
    finally:
        await service.close()


@pytest.fixture
async def sqlite_service(tmp_path) -> AsyncIterator[Mesh]:
    """A Mesh on SQLite only: for tests of what only the embedded backend has (its file, its driver)."""
    async with opened(tmp_path / "test.db") as service:
        yield service


# -- Backends: a test says which it runs on ------------------------------------------------------
#
# `@pytest.mark.backends("sqlite", "postgres")` (or `pytestmark = ...` for a module) makes the `backend`
# fixture, and so every fixture built on it (`service` here; a module's own mesh fixtures), run the
# test once per backend named, less those that KNOWMESH_TEST_BACKENDS (default "sqlite,postgres")
# leaves out. A test without the marker runs on SQLite alone. A machine without PostgreSQL skips the
# PostgreSQL half; CI requires it (KNOWMESH_REQUIRE_POSTGRES=1).

ALL_BACKENDS = ("sqlite", "postgres")


def requested_backends() -> list[str]:
    """The backends this run asks for: KNOWMESH_TEST_BACKENDS=sqlite (or =postgres) narrows it."""
    return [name for name in os.environ.get("KNOWMESH_TEST_BACKENDS", ",".join(ALL_BACKENDS)).split(",") if name]



def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "backends(*names): run the test (each test of a module, as `pytestmark`) on each backend named "
        "(sqlite, postgres) that KNOWMESH_TEST_BACKENDS asks for; unmarked tests run on SQLite alone",
    )
    config.addinivalue_line(
        "markers",
        "slow: a stress test (hundreds of generated examples, load, concurrency, killed processes, fuzzing); "
        '`-m "not slow"` leaves them out for a quick loop',
    )


def marked_backends(node: pytest.Item) -> tuple[str, ...] | None:
    """The backends named by the closest `backends` marker, or None without one; an unknown name is an error."""
    marker = node.get_closest_marker("backends")
    if marker is None:
        return None
    unknown = sorted(set(marker.args) - set(ALL_BACKENDS))
    if not marker.args or unknown:
        raise pytest.UsageError(f"{node.nodeid}: backends() takes one or more of {ALL_BACKENDS}, not {unknown or 'none'}")
    return tuple(marker.args)


def parametrizes_backend_itself(metafunc: pytest.Metafunc) -> bool:
    """A test may give `backend` values of its own (`@pytest.mark.parametrize("backend", ...)`): those hold."""
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else marker.kwargs.get("argnames", ())
        if "backend" in ([name.strip() for name in names.split(",")] if isinstance(names, str) else names):
            return True
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames or parametrizes_backend_itself(metafunc):
        return
    marked = marked_backends(metafunc.definition)
    if marked is None:
        metafunc.parametrize("backend", ["sqlite"])
        return
    requested = requested_backends()
    chosen = [name for name in requested if name in marked]
    if chosen:
        metafunc.parametrize("backend", chosen)
    else:
        reason = f"marked for {', '.join(marked)}; KNOWMESH_TEST_BACKENDS={','.join(requested)}"
        metafunc.parametrize("backend", [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="none-asked-for")])


def runs_on_postgres(test: pytest.Function) -> bool:
    """A PostgreSQL variant: parametrized onto it, or asking for the PostgreSQL server outright (`both_stores`)."""
    callspec = getattr(test, "callspec", None)  # only a parametrized test has one
    on_backend = callspec is not None and callspec.params.get("backend") == "postgres"
    return on_backend or "postgres_server" in test.fixturenames


def broken_promises(children: list[pytest.Item | pytest.Collector]) -> list[str]:
    """What among a module's tests is marked for postgres (the module, or one test) and yet has no
    PostgreSQL variant. Tests in classes are not looked at: the suite has none."""
    promised: dict[str, bool] = {}
    for test in children:
        closest = next(test.iter_markers_with_node("backends"), None)
        if not isinstance(test, pytest.Function) or closest is None or "postgres" not in closest[1].args:
            continue
        owner = test.nodeid.split("[", 1)[0] if closest[0] is test else closest[0].nodeid
        promised[owner] = promised.get(owner, False) or runs_on_postgres(test)
    return sorted(owner for owner, kept in promised.items() if not kept)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A `backends` marker naming postgres is a promise, kept while collecting: a mesh fixture that does
    not build on `backend` makes its tests run on SQLite alone, quietly. Then the module fails to
    collect, as an import error would, and the run stops before any test (under xdist too)."""
    report = yield
    if isinstance(collector, pytest.Module) and report.passed and "postgres" in requested_backends():
        broken = broken_promises(report.result)
        if broken:
            report.outcome = "failed"
            report.longrepr = (
                'marked backends(..., "postgres") but none of its tests runs on PostgreSQL (does its mesh '
                "fixture build on conftest's `backend`?): " + ", ".join(broken)
            )
            report.result = []
    return report


@pytest.fixture
def backend() -> str:
    """The backend this test runs on, "sqlite" or "postgres": pytest_generate_tests parametrizes it from
    the `backends` marker; a fixture that makes a mesh asks for it instead of choosing its own."""
    return "sqlite"


@pytest.fixture
async def service(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Mesh]:
    """A real Mesh on an empty mesh, on the test's `backend`."""
    target = tmp_path / "test.db" if backend == "sqlite" else request.getfixturevalue("pg_database")
    async with opened(target) as service:
        yield service


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def serving(app: Any, *, trust_proxy: str | None = None) -> AsyncIterator[str]:
    """Serve an ASGI app with a real uvicorn server on a free loopback port, configured as
    `serve --http` configures it; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(server_config(app, host="127.0.0.1", port=port, trust_proxy=trust_proxy))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


@pytest.fixture
async def base_url(service: Mesh) -> AsyncIterator[str]:
    """A real uvicorn server over the `service` fixture's store, on a free loopback port."""
    async with serving(build_app(service=service)) as url:
        yield url


@pytest.fixture
async def http(base_url: str) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(base_url=base_url, timeout=10) as client:
        yield client


@asynccontextmanager
async def remote_client(url: str, *, timeout: float | None = None, mode: str = "auto", **options: Any) -> AsyncIterator[Client]:
    """A real MCP client on a server whose tools answer through `RemoteMesh(RemoteApi(url))`."""
    remote = RemoteMesh(RemoteApi(url, timeout=timeout))
    try:
        async with Client(build_mcp_server(lambda: remote, **options), mode=mode) as client:
            yield client
    finally:
        await remote.close()


@pytest.fixture(params=["local", "remote"])
def mcp_connect(request) -> Callable[..., Any]:
    """A real MCP client on a server over `target`: "local" calls the service in-process, "remote"
    goes through a real HTTP server and `RemoteMesh`, as `serve --stdio --remote URL` does."""

    @asynccontextmanager
    async def connect(target: Mesh, mode: str = "auto", **options: Any) -> AsyncIterator[Client]:
        if request.param == "local":
            async with Client(build_mcp_server(lambda: target, **options), mode=mode) as client:
                yield client
            return
        async with serving(build_app(service=target, with_mcp=False, write_limit=0)) as url:
            async with remote_client(url, mode=mode, **options) as client:
                yield client

    return connect


# -- PostgreSQL: a private server for the session, a fresh database per test ----------------------

_DATABASES = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A conninfo URL of a private PostgreSQL server (see postgres_server.py); skipped (or failed in CI) without one."""
    from postgres_server import private_postgres

    with private_postgres() as url:
        yield url


@contextmanager
def new_pg_database(server: str, template: str = "template0") -> Iterator[str]:
    """An empty database of its own on the test server (its URL), dropped afterwards; or a copy of
    `template` (a database of this server no one is connected to)."""
    import psycopg

    name = f"knowmesh_test_{os.getpid()}_{next(_DATABASES)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name} TEMPLATE {template} ENCODING 'UTF8'")
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_database(postgres_server: str) -> Iterator[str]:
    with new_pg_database(postgres_server) as url:
        yield url


@pytest.fixture
async def both_stores(tmp_path, pg_database: str) -> AsyncIterator[dict[str, Any]]:
    """The same empty mesh on both backends: {"sqlite": SqliteStore, "postgres": PostgresStore}. A backend
    test does the same thing to each and asserts they answer alike."""
    from knowmesh_mcp.store import PostgresStore, SqliteStore

    sqlite_store = await SqliteStore.open(tmp_path / "backend.db")
    postgres_store = await PostgresStore.open(pg_database)
    try:
        yield {"sqlite": sqlite_store, "postgres": postgres_store}
    finally:
        await sqlite_store.close()
        await postgres_store.close()


SEARCH_TABLES = ("node_search", "node_heads", "node_grams")  # SQLite's FTS5 tables of the search index


def index_of(path: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of a SQLite mesh's search index, keyed by node id (pks may differ between meshes)."""
    with sqlite3.connect(path) as connection:
        ids = dict(connection.execute("SELECT pk, id FROM nodes"))
        tables = {name: f"SELECT rowid, * FROM {name}" for name in SEARCH_TABLES}
        tables |= {"node_index": "SELECT * FROM node_index", "node_signatures": "SELECT node_pk, * FROM node_signatures",
                   "nodes": "SELECT pk, signature_hash FROM nodes", "term_counts": "SELECT 0, * FROM term_counts"}
        return {name: sorted((ids.get(row[0]), *row[1:]) for row in connection.execute(sql))
                for name, sql in tables.items()}


def fts5_segments(path, table: str) -> int:
    """How many segments an FTS5 table's index holds: its structure record (row 10 of `%_data`) is a
    4-byte cookie, then the number of levels and the number of segments as varints (fts5_index.c)."""
    connection = sqlite3.connect(path)
    try:
        (record,), = connection.execute(f"SELECT block FROM {table}_data WHERE id = 10")
    finally:
        connection.close()
    position, values = 4, []
    while len(values) < 2:
        value = 0
        while True:
            byte = record[position]
            position += 1
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values[1]
