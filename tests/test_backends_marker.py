"""conftest's `backends` marker is a promise, kept at collection: what it marks for PostgreSQL has
PostgreSQL tests. Each case is an in-process pytest run (pytester) of a small module with this
suite's conftest as its plugin; `--collect-only`, so no database is needed."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

OWN_MESH = """
import pytest

pytestmark = pytest.mark.backends("sqlite", "postgres")

@pytest.fixture
def mesh(tmp_path):
    return tmp_path / "own.db"  # its own SQLite file: never PostgreSQL, whatever the marker says

def test_on_its_own_mesh(mesh):
    pass
"""

ON_BACKEND = """
import pytest

pytestmark = pytest.mark.backends("sqlite", "postgres")

@pytest.fixture
def mesh(backend, tmp_path):
    return backend

def test_on_the_backend(mesh):
    pass

def test_sqlite_alone_beside_it():
    pass
"""


def collect(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_module=source)
    # This suite's conftest is imported already: `-p conftest` makes it the inner run's plugin.
    return pytester.runpytest_inprocess("-p", "conftest", "-p", "no:xdist", "-p", "no:benchmark", "--collect-only",
                                        "-q", *args)


def test_a_module_marked_for_postgres_without_a_postgres_test_fails_the_run(pytester, monkeypatch):
    monkeypatch.delenv("KNOWMESH_TEST_BACKENDS", raising=False)
    result = collect(pytester, OWN_MESH)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting test_module.py*",
                                 "*none of its tests runs on PostgreSQL*: test_module.py"])


def test_a_test_marked_for_postgres_without_a_postgres_variant_fails_the_run(pytester, monkeypatch):
    monkeypatch.delenv("KNOWMESH_TEST_BACKENDS", raising=False)
    source = OWN_MESH.replace('pytestmark = pytest.mark.backends("sqlite", "postgres")', "").replace(
        "def test_on_its_own_mesh", '@pytest.mark.backends("postgres")\ndef test_on_its_own_mesh'
    )
    result = collect(pytester, source)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*none of its tests runs on PostgreSQL*: test_module.py::test_on_its_own_mesh"])


def test_a_module_whose_mesh_builds_on_backend_keeps_it(pytester, monkeypatch):
    monkeypatch.delenv("KNOWMESH_TEST_BACKENDS", raising=False)
    result = collect(pytester, ON_BACKEND)
    assert result.ret == pytest.ExitCode.OK
    assert [line for line in result.outlines if "::" in line] == [
        "test_module.py::test_on_the_backend[sqlite]",
        "test_module.py::test_on_the_backend[postgres]",
        "test_module.py::test_sqlite_alone_beside_it",
    ]


def test_the_promise_holds_only_for_what_the_run_asks_and_collects(pytester, monkeypatch):
    monkeypatch.setenv("KNOWMESH_TEST_BACKENDS", "sqlite")
    assert collect(pytester, OWN_MESH).ret == pytest.ExitCode.OK, "PostgreSQL not asked for"
    monkeypatch.delenv("KNOWMESH_TEST_BACKENDS")
    only_one = collect(pytester, ON_BACKEND, "test_module.py::test_sqlite_alone_beside_it")
    assert only_one.ret == pytest.ExitCode.OK, "a test picked by its id out of a marked module"


NARROWED = """
import pytest

@pytest.mark.backends("sqlite", "postgres")
def test_on_both(backend):
    pass

@pytest.mark.backends("sqlite")
def test_on_sqlite(backend):
    pass

def test_unmarked(backend):
    pass
"""


def test_the_environment_narrows_marked_tests_and_unmarked_ones_stay_on_sqlite(pytester, monkeypatch):
    monkeypatch.setenv("KNOWMESH_TEST_BACKENDS", "postgres")
    result = collect(pytester, NARROWED)
    assert result.ret == pytest.ExitCode.OK
    assert [line for line in result.outlines if "::" in line] == [
        "test_module.py::test_on_both[postgres]",
        "test_module.py::test_on_sqlite[none-asked-for]",  # skipped when run
        "test_module.py::test_unmarked[sqlite]",
    ]
