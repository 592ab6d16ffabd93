"""Search quality evaluation against the starter corpus.

    python bench/search_eval.py [--json] [--kind KIND] [--db PATH] [--queries FILE]

Opens a fresh database seeded with the starter corpus (`Service.open(path, seed=True)`) and runs every
query of `bench/search_eval_queries.jsonl` through `Service.search(q, env=..., ecosystem=..., limit=5)`.
Reports, per kind and overall: count, recall@1, recall@3 and MRR (over the top 5); for env_selection the
share of queries whose top result is the expected node with the expected solution; for no_answer the
share of queries whose top score is below NO_ANSWER_MAX_SCORE (or with no result); the `match` tiers of
correct top-1 hits; and every miss with the top 3 it got. Targets are printed with PASS/FAIL.

Query file: one JSON object per line with kind, q, env, ecosystem, expect (node id or null),
expect_solution (solution id or null) and note. Kinds: see KINDS.

It is a report: the exit code is 0 whatever the figures (a crash of the service itself still raises).
`evaluate(path)` returns the figures and `TARGETS` holds the thresholds, for tests/test_search_eval.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

QUERIES_FILE = Path(__file__).with_name("search_eval_queries.jsonl")
LIMIT = 5
NO_ANSWER_MAX_SCORE = 0.5

KINDS = ("raw_error", "traceback", "natural_language", "short_phrase", "env_selection", "no_answer", "confusable")

# Minimum number of queries per kind the query file must hold (checked by the test of the file itself).
MIN_COUNTS = {
    "raw_error": 45,
    "traceback": 25,
    "natural_language": 35,
    "short_phrase": 15,
    "env_selection": 20,
    "no_answer": 20,
    "confusable": 15,
}
MIN_TOTAL = 170

# name -> the metric it reads from figures["kinds"] (or figures["groups"]), and the minimum value.
# raw_error and traceback are both raw error strings: each must reach 0.97 on its own.
# natural_language is measured together with short_phrase (the "words" group).
TARGETS: dict[str, dict[str, Any]] = {
    "raw_error recall@1": {"scope": "kinds", "name": "raw_error", "metric": "recall@1", "min": 0.97},
    "traceback recall@1": {"scope": "kinds", "name": "traceback", "metric": "recall@1", "min": 0.97},
    "natural_language+short_phrase recall@1": {
        "scope": "groups", "name": "natural_language+short_phrase", "metric": "recall@1", "min": 0.85},
    "env_selection accuracy": {"scope": "kinds", "name": "env_selection", "metric": "env_accuracy", "min": 0.98},
    "no_answer top score < 0.5": {"scope": "kinds", "name": "no_answer", "metric": "rejected", "min": 0.90},
}

# Report-only groups (several kinds pooled).
GROUPS = {
    "raw_error+traceback": ("raw_error", "traceback"),
    "natural_language+short_phrase": ("natural_language", "short_phrase"),
}


def load_queries(path: str | Path = QUERIES_FILE) -> list[dict[str, Any]]:
    queries = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            query = json.loads(line)
            query["line"] = number
            queries.append(query)
    return queries


async def run_queries(service: Any, queries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One outcome per query: the results (trimmed to what the report needs) or the exception."""
    outcomes = []
    for query in queries:
        outcome: dict[str, Any] = {"query": query, "results": [], "error": None, "contract": []}
        try:
            envelope = await service.search(query["q"], env=query.get("env"), ecosystem=query.get("ecosystem"),
                                            limit=LIMIT)
        except Exception as exc:  # a per-query failure is a miss in the report, not a crash of the report
            outcome["error"] = f"{type(exc).__name__}: {exc}"
            outcomes.append(outcome)
            continue
        results = envelope.get("results") if isinstance(envelope, dict) else None
        if not isinstance(results, list):
            outcome["error"] = f"envelope without a results list: {str(envelope)[:200]}"
            outcomes.append(outcome)
            continue
        outcome["results"] = [_trim(result) for result in results]
        outcome["contract"] = _contract_problems(outcome["results"])
        outcomes.append(outcome)
    return outcomes


def _trim(result: Any) -> dict[str, Any]:
    if not isinstance(result, dict):
        return {"id": None, "score": None, "match": None, "solution": None, "raw": repr(result)[:100]}
    solution = result.get("solution")
    return {
        "id": result.get("id"),
        "score": result.get("score"),
        "match": result.get("match"),
        "solution": solution.get("id") if isinstance(solution, dict) else None,
    }


