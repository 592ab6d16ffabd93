"""Fit the ranking weights on the development half of the search evaluation.

    python bench/fit_ranking.py [--distractors 0,10000] [--dry-run] [--corpus starter,corpus2] [--signed]

Runs every dev query (bench/search_eval.py's `split_of`) through the service's own candidate
ranking (`Mesh.searching.rank_candidates`, every candidate, its environment fit included) over the
evaluation corpus without and with 10,000 distractors (pooled: a small mesh and a big one), labels each candidate 1 if it is the query's expected node
and 0 otherwise (every candidate of a no-answer query is a 0), and fits one logistic regression
per query type (pasted tool output, prose) by Newton's method with an L2 penalty on the weights.
The penalty is chosen by five-fold cross-validation over queries (log loss). Pointwise logistic
regression is the choice because its output is a calibrated probability: "score >= 0.5" then
means "more likely right than wrong", which a pairwise ranker does not give without a second
calibration step (docs/decisions.md, "Ranking").

Writes knowmesh_mcp/ranking_weights.json (unless --dry-run) and prints, per model, the weights,
the chosen penalty, the cross-validated log loss and the dev recall@1 of re-ranking with them.
The test half is never read. `--corpus` pools the dev halves of several evaluation corpora
(bench/search_eval.py's CORPORA), each over its own meshes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import search_eval  # noqa: E402

from knowmesh_mcp.core.environment import parse_env  # noqa: E402
from knowmesh_mcp.core.normalize import canonical_ecosystem  # noqa: E402
from knowmesh_mcp.search.ranking import FEATURES, WEIGHTS_FILE  # noqa: E402
from knowmesh_mcp.search.query import QueryPlan  # noqa: E402
from knowmesh_mcp.services.mesh import Mesh  # noqa: E402

PENALTIES = (0.01, 0.1, 1.0, 10.0)
FOLDS = 5


async def collect(path: Path, queries: list[dict[str, Any]]) -> dict[str, list[tuple[int, np.ndarray, np.ndarray]]]:
    """{model: [(query index, features matrix, labels)]} over the given queries."""
    service = await Mesh.open(path, seed=False)
    groups: dict[str, list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)
    try:
        for index, query in enumerate(queries):
            plan = QueryPlan.of(query["q"])
            machine = parse_env(query["env"]) if query["env"] else None
            wanted = canonical_ecosystem(query["ecosystem"]) if query["ecosystem"] else None
            ranked = await service.searching.rank_candidates(plan, machine, wanted, limit=None, floor=False)
            if not ranked:
                continue
            x = np.array([[c.features[name] for name in FEATURES] for c, _ in ranked])
            y = np.array([1.0 if r["id"] == query["expect"] else 0.0 for _, r in ranked])
            groups["output" if plan.is_output else "prose"].append((index, x, y))
    finally:
        await service.close()
    return groups


def fit(x: np.ndarray, y: np.ndarray, penalty: float, iterations: int = 50) -> np.ndarray:
    """Logistic regression by Newton's method; returns [bias, *weights] (the bias is not penalized)."""
    design = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(design.shape[1])
    ridge = penalty * np.eye(design.shape[1])
    ridge[0, 0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -30, 30)))
        gradient = design.T @ (p - y) + ridge @ beta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + ridge + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


# Features that are evidence against a node (ranking.FEATURES' comments): their weights must be negative,
# every other feature's positive (`fit_signed`).
AGAINST = frozenset({"values_conflict", "values_unnamed", "value_shape_conflict", "slug_missing", "ecosystem_other"})


def fit_signed(x: np.ndarray, y: np.ndarray, penalty: float) -> np.ndarray:
    """`fit`, leaving out one at a time the feature whose weight most contradicts its meaning (negative
    for evidence for a node, positive for evidence against it: `AGAINST`), until none does.

    Correlated features can trade weight and take signs nobody can explain (`line_coverage` -3.03
    beside `template_coverage`); a weight a reader cannot explain in one line is a weight fitted to
    the corpus's style. Left out means weight 0."""
    sign = np.array([-1.0 if name in AGAINST else 1.0 for name in FEATURES])
    active = np.ones(len(FEATURES), dtype=bool)
    while True:
        beta = np.zeros(len(FEATURES) + 1)
        fitted = fit(x[:, active], y, penalty)
        beta[0], beta[1:][active] = fitted[0], fitted[1:]
        wrong = beta[1:] * sign
        if wrong.min() >= 0:
            return beta
        active[int(np.argmin(wrong))] = False


