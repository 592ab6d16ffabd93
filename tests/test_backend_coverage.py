"""conftest's ON_BOTH_BACKENDS is a promise: each module it names runs tests on PostgreSQL too.

A name in that set only parametrizes the `service` fixture; a module whose tests build their own
mesh (as test_sync's and test_search's once did) ran on SQLite alone while the set said otherwise.
This collects the suite as CI does, both backends asked for, and checks the promise test by test id.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from conftest import ON_BOTH_BACKENDS

TESTS = Path(__file__).resolve().parent
# A PostgreSQL variant: `postgres` is one of the test id's parameters (`[postgres]`, `[postgres-rust]`).
ON_POSTGRES = re.compile(r"\[(?:[^\]]*-)?postgres(?:-[^\]]*)?\]$")


def collected_ids() -> list[str]:
    # pyproject's options hold (`-q`, no benchmark plugin) but its parallelism; an xdist worker's
    # PYTEST_XDIST_WORKER would make the child believe it is a worker too.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["KNOWMESH_TEST_BACKENDS"] = "sqlite,postgres"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-n", "0", "-p", "no:cacheprovider", str(TESTS)],
        capture_output=True, text=True, env=env, cwd=TESTS.parent, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_every_module_said_to_run_on_both_backends_has_postgresql_tests():
    ids = collected_ids()
    by_module: Counter[str] = Counter()
    on_postgres: Counter[str] = Counter()
    for test_id in ids:
        module = Path(test_id.split("::", 1)[0]).stem
        by_module[module] += 1
        on_postgres[module] += bool(ON_POSTGRES.search(test_id))
    assert len(ids) > 1000, "the whole suite was collected"
    assert sorted(ON_BOTH_BACKENDS - set(by_module)) == [], "names of modules that do not exist"
    assert sorted(m for m in ON_BOTH_BACKENDS if not on_postgres[m]) == [], "modules with no PostgreSQL test"


def test_the_postgresql_pattern_reads_parameters_not_names():
    assert ON_POSTGRES.search("tests/test_store.py::test_pragmas[postgres]")
    assert ON_POSTGRES.search("tests/test_search.py::test_x[postgres-rust-Cargo]")
    assert ON_POSTGRES.search("tests/test_search.py::test_x[a-postgres]")
    assert not ON_POSTGRES.search("tests/test_copy.py::test_a_mesh_copied_to_postgresql_and_back")
    assert not ON_POSTGRES.search("tests/test_x.py::test_y[postgresql-url]")
    assert not ON_POSTGRES.search("tests/test_x.py::test_y[sqlite]")
