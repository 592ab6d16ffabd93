"""Search quality: the product beside plain BM25, on real pasted output and written queries.

    python bench/search_eval.py [--distractors 0,10000] [--split dev,test] [--misses N] [--json]
                                [--backend sqlite|postgres|both]

`--corpus corpus2` measures the second corpus instead (`bench/eval/corpus2/`: nodes written unlike
the starter corpus, with their own real queries), the same way: the ranking fitted on the starter
corpus's dev half, measured on another corpus's halves, is the cross-corpus figure of issue 48.

The corpus is the starter corpus (`store/starter/`) plus, per run, 0 or more distractor nodes from
`bench/synthetic.py` (a distractor that would be a right answer to a query, the same error
template with a value the query names, is left out). The queries are `bench/eval/queries/*.jsonl`
(bench/eval/README.md): at least half real output copied from public issue threads, each with its
source. `split_of` puts every query in the `dev` half (fit and tune there) or the `test` half
(report it, never tune on it) by a hash of its source, so a thread's queries stay together.

Every query runs through `Mesh.searching.search(q, env=..., ecosystem=..., limit=5)` and through the
baseline (`bench/baseline.py`): a plain FTS5 table over the same documents' text, queried with an OR
of every distinct token of the query, ranked by bm25(). Figures per kind and group:
recall@1, recall@5 and MRR for both; for the product also env selection (the expected answer,
given the right node), no-answer rejection (top score < 0.5 or nothing) and calibration (the
share of top results scoring >= 0.5 that are right). The targets of issue 10 are checked on the
test half with the largest distractor count. Misses are listed for the dev half only.

`--backend postgres` runs the same queries on PostgreSQL (a private server from
tests/postgres_server.py, or KNOWMESH_TEST_POSTGRES's; one database per corpus, built by the same
`build_corpus`; `bench/search_eval_pg.py`); `--backend both` runs both and prints every figure of
the product side by side (SQLite, PostgreSQL, their difference), flagging a recall@1 difference
above 0.01 (issue 13), then every query whose answer differs. The BM25 column is the same on both
(it is the SQLite file's own FTS5 table). The default is SQLite alone, as before.

It is a report: the exit code is 0 whatever the figures. `evaluate()` returns the figures, for
tests/test_search_eval.py.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for entry in (str(ROOT), str(HERE), str(HERE / "eval")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import baseline  # noqa: E402
import search_eval_pg  # noqa: E402
from check_data import load_queries, thread  # noqa: E402

from knowmesh_mcp.search import query as search_module  # noqa: E402
from knowmesh_mcp.search.analysis import index_terms  # noqa: E402
from knowmesh_mcp.core.normalize import NORMALIZER_VERSION, normalize_signature, quoted_values  # noqa: E402
from knowmesh_mcp.search.ranking import LIKELY  # noqa: E402
from knowmesh_mcp.services.import_export import load_documents  # noqa: E402
from knowmesh_mcp.services.mesh import Mesh  # noqa: E402
from knowmesh_mcp.store import store_dir  # noqa: E402
from knowmesh_mcp.search.tool_output import decisive_lines  # noqa: E402

OUT = HERE / "out"
LIMIT = 5
BACKENDS = ("sqlite", "postgres", "both")
KINDS = ("pasted", "raw_error", "traceback", "natural_language", "short_phrase", "env_selection", "confusable",
         "no_answer")
GROUPS = {
    "output (pasted+raw+traceback)": ("pasted", "raw_error", "traceback"),
    "words (natural+short)": ("natural_language", "short_phrase"),
    "answerable": tuple(k for k in KINDS if k != "no_answer"),
}
# name -> (row, metric, minimum): checked on the test half with the most distractors.
TARGETS = {
    "output recall@1": ("output (pasted+raw+traceback)", "recall@1", 0.97),
    "natural_language recall@1": ("natural_language", "recall@1", 0.92),
    "confusable recall@1": ("confusable", "recall@1", 0.95),
    "answerable recall@5": ("answerable", "recall@5", 0.99),
    "env selection given the right node": ("env_selection", "env_accuracy", 1.0),
    "no_answer scored < 0.5": ("no_answer", "rejected", 0.90),
    "top >= 0.5 is right": ("all", "precision@likely", 0.95),
}
CODE_FILES = (
    "search/query.py", "search/analysis.py", "search/tool_output.py", "core/normalize.py",
    "store/sqlite/search.py", "store/common.py",
)  # what the index is built by


def split_of(query: dict[str, Any]) -> str:
    """'dev' or 'test', by a hash of the query's source (a thread, or the node a written query is about)."""
    source = query["source"]
    key = thread(source) if source != "written" else f"written:{query['expect'] or query['q']}"
    return "dev" if hashlib.sha256(key.encode("utf-8")).digest()[0] % 2 == 0 else "test"


