"""Search settings side by side: latency and hit rates of several settings, in one process, query by query.

    python bench/search_ab.py [--nodes 100000] [--queries 1000] [--warmup 50] [--seed 7]
                              [--db PATH_OR_URL ...] SETTINGS [SETTINGS ...]

Each SETTINGS is `current` or comma-separated overrides of `knowmesh_mcp.search.query` constants, e.g.
`SIGNATURE_LIMIT=8,EVERY_LIMIT=6`, or of PostgreSQL's channel SQL as `pg_search.WALK_ROWS=10000`.
Every query of `bench/search_bench.py`'s mix (same cached 100,000-node database, same queries) is
searched once under each setting, the settings taking turns in a rotating order, so drift of a
shared machine (it was 60 % from one minute to the next here) falls alike on every setting.
`--db postgresql://...` searches a PostgreSQL database of the same synthetic corpus instead (the
one `KNOWMESH_TEST_POSTGRES=<server> python bench/pg_scale.py --nodes 100000` leaves; it holds the
starter corpus too, so its hit rates are not SQLite's). Two or more `--db` compare databases of the
same corpus, each setting on each, all taking turns: an index laid out anew (e.g. the bench database
before and after FTS5's `optimize`) against the old. Prints, per setting (and database): p50/p95/mean
in-process latency, the median of its per-query time over the first setting's, hit@1 and hit@5
(the node the error came from), and candidates ranked per search. Asserts nothing; exits 0 (2 on
an unknown or non-numeric name).

Separate runs of `search_bench.py` are only comparable on a quiet machine; this is how a change
of a channel limit or budget is measured (docs/decisions.md, "Smaller channels").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for entry in (str(HERE.parent), str(HERE)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from search_bench import LIMIT, corpus_and_queries, percentile, result_ids  # noqa: E402

from knowmesh_mcp.search import query as search_module  # noqa: E402
from knowmesh_mcp.services.mesh import Mesh  # noqa: E402
from knowmesh_mcp.store.postgres import search as pg_search  # noqa: E402

MODULES = {"": search_module, "pg_search": pg_search}


def constant(name: str) -> tuple[Any, str]:
    """The module and attribute a setting's name stands for (`NAME` or `pg_search.NAME`)."""
    prefix, _, attribute = name.rpartition(".")
    module = MODULES.get(prefix)
    current = getattr(module, attribute, None) if module is not None else None
    if not attribute.isupper() or isinstance(current, bool) or not isinstance(current, (int, float)):
        raise ValueError(f"{name!r} is not a numeric constant of knowmesh_mcp.search.query or pg_search")
    return module, attribute


def parse_settings(text: str) -> dict[str, float]:
    """`current` or NAME=VALUE,...: overrides of numeric constants (see `constant`)."""
    if text == "current":
        return {}
    settings: dict[str, float] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        module, attribute = constant(name)
        current = getattr(module, attribute)
        try:
            settings[name] = type(current)(value)
        except ValueError:
            raise ValueError(f"{name}={value!r}: not {'an integer' if isinstance(current, int) else 'a number'}") from None
    return settings


def apply(overrides: dict[str, float]) -> None:
    for name, value in overrides.items():
        setattr(*constant(name), value)


def describe(settings: dict[str, float]) -> str:
    return ",".join(f"{name}={value:g}" for name, value in settings.items()) or "current"


async def run(dbs: list[Path | str], queries: list[dict[str, Any]], warmup: list[dict[str, Any]],
              settings: list[dict[str, float]]) -> list[dict[str, Any]]:
    """Per database and setting (each setting on each database, in that order): its query times (ms,
    in query order), result ids and candidate counts."""
    defaults = {name: getattr(*constant(name)) for setting in settings for name in setting}
    counted = [0]
    rank = search_module.rank

    def counting_rank(candidates, *rest):  # how many candidates each search ranks
        counted[0] += len(candidates)
        return rank(candidates, *rest)

    search_module.rank = counting_rank
    services = [await Mesh.open(db, seed=False) for db in dbs]
    pairs = [(service, setting) for service in services for setting in settings]
    runs = [{"ms": [], "ids": [], "candidates": 0} for _ in pairs]
    try:
        for number, query in enumerate([*warmup, *queries]):
            timed = number >= len(warmup)
            order = list(range(len(pairs)))
            shift = number % len(order)
            for index in order[shift:] + order[:shift]:
                service, setting = pairs[index]
                apply({name: setting.get(name, value) for name, value in defaults.items()})
                counted[0] = 0
                started = time.perf_counter()
                result = await service.searching.search(query["q"], env=query["env"], ecosystem=query["ecosystem"], limit=LIMIT)
                elapsed = (time.perf_counter() - started) * 1000
                if timed:
                    runs[index]["ms"].append(elapsed)
                    runs[index]["ids"].append(result_ids(result))
                    runs[index]["candidates"] += counted[0]
    finally:
        apply(defaults)
        search_module.rank = rank
        for service in services:
            await service.close()
    return runs


def report(queries: list[dict[str, Any]], labels: list[str], runs: list[dict[str, Any]]) -> None:
    answerable = [i for i, query in enumerate(queries) if query["expect"]]
    reference = runs[0]["ms"]
    print(f"  {'settings':<48}{'p50':>8}{'p95':>8}{'mean':>8}{'paired':>8}{'hit@1':>8}{'hit@5':>8}{'cands':>7}"
          "   (ms; paired = median of per-query time / the first's)")
    for label, run_ in zip(labels, runs):
        ms, ids = run_["ms"], run_["ids"]
        paired = statistics.median(mine / theirs for mine, theirs in zip(ms, reference) if theirs > 0)
        hit1 = sum(ids[i][:1] == [queries[i]["expect"]] for i in answerable) / max(1, len(answerable))
        hit5 = sum(queries[i]["expect"] in ids[i] for i in answerable) / max(1, len(answerable))
        print(f"  {label:<48}{percentile(ms, .5):>8.2f}{percentile(ms, .95):>8.2f}"
              f"{statistics.mean(ms):>8.2f}{paired:>8.3f}{hit1:>8.3f}{hit5:>8.3f}{run_['candidates'] / len(ms):>7.1f}")
    print(f"  [{len(queries)} queries, {len(answerable)} with a node to find; limit {LIMIT}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("settings", nargs="+", help="'current' or NAME=VALUE,... (knowmesh_mcp.search.query constants)")
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--db", action="append", help="a SQLite file or PostgreSQL URL holding the same synthetic "
                        "corpus, instead of the cached one; give it twice or more to compare databases")
    args = parser.parse_args(argv)
    try:
        settings = [parse_settings(text) for text in args.settings]
    except ValueError as error:
        print(f"search_ab: {error}", file=sys.stderr)
        return 2
    db, queries, warmup = corpus_and_queries(args.nodes, args.seed, args.queries, args.warmup)
    dbs: list[Path | str] = list(args.db or [db])
    labels = [describe(setting) + (f" @ {Path(str(name)).name}" if len(dbs) > 1 else "") for name in dbs for setting in settings]
    print(f"{len(labels)} runs ({len(settings)} settings on {len(dbs)} database(s)), taking turns on each of "
          f"{len(queries)} queries ({len(warmup)} warm-up)")
    report(queries, labels, asyncio.run(run(dbs, queries, warmup, settings)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
