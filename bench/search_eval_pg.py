"""The search evaluation's PostgreSQL side (`bench/search_eval.py --backend postgres|both`).

A server: `tests/postgres_server.py`'s `private_postgres()` (initdb into a temporary folder, a Unix
socket of its own, removed afterwards), or the server `KNOWMESH_TEST_POSTGRES` names. A corpus: one
database per distractor count, created with `CREATE DATABASE` and built by the same
`build_corpus` as the SQLite file (the starter corpus, then the same distractors in the same
order, so node pks, and with them the order of unranked channel rows, are SQLite's).

Nothing is cached on a private server (it lives for one run; building 10,000 distractors takes
about 15 s on 2 cores). On a `KNOWMESH_TEST_POSTGRES` server a finished corpus is kept as
`knowmesh_eval_d{count}_{key}` (`key`: the SQLite corpus's cache key, what shapes the corpus,
and the PostgreSQL store's code and migrations) and reused; it is built under a `_building` name and renamed when done.

Then `compare()` lines the two backends' figures up measure by measure, and `differences()`
lists the queries whose results differ.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 0.01  # issue 13: the same recall@1 on both backends within 0.01
MEASURES = ("recall@1", "recall@5", "mrr", "env_accuracy", "rejected", "precision@likely")


def _postgres_server_module() -> Any:
    name = "knowmesh_tests_postgres_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "postgres_server.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


@contextmanager
def server() -> Iterator[str]:
    """A conninfo URL of a server to make databases on: KNOWMESH_TEST_POSTGRES's, else a private one."""
    import pytest  # tests/postgres_server.py reports a missing server as a pytest skip or failure

    with ExitStack() as stack:
        try:
            url = stack.enter_context(_postgres_server_module().private_postgres())
        except (pytest.skip.Exception, pytest.fail.Exception) as error:
            raise SystemExit(f"no PostgreSQL server for --backend postgres: {error}") from None
        yield url


def with_database(url: str, name: str) -> str:
    """`url` with its database replaced by `name` (host, user and options kept)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def database_key(corpus_key: str) -> str:
    """The SQLite corpus's key and what builds the same corpus on PostgreSQL."""
    digest = hashlib.sha256(corpus_key.encode())
    store = ROOT / "knowmesh_mcp" / "store"
    for path in [*sorted((ROOT / "store" / "postgres" / "migrations").glob("*.sql")),
                 *sorted(store.glob("pg_*.py")), *sorted(store.glob("postgres*.py"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _exists(admin: Any, name: str) -> bool:
    return admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def corpus(url: str, distractors: int, key: str,
           build: Callable[[str, int], Awaitable[None]]) -> tuple[str, float | None]:
    """(URL of a database holding the corpus, seconds its build took or None when reused).

    `build(url, distractors)` fills an empty database (search_eval.build_corpus).
    """
    import psycopg
    from psycopg import sql

    name = f"knowmesh_eval_d{distractors}_{database_key(key)}"
    keep = bool(os.environ.get("KNOWMESH_TEST_POSTGRES"))  # not a private server: keep what is built
    with psycopg.connect(url, autocommit=True) as admin:
        if keep and _exists(admin, name):
            return with_database(url, name), None
        building = name + "_building" if keep else name
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(building)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
    started = time.perf_counter()
    asyncio.run(build(with_database(url, building), distractors))
    seconds = time.perf_counter() - started
    if keep:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(building), sql.Identifier(name)))
    print(f"built PostgreSQL database {name} ({distractors:,} distractors) in {seconds:.1f} s", file=sys.stderr)
    return with_database(url, name), seconds


# --- comparing -----------------------------------------------------------------------------


def compare(sqlite_runs: dict[str, dict[str, Any]], postgres_runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{run: {row: {measure: {"sqlite", "postgres", "diff"}}}} and the recall@1 rows past the tolerance."""
    runs: dict[str, Any] = {}
    beyond: list[dict[str, Any]] = []
    for run, rows in sqlite_runs.items():
        runs[run] = {}
        for row, figures in rows.items():
            other = postgres_runs.get(run, {}).get(row, {})
            entry: dict[str, Any] = {"n": figures["n"], "postgres n": other.get("n")}
            for measure in MEASURES:
                a, b = figures.get(measure), other.get(measure)
                if a is None and b is None:
                    continue
                diff = b - a if a is not None and b is not None else None
                entry[measure] = {"sqlite": a, "postgres": b, "diff": diff}
                if measure == "recall@1" and (diff is None or abs(diff) > TOLERANCE + 1e-12):
                    beyond.append({"run": run, "row": row, "sqlite": a, "postgres": b, "diff": diff})
            for measure in ("bm25 recall@1", "bm25 recall@5", "bm25 mrr"):
                if measure in figures:
                    entry[measure] = figures[measure]
            runs[run][row] = entry
    return {"runs": runs, "recall@1 beyond tolerance": beyond, "tolerance": TOLERANCE}


def differences(sqlite_outcomes: list[dict[str, Any]], postgres_outcomes: list[dict[str, Any]],
                split_of: Callable[[dict[str, Any]], str], likely: float) -> dict[str, Any]:
    """How the two backends' answers to the same queries differ: counts, and every query whose
    top result, its correctness or its side of `likely` differs."""
    same_top = same_list = same_scores = 0
    largest = 0.0
    listed = []
    for mine, theirs in zip(sqlite_outcomes, postgres_outcomes, strict=True):
        query = mine["query"]
        a, b = mine["results"], theirs["results"]
        ids_a, ids_b = [r["id"] for r in a], [r["id"] for r in b]
        same_top += ids_a[:1] == ids_b[:1]
        same_list += ids_a == ids_b
        scores_equal = ids_a == ids_b and all(abs(x["score"] - y["score"]) < 1e-9 for x, y in zip(a, b))
        same_scores += scores_equal
        if ids_a[:1] == ids_b[:1] and a:
            largest = max(largest, abs(a[0]["score"] - b[0]["score"]))
        right_a = bool(a) and a[0]["id"] == query["expect"]
        right_b = bool(b) and b[0]["id"] == query["expect"]
        likely_a, likely_b = bool(a) and a[0]["score"] >= likely, bool(b) and b[0]["score"] >= likely
        solution_a = a[0]["solution"] if a else None
        solution_b = b[0]["solution"] if b else None
        if ids_a[:1] != ids_b[:1] or right_a != right_b or likely_a != likely_b or solution_a != solution_b:
            listed.append({"split": split_of(query), "at": query["at"], "kind": query["kind"], "q": query["q"],
                           "expect": query["expect"], "expect_solution": query["expect_solution"],
                           "env": query["env"],
                           "sqlite": [(r["id"], r["score"], r["match"], r["solution"]) for r in a[:3]],
                           "postgres": [(r["id"], r["score"], r["match"], r["solution"]) for r in b[:3]],
                           "sqlite right": right_a, "postgres right": right_b})
    return {"queries": len(sqlite_outcomes), "same top": same_top, "same top 5": same_list,
            "same top 5 and scores": same_scores, "largest top score difference (same top)": round(largest, 6),
            "listed": listed}