# --- corpus --------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalCorpus:
    """Nodes and the real queries about them. `starter`: the starter corpus and bench/eval/queries;
    `corpus2`: nodes written unlike it and their own queries (bench/eval/corpus2/README.md), so
    that a ranking fitted on one is measured on the other."""

    name: str
    nodes: Path
    queries_dir: Path

    def documents(self) -> list[tuple[str, dict[str, Any]]]:
        return list(load_documents([self.nodes]))

    def queries(self) -> list[dict[str, Any]]:
        return load_queries(self.queries_dir)


CORPORA = {
    "starter": EvalCorpus("starter", store_dir() / "starter", HERE / "eval" / "queries"),
    "corpus2": EvalCorpus("corpus2", HERE / "eval" / "corpus2" / "nodes", HERE / "eval" / "corpus2" / "queries"),
}
STARTER = CORPORA["starter"]


def _templates(text: str) -> set[str]:
    return {normalize_signature(line) for line in decisive_lines(text)[:3]}


def _distractors(count: int, queries: list[dict[str, Any]], nodes: EvalCorpus = STARTER) -> list[tuple[str, dict[str, Any]]]:
    """`count` synthetic nodes, none of them a right answer to a query.

    A synthetic node is a right answer when it is the query's error (or its expected node's
    error) and everything it is about (its values, the words of its id beyond the error's own)
    is named by the query: `No module named 'torch'` for "pip can't find torch". Such nodes are
    left out; nodes of the same shape about other values stay (they make a corpus confusable).
    """
    from synthetic import Corpus

    starter = {raw["id"]: raw for _, raw in nodes.documents()}
    named: dict[str, set[str]] = defaultdict(set)  # template -> the words of queries that have it
    for query in queries:
        words = set(index_terms(query["q"]).split())
        shapes = _templates(query["q"])
        expected = starter.get(query["expect"] or "")
        if expected:
            for text in [expected["signature"]["error"], *expected["signature"].get("aliases", [])]:
                shapes |= _templates(text)
        for shape in shapes:
            named[shape] |= words
    chosen = []
    for index, document, _ in Corpus(7).generate(count * 2):
        shapes = _templates(document["signature"]["error"])
        template_words = {w for shape in shapes for w in index_terms(shape).split()}
        identity = set(index_terms(" ".join(quoted_values(document["signature"]["error"]))).split())
        identity |= set(index_terms(document["id"].split("/", 1)[1]).split()) - template_words
        if any(identity <= named[shape] for shape in shapes if shape in named):
            continue  # the same error, about nothing the query does not name: a right answer
        chosen.append((f"synthetic:{index}", document))
        if len(chosen) == count:
            break
    return chosen


