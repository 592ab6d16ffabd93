"""The search evaluation: its data (real, cited, split by source) and the product against plain BM25."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
for entry in (ROOT / "bench", ROOT / "bench" / "eval"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass of the module looks its module up there
    spec.loader.exec_module(module)
    return module


check_data = _load("knowmesh_eval_check_data", ROOT / "bench" / "eval" / "check_data.py")
search_eval = _load("knowmesh_bench_search_eval", ROOT / "bench" / "search_eval.py")
QUERIES = check_data.load_queries()


def test_the_data_holds_every_rule_of_its_readme():
    assert check_data.problems() == []


def test_the_corpus_and_queries_are_large_real_and_spread():
    from knowmesh_mcp.services.import_export import load_documents
    from knowmesh_mcp.store import store_dir

    documents = [raw for _, raw in load_documents([store_dir() / "starter"])]
    assert len(documents) >= 120
    assert len({raw["ecosystem"] for raw in documents}) >= 12
    assert len(QUERIES) >= 800
    real = [q for q in QUERIES if q["source"] != "written"]
    assert 2 * len(real) >= len(QUERIES)
    assert len({check_data.thread(q["source"]) for q in real}) >= 300  # many threads, not a few long ones
    kinds = Counter(q["kind"] for q in QUERIES)
    for kind in search_eval.KINDS:
        assert kinds[kind] >= 40, kind


def test_the_halves_are_split_by_source():
    halves = {"dev": Counter(), "test": Counter()}
    by_thread: dict[str, set[str]] = {}
    for query in QUERIES:
        half = search_eval.split_of(query)
        halves[half][query["kind"]] += 1
        if query["source"] != "written":
            by_thread.setdefault(check_data.thread(query["source"]), set()).add(half)
    assert all(len(halves) == 1 for halves in by_thread.values()), "a thread's queries stay in one half"
    for kind in search_eval.KINDS:
        assert halves["dev"][kind] >= 10 and halves["test"][kind] >= 10, kind


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return search_eval.evaluate(distractors=(0,), splits=("dev", "test"))


@pytest.mark.parametrize("half", ["dev", "test"])
def test_search_is_never_below_plain_bm25(report, half):
    rows = report["runs"][f"{half}/0"]
    for kind in ("output (pasted+raw+traceback)", "confusable", "env_selection", "answerable"):
        row = rows[kind]
        assert row["recall@1"] >= row["bm25 recall@1"], (kind, row)
        assert row["recall@5"] >= row["bm25 recall@5"] - 1 / row["n"], (kind, row)  # at most one query


def test_search_finds_the_right_node_for_real_pasted_output(report):
    # Floors under what the dev half measures, to catch a regression, not to restate a target.
    rows = report["runs"]["dev/0"]
    assert rows["real (any kind)"]["recall@1"] >= 0.93
    assert rows["answerable"]["recall@5"] >= 0.98
    assert rows["env_selection"]["env_accuracy"] == 1.0
    assert rows["no_answer"]["rejected"] >= 0.75
    assert rows["all"]["precision@likely"] >= 0.95