def log_loss(beta: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    p = 1.0 / (1.0 + np.exp(-np.clip(beta[0] + x @ beta[1:], -30, 30)))
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def stacked(items: list[tuple[int, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([x for _, x, _ in items]), np.concatenate([y for _, _, y in items])


def choose_penalty(items: list[tuple[int, np.ndarray, np.ndarray]], fitter: Callable[..., np.ndarray] = fit) -> tuple[float, dict[float, float]]:
    """The penalty with the lowest cross-validated log loss (folds by query, so a query is never split)."""
    losses = {}
    for penalty in PENALTIES:
        total = 0.0
        for fold in range(FOLDS):
            train = [item for item in items if item[0] // 2 % FOLDS != fold]  # both runs of a query in one fold
            held = [item for item in items if item[0] // 2 % FOLDS == fold]
            if not train or not held:
                continue
            beta = fitter(*stacked(train), penalty)
            total += log_loss(beta, *stacked(held)) * len(held)
        losses[penalty] = total / len(items)
    return min(losses, key=losses.get), losses


def recall_at_1(beta: np.ndarray, items: list[tuple[int, np.ndarray, np.ndarray]]) -> float:
    answerable = [(x, y) for _, x, y in items if y.any()]
    hits = sum(1 for x, y in answerable if y[int(np.argmax(beta[0] + x @ beta[1:]))] == 1.0)
    return hits / len(answerable) if answerable else 0.0


def as_beta(weights: dict[str, Any]) -> np.ndarray:
    """[bias, *weights] of a model as the weights file holds it."""
    return np.array([weights["bias"], *(weights["weights"][name] for name in FEATURES)])


SHIFT_STEP = 0.05
REJECTED = 0.90  # trust.md / issue 10: at least 90 % of queries with no right node score below 0.5


def top_logits(groups: dict[str, list[tuple[int, np.ndarray, np.ndarray]]], models: dict[str, Any]) -> dict[int, float]:
    """{item index: the logit of the result a search serves first} (rank_candidates' first row)."""
    tops = {}
    for model, items in groups.items():
        beta = as_beta(models[model])
        for index, x, _ in items:
            tops[index] = float(beta[0] + x[0] @ beta[1:])
    return tops


def choose_shift(groups: dict[str, list[tuple[int, np.ndarray, np.ndarray]]], models: dict[str, Any],
                 no_answer: list[list[int]]) -> tuple[float, dict[str, Any]]:
    """The smallest logit shift (a multiple of SHIFT_STEP) at which, over every corpus, at least
    REJECTED of the dev queries with no right node serve a first result below 0.5 (`no_answer`:
    the indices of those queries run over each corpus, by corpus).

    The fit is calibrated over all candidates, most of them plainly wrong; a query with no right
    node is a few percent of the queries and its best candidate is the hard case, scored too high
    (dev, 10,000 distractors: 82 % below 0.5). Moving the 0.5 line by one fitted offset keeps
    every order and buys that target with the fewest right answers moved below 0.5.
    """
    tops = top_logits(groups, models)
    shift = 0.0
    while True:
        rejected = []
        for corpus, queries in enumerate(no_answer):
            runs = [q * len(no_answer) + corpus for q in queries]
            if runs:
                rejected.append(sum(i not in tops or tops[i] - shift < 0 for i in runs) / len(runs))
        if min(rejected) >= REJECTED or shift > 5:
            return round(shift, 2), {"rejected_by_corpus": [round(r, 3) for r in rejected]}
        shift += SHIFT_STEP


FLOORS = (0.0, 0.0001, 0.0003, 0.001, 0.003, 0.01)


def choose_floor(groups: dict[str, list[tuple[int, np.ndarray, np.ndarray]]], models: dict[str, Any]) -> float:
    """The largest floor that drops no right answer a dev query ranked in its top 5."""
    lowest = 1.0
    for model, items in groups.items():
        beta = as_beta(models[model])
        for _, x, y in items:
            p = 1.0 / (1.0 + np.exp(-np.clip(beta[0] + x @ beta[1:], -30, 30)))
            top = np.argsort(-p)[:5]
            for i in top:
                if y[i] == 1.0:
                    lowest = min(lowest, float(p[i]))
    return max(f for f in FLOORS if f < lowest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distractors", default="0,10000",
                        help="comma-separated distractor counts; the dev queries are run over each corpus and pooled")
    parser.add_argument("--dry-run", action="store_true", help="print the fit, do not write the weights file")
    parser.add_argument("--signed", action="store_true",
                        help="leave out features whose weight contradicts their meaning (measured, not taken: docs/decisions.md)")
    parser.add_argument("--corpus", default="starter",
                        help="comma-separated evaluation corpora whose dev halves are pooled: starter (default), corpus2")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.corpus.split(",")]
    queries = [(name, q) for name in names for q in search_eval.CORPORA[name].queries() if search_eval.split_of(q) == "dev"]
    counts = [int(c) for c in args.distractors.split(",")]
    runs = [(name, count) for name in names for count in counts]  # each corpus's dev queries over each of its meshes
    groups: dict[str, list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)
    for run, (name, count) in enumerate(runs):
        mine = [index for index, (owner, _) in enumerate(queries) if owner == name]
        source = search_eval.corpus(count, search_eval.CORPORA[name])
        with tempfile.TemporaryDirectory(prefix="knowmesh-fit-") as directory:
            path = Path(directory) / "fit.db"
            shutil.copy(source, path)
            for model, items in asyncio.run(collect(path, [queries[i][1] for i in mine])).items():
                # one index per query and run, so cross-validation folds keep each run of a query together
                groups[model] += [(mine[index] * len(runs) + run, x, y) for index, x, y in items]
    fitted: dict[str, Any] = {"models": {}, "fitted": {
        "method": "logistic regression (Newton, L2 on weights, penalty by 5-fold CV over queries)"
                  + ("; a feature whose weight contradicts its meaning is left out (fit_signed)" if args.signed else ""),
        "script": "bench/fit_ranking.py", "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "split": "dev", "corpora": names, "dev_queries": len(queries), "distractors": counts, "models": {}}}
    for model, items in sorted(groups.items()):
        fitter = fit_signed if args.signed else fit
        penalty, losses = choose_penalty(items, fitter)
        x, y = stacked(items)
        beta = fitter(x, y, penalty)
        fitted["models"][model] = {"bias": round(float(beta[0]), 4),
                                   "weights": {name: round(float(w), 4) for name, w in zip(FEATURES, beta[1:])}}
        summary = {"queries": len(items), "candidates": int(len(y)), "positives": int(y.sum()),
                   "penalty": penalty, "cv_log_loss": {str(k): round(v, 5) for k, v in losses.items()},
                   "dev_recall@1": round(recall_at_1(beta, items), 4),
                   **({"left_out": [name for name, weight in zip(FEATURES, beta[1:]) if weight == 0.0]} if args.signed else {})}
        fitted["fitted"]["models"][model] = summary
        print(f"{model}: {summary['queries']} queries, {summary['candidates']} candidates, "
              f"{summary['positives']} right; penalty {penalty} (cv log loss {losses}); "
              f"dev recall@1 {summary['dev_recall@1']:.3f}"
              + (f"; left out (sign contradicts meaning): {summary['left_out']}" if args.signed else ""))
        print(f"  bias {beta[0]:+.3f}")
        for name, weight in sorted(zip(FEATURES, beta[1:]), key=lambda item: -abs(item[1])):
            print(f"  {name:<20} {weight:+.3f}")
    no_answer = [[i for i, (owner, q) in enumerate(queries) if owner == name and not q["expect"]] for name, _ in runs]
    shift, reached = choose_shift(groups, fitted["models"], no_answer)
    for weights in fitted["models"].values():
        weights["bias"] = round(weights["bias"] - shift, 4)
    fitted["fitted"]["shift"] = {"logit": shift, "rule": f"smallest multiple of {SHIFT_STEP} at which at least "
                                 f"{REJECTED:.0%} of dev no-answer queries score below 0.5 in every corpus", **reached}
    print(f"shift {shift}: bias lowered so that dev no-answer queries score below 0.5 in {reached['rejected_by_corpus']}")
    floor = choose_floor(groups, fitted["models"])
    fitted["min_score"] = floor
    fitted["fitted"]["min_score"] = f"largest of {FLOORS} below every right answer ranked in a dev top 5"
    print(f"min_score {floor}: candidates scoring below it are not returned")
    if not args.dry_run:
        WEIGHTS_FILE.write_text(json.dumps(fitted, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {WEIGHTS_FILE.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