def _corpus_key(distractors: int, nodes: EvalCorpus = STARTER) -> str:
    digest = hashlib.sha256(f"{NORMALIZER_VERSION}:{search_module.SEARCH_INDEX_VERSION}:{distractors}:{nodes.name}".encode())
    for path in sorted(nodes.nodes.glob("*.json")) + sorted((ROOT / "store" / "migrations").glob("*.sql")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for name in CODE_FILES:
        digest.update((ROOT / "knowmesh_mcp" / name).read_bytes())
    for name in ("synthetic.py", "baseline.py", "search_eval.py"):
        digest.update((HERE / name).read_bytes())
    digest.update(hashlib.sha256("".join(q["q"] for q in nodes.queries()).encode()).digest())
    return digest.hexdigest()[:12]


async def build_corpus(path: Path | str, distractors: int, nodes: EvalCorpus = STARTER) -> None:
    """The corpus's nodes + distractors (then `baseline.ensure` adds the baseline's table)."""
    service = await Mesh.open(path, seed=nodes is STARTER)
    try:
        if nodes is not STARTER:
            report = await service.documents.import_documents(nodes.documents(), summary=f"{nodes.name} corpus")
            if report.invalid or report.skipped:
                raise SystemExit(f"{nodes.name} nodes not imported: {(report.invalid + report.skipped)[:2]}")
        if distractors:
            report = await service.documents.import_documents(_distractors(distractors, nodes.queries(), nodes), summary="distractors")
            if report.invalid:
                raise SystemExit(f"distractors invalid: {report.invalid[:2]}")
    finally:
        await service.close()


def corpus(distractors: int, nodes: EvalCorpus = STARTER) -> Path:
    """The built corpus database, cached in bench/out/ by what shapes it."""
    OUT.mkdir(exist_ok=True)
    stem = f"eval-d{distractors}" if nodes is STARTER else f"eval-{nodes.name}-d{distractors}"
    path = OUT / f"{stem}-{_corpus_key(distractors, nodes)}.db"
    if not path.exists():
        for stale in OUT.glob(f"{stem}-*.db*"):
            stale.unlink()
        building = path.with_suffix(".building")
        building.unlink(missing_ok=True)
        started = time.perf_counter()
        asyncio.run(build_corpus(building, distractors, nodes))
        baseline.ensure(building)
        building.rename(path)
        print(f"built {path.name} ({distractors:,} distractors) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return path


# --- running -------------------------------------------------------------------------------


async def run(path: Path, queries: list[dict[str, Any]], target: str | Path | None = None) -> list[dict[str, Any]]:
    """Every query through the product on `target` (default: the SQLite file `path`) and through
    the baseline, which always reads `path` (its table lives only in the SQLite file)."""
    import sqlite3

    outcomes = []
    service = await Mesh.open(path if target is None else target, seed=False)
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        for query in queries:
            envelope = await service.searching.search(query["q"], env=query["env"], ecosystem=query["ecosystem"], limit=LIMIT)
            results = [{"id": r["id"], "score": r["score"], "match": r["match"],
                        "solution": (r["solution"] or {}).get("id")} for r in envelope["results"]]
            outcomes.append({"query": query, "results": results, "baseline": baseline.search(connection, query["q"], LIMIT)})
    finally:
        connection.close()
        await service.close()
    return outcomes


def _rank(ids: list[str], expect: str | None) -> int | None:
    return ids.index(expect) + 1 if expect in ids else None


def figures_of(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [o for o in outcomes if o["query"]["expect"]]
    row: dict[str, Any] = {"n": len(outcomes)}
    if answerable:
        for who, ids in (("", lambda o: [r["id"] for r in o["results"]]), ("bm25 ", lambda o: o["baseline"])):
            ranks = [_rank(ids(o), o["query"]["expect"]) for o in answerable]
            row[who + "recall@1"] = sum(r == 1 for r in ranks) / len(ranks)
            row[who + "recall@5"] = sum(r is not None for r in ranks) / len(ranks)
            row[who + "mrr"] = sum(1 / r for r in ranks if r) / len(ranks)
    selecting = [o for o in outcomes if o["query"]["kind"] == "env_selection"
                 and o["results"] and o["results"][0]["id"] == o["query"]["expect"]]
    if selecting:
        row["env_accuracy"] = sum(o["results"][0]["solution"] == o["query"]["expect_solution"]
                                  for o in selecting) / len(selecting)
    unanswerable = [o for o in outcomes if not o["query"]["expect"]]
    if unanswerable:
        row["rejected"] = sum(not o["results"] or o["results"][0]["score"] < LIKELY for o in unanswerable) / len(unanswerable)
    likely = [o for o in outcomes if o["results"] and o["results"][0]["score"] >= LIKELY]
    if likely:
        row["precision@likely"] = sum(o["results"][0]["id"] == o["query"]["expect"] for o in likely) / len(likely)
        row["likely"] = len(likely)
    return row


def table(outcomes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for outcome in outcomes:
        by_kind[outcome["query"]["kind"]].append(outcome)
    rows = {kind: figures_of(by_kind[kind]) for kind in KINDS if by_kind.get(kind)}
    real = [o for o in outcomes if o["query"]["source"] != "written"]
    if real:
        rows["real (any kind)"] = figures_of(real)
    for name, kinds in GROUPS.items():
        rows[name] = figures_of([o for k in kinds for o in by_kind.get(k, [])])
    rows["all"] = figures_of(outcomes)
    return rows


def evaluate(distractors: tuple[int, ...] = (0, 10_000), splits: tuple[str, ...] = ("dev", "test"),
             backend: str = "sqlite", nodes: EvalCorpus = STARTER) -> dict[str, Any]:
    """{"runs": {f"{split}/{distractors}": {row: figures}}, "targets": ..., "misses": [...]}.

    `backend` "sqlite" (the default) or "postgres": the figures of that backend. "both": the
    figures are SQLite's, and "backends" holds each backend's report, "compare" them side by side,
    "differences" the queries the two answer differently, "timings" what each step took.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend is one of {', '.join(BACKENDS)}, not {backend!r}")
    names = ("sqlite", "postgres") if backend == "both" else (backend,)
    queries = nodes.queries()
    reports: dict[str, dict[str, Any]] = {name: {"runs": {}, "misses": {}, "counts": {}} for name in names}
    outcomes_of: dict[tuple[str, int], list[dict[str, Any]]] = {}
    timings: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in names}
    with ExitStack() as stack:
        server = stack.enter_context(search_eval_pg.server()) if "postgres" in names else None
        for count in distractors:
            started = time.perf_counter()
            path = corpus(count, nodes)
            sqlite_corpus = round(time.perf_counter() - started, 1)
            with tempfile.TemporaryDirectory(prefix="knowmesh-eval-") as directory:
                copy = Path(directory) / "eval.db"
                shutil.copy(path, copy)
                for name in names:
                    target: str | Path = copy
                    timing = timings[name].setdefault(count, {})
                    if name == "postgres":
                        target, built = search_eval_pg.corpus(server, count, _corpus_key(count, nodes),
                                                              partial(build_corpus, nodes=nodes))
                        timing["build"] = None if built is None else round(built, 1)
                    else:
                        timing["corpus (built, or read from bench/out/)"] = sqlite_corpus
                    started = time.perf_counter()
                    outcomes = asyncio.run(run(copy, queries, target))
                    reports[name].setdefault("seconds", {})[count] = timing["queries"] = round(time.perf_counter() - started, 1)
                    outcomes_of[name, count] = outcomes
                    _halves(reports[name], outcomes, count, splits)
    for part in reports.values():
        part["targets"] = _targets(part["runs"], distractors)
    if backend != "both":
        report = reports[backend]
        if backend != "sqlite":
            report["backend"] = backend
            report["timings"] = timings
        return report
    report = {**reports["sqlite"], "backend": "both", "backends": reports, "timings": timings,
              "compare": search_eval_pg.compare(reports["sqlite"]["runs"], reports["postgres"]["runs"]),
              "differences": {count: search_eval_pg.differences(outcomes_of["sqlite", count], outcomes_of["postgres", count],
                                                               split_of, LIKELY) for count in distractors}}
    return report


def _halves(report: dict[str, Any], outcomes: list[dict[str, Any]], count: int, splits: tuple[str, ...]) -> None:
    for split in splits:
        chosen = [o for o in outcomes if split_of(o["query"]) == split]
        report["runs"][f"{split}/{count}"] = table(chosen)
        report["counts"][split] = len(chosen)
        if split == "dev":
            report["misses"][count] = [_miss(o) for o in chosen if _missed(o)]


def _targets(runs: dict[str, dict[str, Any]], distractors: tuple[int, ...]) -> dict[str, Any]:
    targets: dict[str, Any] = {}
    final = f"test/{max(distractors)}"
    if final in runs:
        rows = runs[final]
        for name, (row, metric, minimum) in TARGETS.items():
            value = rows.get(row, {}).get(metric)
            targets[name] = {"value": value, "min": minimum, "pass": value is not None and value >= minimum}
        below = [kind for kind, row in rows.items() if "recall@1" in row and row["recall@1"] < row["bm25 recall@1"]]
        targets["never below BM25 recall@1 (per kind)"] = {"value": below or "none", "min": "none", "pass": not below}
    return targets


def _missed(outcome: dict[str, Any]) -> bool:
    query, results = outcome["query"], outcome["results"]
    if not query["expect"]:
        return bool(results) and results[0]["score"] >= LIKELY
    if not results or results[0]["id"] != query["expect"]:
        return True
    return query["kind"] == "env_selection" and results[0]["solution"] != query["expect_solution"]


def _miss(outcome: dict[str, Any]) -> dict[str, Any]:
    query = outcome["query"]
    return {"at": query["at"], "kind": query["kind"], "q": query["q"], "expect": query["expect"],
            "expect_solution": query["expect_solution"],
            "got": [(r["id"], r["score"], r["match"], r["solution"]) for r in outcome["results"][:3]],
            "bm25": outcome["baseline"][:3]}


# --- report --------------------------------------------------------------------------------


def _f(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def render(report: dict[str, Any], misses: int) -> str:
    if report.get("backend") == "both":
        return render_both(report, misses)
    lines = []
    if report.get("backend") == "postgres":
        lines += ["", "product figures on PostgreSQL (bm25: the baseline table of the SQLite file, as always)"]
    for name, rows in report["runs"].items():
        split, count = name.split("/")
        lines += ["", f"{split} half, {int(count):,} distractors ({report['counts'][split]} queries)"]
        header = (f"  {'kind':<31}{'n':>5}{'R@1':>8}{'bm25':>7}{'R@5':>8}{'bm25':>7}{'MRR':>7}{'bm25':>7}"
                  f"{'env':>7}{'<0.5':>7}{'prec':>7}")
        lines += [header, "  " + "-" * (len(header) - 2)]
        for kind, row in rows.items():
            lines.append(
                f"  {kind:<31}{row['n']:>5}{_f(row.get('recall@1')):>8}{_f(row.get('bm25 recall@1')):>7}"
                f"{_f(row.get('recall@5')):>8}{_f(row.get('bm25 recall@5')):>7}{_f(row.get('mrr')):>7}"
                f"{_f(row.get('bm25 mrr')):>7}{_f(row.get('env_accuracy')):>7}{_f(row.get('rejected')):>7}"
                f"{_f(row.get('precision@likely')):>7}")
    lines += ["", "  env = right answer for the env given the right node; <0.5 = no-answer queries scored below 0.5;",
              "  prec = share of top results scoring >= 0.5 that are the right node (calibration)"]
    if report["targets"]:
        lines += ["", "targets (test half, most distractors):"]
        for name, target in report["targets"].items():
            lines.append(f"  {'PASS' if target['pass'] else 'FAIL'}  {name:<40} {_f(target['value'])}  (min {target['min']})")
    for count, items in report["misses"].items():
        lines += ["", f"dev misses with {int(count):,} distractors: {len(items)}"]
        for miss in items[:misses]:
            text = re.sub(r"\s*\n\s*", " ⏎ ", miss["q"])[:110]
            lines.append(f"  [{miss['kind']}] {miss['at']}: {text}")
            lines.append(f"      expected {miss['expect']}{' [' + miss['expect_solution'] + ']' if miss['expect_solution'] else ''}")
            got = "; ".join(f"{i} {s} {m}{' [' + str(sol) + ']' if sol else ''}" for i, s, m, sol in miss["got"]) or "nothing"
            lines.append(f"      got {got}   bm25: {', '.join(miss['bm25']) or 'nothing'}")
    if report.get("timings"):
        lines += ["", *_timing_lines(report["timings"])]
    return "\n".join(lines)


def _d(value: Any) -> str:
    """A difference: '=' when none, else signed."""
    if value is None:
        return "-"
    return "=" if abs(value) < 1e-12 else f"{value:+.3f}"


def _timing_lines(timings: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    lines = ["timings (s):"]
    for backend, counts in timings.items():
        for count, steps in counts.items():
            text = ", ".join(f"{step} {'reused' if seconds is None else seconds}" for step, seconds in steps.items())
            lines.append(f"  {backend:<9}{int(count):>7,} distractors: {text}")
    return lines


def render_both(report: dict[str, Any], misses: int) -> str:
    """The product's figures on SQLite and on PostgreSQL side by side, per run and row."""
    compared, tolerance = report["compare"], report["compare"]["tolerance"]
    lines = ["", f"SQLite beside PostgreSQL: sqlite, pg (postgres), d = pg - sqlite ('=' none); "
                 f"'!' marks a recall@1 difference above {tolerance}; bm25 is one column (the same on both)"]
    groups = (("recall@1", "bm25 recall@1"), ("recall@5", "bm25 recall@5"), ("mrr", "bm25 mrr"))
    others = ("env_accuracy", "rejected", "precision@likely")
    for name, rows in compared["runs"].items():
        split, count = name.split("/")
        lines += ["", f"{split} half, {int(count):,} distractors ({report['counts'][split]} queries)"]
        top = f"  {'':<36}" + "".join(f"{'-- ' + label + ' ':-<30}" for label in ("recall@1", "recall@5", "MRR"))
        header = f"  {'kind':<31}{'n':>5}" + f"{'sqlite':>8}{'pg':>7}{'d':>7}{'':2}{'bm25':>6}" * 3
        lines += [top, header, "  " + "-" * (len(header) - 2)]
        for kind, row in rows.items():
            cells = f"  {kind:<31}{row['n']:>5}"
            for measure, bm25 in groups:
                entry = row.get(measure, {})
                diff = entry.get("diff")
                flag = "!" if measure == "recall@1" and entry and (diff is None or abs(diff) > tolerance + 1e-12) else ""
                cells += (f"{_f(entry.get('sqlite')):>8}{_f(entry.get('postgres')):>7}{_d(diff):>7}{flag:<2}"
                          f"{_f(row.get(bm25)):>6}")
            lines.append(cells)
        top = f"  {'':<36}" + "".join(f"{'-- ' + label + ' ':-<23}" for label in ("env", "<0.5", "prec"))
        header = f"  {'kind':<31}{'n':>5}" + f"{'sqlite':>8}{'pg':>7}{'d':>7}{'':1}" * 3
        lines += ["", top, header, "  " + "-" * (len(header) - 2)]
        for kind, row in rows.items():
            if not any(measure in row for measure in others):
                continue
            cells = f"  {kind:<31}{row['n']:>5}"
            for measure in others:
                entry = row.get(measure, {})
                cells += f"{_f(entry.get('sqlite')):>8}{_f(entry.get('postgres')):>7}{_d(entry.get('diff')):>7}{'':1}"
            lines.append(cells)
    lines += ["", "  env = right answer for the env given the right node; <0.5 = no-answer queries scored below 0.5;",
              "  prec = share of top results scoring >= 0.5 that are the right node (calibration)"]
    beyond = compared["recall@1 beyond tolerance"]
    lines.append("")
    if beyond:
        lines.append(f"recall@1 differs by more than {tolerance} on {len(beyond)} row(s):")
        for b in beyond:
            n = compared["runs"][b["run"]][b["row"]]["n"]
            moved = f", {round(b['diff'] * n):+d} of {n} queries" if b["diff"] is not None else ""
            lines.append(f"  ! {b['run']} {b['row']}: sqlite {_f(b['sqlite'])}, postgres {_f(b['postgres'])} "
                         f"({_d(b['diff'])}{moved})")
        lines.append(f"  (one query of a row of n moves its recall@1 by 1/n: above {tolerance} in any row of fewer than "
                     f"{round(1 / tolerance)} queries)")
    else:
        lines.append(f"recall@1: PostgreSQL is within {tolerance} of SQLite on every row of every run")
    targets = {name: part["targets"] for name, part in report["backends"].items()}
    if targets["sqlite"]:
        def mark(target: dict[str, Any]) -> str:
            value = target.get("value")
            shown = f"{len(value)} row{'s' if len(value) > 1 else ''}" if isinstance(value, list) else _f(value)
            return f"{'PASS' if target.get('pass') else 'FAIL'} {shown}"

        lines += ["", f"  {'targets (test half, most distractors)':<39}{'sqlite':<14}{'postgres':<14}min"]
        for name, target in targets["sqlite"].items():
            other = targets["postgres"].get(name, {})
            lines.append(f"  {name:<39}{mark(target):<14}{mark(other):<14}{target['min']}")
            for backend, part in (("sqlite", target), ("postgres", other)):
                if isinstance(part.get("value"), list):
                    lines.append(f"      {backend}: {', '.join(part['value'])}")
    for count, found in report["differences"].items():
        listed = found["listed"]
        lines += ["", f"answers with {int(count):,} distractors, {found['queries']} queries (dev and test): "
                      f"same top result {found['same top']}, same top 5 {found['same top 5']}, "
                      f"same top 5 and scores {found['same top 5 and scores']}; largest top-score difference "
                      f"(same top) {found['largest top score difference (same top)']:.6f}",
                  f"  queries whose top result, its rightness, its side of {LIKELY} or its answer differ: {len(listed)}"]
        for item in listed[:misses]:
            text = re.sub(r"\s*\n\s*", " ⏎ ", item["q"])[:110]
            lines.append(f"  [{item['split']} {item['kind']}] {item['at']}: {text}")
            lines.append(f"      expected {item['expect'] or 'no answer'}"
                         f"{' [' + item['expect_solution'] + ']' if item['expect_solution'] else ''}"
                         f"{'  env ' + item['env'] if item['env'] else ''}")
            for backend in ("sqlite", "postgres"):
                got = "; ".join(f"{i} {s} {m}{' [' + str(sol) + ']' if sol else ''}" for i, s, m, sol in item[backend])
                right = " (right)" if item[backend + " right"] else ""
                lines.append(f"      {backend:<9}{got or 'nothing'}{right}")
        if len(listed) > misses:
            lines.append(f"  ... {len(listed) - misses} more (--misses N, or --json)")
    lines += ["", *_timing_lines(report["timings"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distractors", default="0,10000", help="comma-separated distractor counts (default 0,10000)")
    parser.add_argument("--split", default="dev,test", help="halves to report: dev, test or both (default)")
    parser.add_argument("--misses", type=int, default=30, help="dev misses to list per run (default 30)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="starter",
                        help="starter (default): the starter corpus and bench/eval/queries; corpus2: nodes written "
                             "unlike it, with their own queries (bench/eval/corpus2)")
    parser.add_argument("--backend", choices=BACKENDS, default="sqlite",
                        help="the store the product searches: sqlite (default), postgres (a private server, or "
                             "KNOWMESH_TEST_POSTGRES), or both, side by side")
    args = parser.parse_args(argv)
    counts = tuple(int(c) for c in args.distractors.split(","))
    splits = tuple(s.strip() for s in args.split.split(","))
    report = evaluate(counts, splits, args.backend, CORPORA[args.corpus])
    print(json.dumps(report, indent=1, ensure_ascii=False) if args.json else render(report, args.misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