def _contract_problems(results: list[dict[str, Any]]) -> list[str]:
    problems = []
    if len(results) > LIMIT:
        problems.append(f"{len(results)} results for limit={LIMIT}")
    previous = None
    for position, result in enumerate(results):
        score = result["score"]
        if not isinstance(result["id"], str):
            problems.append(f"result {position} has no id")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not 0 <= score <= 1:
            problems.append(f"result {position} score {score!r} not in 0..1")
        elif previous is not None and score > previous:
            problems.append(f"result {position} score {score} above the previous {previous}")
        else:
            previous = score
        if result["match"] not in ("signature", "all_terms", "most_terms", "fuzzy"):
            problems.append(f"result {position} match {result['match']!r}")
    ids = [result["id"] for result in results]
    if len(ids) != len(set(ids)):
        problems.append("duplicate ids in results")
    return problems


def _rank(outcome: dict[str, Any]) -> int | None:
    """1-based rank of the expected node in the results, None when absent."""
    expect = outcome["query"]["expect"]
    for position, result in enumerate(outcome["results"], 1):
        if result["id"] == expect:
            return position
    return None


def _top_score(outcome: dict[str, Any]) -> float | None:
    if not outcome["results"]:
        return None
    score = outcome["results"][0]["score"]
    return score if isinstance(score, (int, float)) else None


