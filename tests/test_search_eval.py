"""Search quality against the starter corpus (bench/search_eval.py), and the query file it uses."""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
STARTER = ROOT / "store" / "starter"


def _load_bench():
    spec = importlib.util.spec_from_file_location("knowmesh_bench_search_eval", ROOT / "bench" / "search_eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


search_eval = _load_bench()
TARGETS = search_eval.TARGETS
evaluate = search_eval.evaluate


# ---------------------------------------------------------------- the query file

def _starter_nodes() -> dict[str, dict[str, Any]]:
    nodes = {}
    for file in sorted(STARTER.glob("*.json")):
        document = json.loads(file.read_text(encoding="utf-8"))
        nodes[document["id"]] = document
    return nodes


NODES = _starter_nodes()
QUERIES = search_eval.load_queries()
FIELDS = {"kind", "q", "env", "ecosystem", "expect", "expect_solution", "note"}

# OS families, only to check that an env_selection query's env agrees with its expected solution's tags.
OS_FAMILIES = {
    "macos": ("macos", "macosx", "mac", "osx", "darwin"),
    "linux": ("linux", "ubuntu", "debian", "fedora", "alpine", "centos", "rhel", "arch", "wsl"),
    "windows": ("windows", "win", "win32", "win64"),
}


def _os_family(env: str) -> set[str]:
    families = set()
    for part in env.split(","):
        name = re.split(r"[-\s]?v?\d", part.strip().lower(), maxsplit=1)[0]
        for family, names in OS_FAMILIES.items():
            if name in names:
                families.add(family)
    return families


def test_query_file_lines_are_well_formed():
    assert QUERIES, "bench/search_eval_queries.jsonl is empty"
    for query in QUERIES:
        where = f"line {query['line']}"
        assert set(query) - {"line"} == FIELDS, where
        assert query["kind"] in search_eval.KINDS, where
        assert isinstance(query["q"], str) and query["q"].strip(), where
        assert query["env"] is None or (isinstance(query["env"], str) and query["env"].strip()), where
        assert query["ecosystem"] is None or (isinstance(query["ecosystem"], str) and query["ecosystem"]), where
        assert isinstance(query["note"], str), where
        if query["kind"] == "no_answer":
            assert query["expect"] is None and query["expect_solution"] is None, where
        else:
            assert isinstance(query["expect"], str), where
        if query["kind"] == "env_selection":
            assert query["env"] and query["expect_solution"], where
        else:
            assert query["expect_solution"] is None, where


def test_query_file_counts_per_kind():
    counts = Counter(query["kind"] for query in QUERIES)
    for kind, minimum in search_eval.MIN_COUNTS.items():
        assert counts[kind] >= minimum, f"{kind}: {counts[kind]} queries, need {minimum}"
    assert len(QUERIES) >= search_eval.MIN_TOTAL


def test_query_file_expectations_exist_in_the_starter_corpus():
    assert len(NODES) >= 40
    for query in QUERIES:
        where = f"line {query['line']}"
        if query["expect"] is None:
            continue
        assert query["expect"] in NODES, f"{where}: unknown node {query['expect']}"
        if query["expect_solution"] is None:
            continue
        solutions = {s["id"]: s for s in NODES[query["expect"]]["content"]["solutions"]}
        assert query["expect_solution"] in solutions, f"{where}: no solution {query['expect_solution']}"
        assert len(solutions) >= 2, f"{where}: env_selection needs a node with several solutions"
        tags = {tag.lower() for tag in solutions[query["expect_solution"]].get("env") or []}
        families = _os_family(query["env"])
        assert len(families) == 1, f"{where}: env {query['env']!r} should name exactly one OS"
        assert families <= tags, f"{where}: env {query['env']!r} does not select {query['expect_solution']} ({tags})"


def test_query_file_has_no_duplicates():
    keys = Counter((" ".join(q["q"].split()).lower(), q["env"], q["ecosystem"]) for q in QUERIES)
    duplicates = [key for key, count in keys.items() if count > 1]
    assert not duplicates, duplicates


def test_query_file_spreads_over_the_corpus():
    """Raw errors and natural-language queries each reach most of the corpus, not a handful of nodes."""
    for kinds in (("raw_error", "traceback"), ("natural_language", "short_phrase")):
        covered = {q["expect"] for q in QUERIES if q["kind"] in kinds}
        assert len(covered) >= 0.9 * len(NODES), (kinds, sorted(set(NODES) - covered))


# ---------------------------------------------------------------- search quality

_FIGURES: dict[str, Any] = {}


async def _figures(tmp_path_factory) -> dict[str, Any]:
    if "figures" not in _FIGURES:
        _FIGURES["figures"] = await evaluate(tmp_path_factory.mktemp("search-eval") / "eval.db")
    return _FIGURES["figures"]


def _misses(figures: dict[str, Any], kinds: set[str]) -> str:
    lines = []
    for miss in figures["misses"]:
        if miss["kind"] in kinds:
            got = ", ".join(f"{node} {score}" for node, score, _, _ in miss["got"]) or miss["error"] or "nothing"
            lines.append(f"  line {miss['line']} {miss['q'][:80]!r}: expected {miss['expected'] or '(no answer)'}"
                         f"{' [' + miss['expected_solution'] + ']' if miss['expected_solution'] else ''}; got {got}")
    return "\n".join(lines[:40])


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(TARGETS))
async def test_search_meets_target(name, tmp_path_factory):
    figures = await _figures(tmp_path_factory)
    target = figures["targets"][name]
    spec = TARGETS[name]
    kinds = set(search_eval.GROUPS.get(spec["name"], (spec["name"],)))
    assert target["pass"], f"{name}: {target['value']} < {target['min']}\n{_misses(figures, kinds)}"


@pytest.mark.anyio
async def test_search_envelope_contract(tmp_path_factory):
    """Every query returns at most `limit` results with ids, scores in 0..1 non-increasing, and a known match."""
    figures = await _figures(tmp_path_factory)
    errors = [miss for miss in figures["misses"] if miss["error"]]
    assert not errors, errors[:5]
    assert not figures["contract_violations"], figures["contract_violations"][:5]