def _hit(outcome: dict[str, Any]) -> bool:
    """Whether the query counts as answered correctly for its kind."""
    query = outcome["query"]
    if outcome["error"]:
        return False
    if query["expect"] is None:
        top = _top_score(outcome)
        return not outcome["results"] or (top is not None and top < NO_ANSWER_MAX_SCORE)
    if _rank(outcome) != 1:
        return False
    if query["kind"] == "env_selection":
        return outcome["results"][0]["solution"] == query["expect_solution"]
    return True


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _figures_for(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [outcome for outcome in outcomes if outcome["query"]["expect"] is not None]
    ranks = [_rank(outcome) for outcome in answerable]
    figures: dict[str, Any] = {"count": len(outcomes)}
    if answerable:
        figures["recall@1"] = _ratio(sum(rank == 1 for rank in ranks), len(answerable))
        figures["recall@3"] = _ratio(sum(rank is not None and rank <= 3 for rank in ranks), len(answerable))
        figures["mrr"] = round(sum(1 / rank for rank in ranks if rank) / len(answerable), 4)
        tiers = Counter(str(outcome["results"][0]["match"]) for outcome, rank in zip(answerable, ranks) if rank == 1)
        figures["match_tiers"] = dict(sorted(tiers.items()))
    env_selection = [outcome for outcome in outcomes if outcome["query"]["kind"] == "env_selection"]
    if env_selection:
        figures["env_accuracy"] = _ratio(sum(_hit(outcome) for outcome in env_selection), len(env_selection))
    no_answer = [outcome for outcome in outcomes if outcome["query"]["expect"] is None]
    if no_answer:
        figures["rejected"] = _ratio(sum(_hit(outcome) for outcome in no_answer), len(no_answer))
    errors = sum(1 for outcome in outcomes if outcome["error"])
    if errors:
        figures["errors"] = errors
    return figures


def summarize(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for outcome in outcomes:
        by_kind.setdefault(outcome["query"]["kind"], []).append(outcome)
    kinds = {kind: _figures_for(by_kind[kind]) for kind in [*KINDS, *sorted(set(by_kind) - set(KINDS))]
             if kind in by_kind}
    groups = {name: _figures_for([o for kind in members for o in by_kind.get(kind, [])])
              for name, members in GROUPS.items()}
    overall = _figures_for(outcomes)

    targets = {}
    for name, target in TARGETS.items():
        scope = kinds if target["scope"] == "kinds" else groups
        value = scope.get(target["name"], {}).get(target["metric"])
        targets[name] = {"value": value, "min": target["min"], "pass": value is not None and value >= target["min"]}

    misses = []
    for outcome in outcomes:
        if _hit(outcome):
            continue
        query = outcome["query"]
        misses.append({
            "kind": query["kind"],
            "line": query.get("line"),
            "q": query["q"],
            "env": query.get("env"),
            "ecosystem": query.get("ecosystem"),
            "expected": query["expect"],
            "expected_solution": query.get("expect_solution"),
            "rank": _rank(outcome) if query["expect"] else None,
            "error": outcome["error"],
            "got": [[r["id"], r["score"], r["match"], r["solution"]] for r in outcome["results"][:3]],
        })
    contract = [{"line": o["query"].get("line"), "q": o["query"]["q"][:80], "problems": o["contract"]}
                for o in outcomes if o["contract"]]
    return {
        "queries": len(outcomes),
        "kinds": kinds,
        "groups": groups,
        "overall": overall,
        "targets": targets,
        "misses": misses,
        "contract_violations": contract,
    }


async def evaluate(path: str | Path, queries_file: str | Path = QUERIES_FILE,
                   kinds: set[str] | None = None) -> dict[str, Any]:
    """Seed a new database at `path` with the starter corpus, run the queries, return the figures."""
    from knowmesh_mcp.service import Service

    queries = load_queries(queries_file)
    if kinds:
        queries = [query for query in queries if query["kind"] in kinds]
    service = await Service.open(path, seed=True)
    try:
        outcomes = await run_queries(service, queries)
    finally:
        await service.close()
    return summarize(outcomes)


# ---------------------------------------------------------------- text report

def _short(text: str, width: int = 80) -> str:
    text = text.replace("\x1b", "\\e")
    text = re.sub(r"\s*\n\s*", " ⏎ ", text)
    text = re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def render(figures: dict[str, Any]) -> str:
    lines = [f"search eval: {figures['queries']} queries, limit={LIMIT}", ""]
    header = f"{'kind':<32}{'count':>6}{'R@1':>8}{'R@3':>8}{'MRR':>8}{'env_acc':>9}{'no_ans':>8}{'errors':>8}"
    lines += [header, "-" * len(header)]
    rows = [*figures["kinds"].items(), *figures["groups"].items(), ("overall", figures["overall"])]
    for name, row in rows:
        lines.append(
            f"{name:<32}{row['count']:>6}{_fmt(row.get('recall@1')):>8}{_fmt(row.get('recall@3')):>8}"
            f"{_fmt(row.get('mrr')):>8}{_fmt(row.get('env_accuracy')):>9}{_fmt(row.get('rejected')):>8}"
            f"{row.get('errors', 0):>8}")
    lines += ["", "targets:"]
    for name, target in figures["targets"].items():
        verdict = "PASS" if target["pass"] else "FAIL"
        lines.append(f"  {verdict}  {name:<42} {_fmt(target['value']):>6}  (min {target['min']})")
    lines += ["", "match tier of correct top-1 hits:"]
    for name, row in [*figures["kinds"].items(), ("overall", figures["overall"])]:
        if row.get("match_tiers"):
            tiers = ", ".join(f"{tier}={count}" for tier, count in row["match_tiers"].items())
            lines.append(f"  {name:<20} {tiers}")
    if figures["contract_violations"]:
        lines += ["", f"envelope contract violations ({len(figures['contract_violations'])} queries):"]
        for item in figures["contract_violations"][:20]:
            lines.append(f"  line {item['line']}: {_short(item['q'], 60)}: {'; '.join(item['problems'])}")
    lines += ["", f"misses ({len(figures['misses'])}):"]
    for miss in figures["misses"]:
        expected = miss["expected"] or "(no answer)"
        if miss["expected_solution"]:
            expected += f" [{miss['expected_solution']}]"
        context = "".join(f" {key}={miss[key]}" for key in ("env", "ecosystem") if miss[key])
        lines.append(f"  [{miss['kind']}] line {miss['line']}: {_short(miss['q'])}{context}")
        lines.append(f"      expected {expected}" + (f", found at rank {miss['rank']}" if miss["rank"] else ""))
        if miss["error"]:
            lines.append(f"      error: {_short(miss['error'], 160)}")
        elif not miss["got"]:
            lines.append("      got: no results")
        else:
            got = "; ".join(
                f"{node} {_fmt(score) if isinstance(score, float) else score} {match}"
                + (f" [{solution}]" if solution else "")
                for node, score, match, solution in miss["got"])
            lines.append(f"      got: {got}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--db", help="database path (default: a temporary directory); must not exist yet")
    parser.add_argument("--queries", default=str(QUERIES_FILE), help="query file (JSON lines)")
    parser.add_argument("--kind", action="append", choices=KINDS, help="only these kinds (repeatable)")
    args = parser.parse_args(argv)
    kinds = set(args.kind) if args.kind else None

    if args.db:
        figures = asyncio.run(evaluate(args.db, args.queries, kinds))
    else:
        with tempfile.TemporaryDirectory(prefix="knowmesh-search-eval-") as directory:
            figures = asyncio.run(evaluate(Path(directory) / "eval.db", args.queries, kinds))
    if args.json:
        print(json.dumps(figures, indent=2, ensure_ascii=False))
    else:
        print(render(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
