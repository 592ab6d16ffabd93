"""Search latency on a 100,000-node synthetic corpus: in-process, over MCP stdio, and peak RSS.

    python bench/search_bench.py [--nodes 100000] [--queries 1000] [--mcp-queries 400] [--seed 7]
                                 [--rebuild] [--skip-mcp] [--show N]

The corpus comes from `bench/synthetic.py`: realistic error lines of 14 ecosystems, rendered
from templates and shared vocabularies, deterministic for a seed. The first run builds it with
`Mesh.open(db, seed=False)` + `service.documents.import_documents(...)` in a child process (so the
figures below measure a process that only searches) and caches it in `bench/out/` as
`search-n{nodes}-s{seed}-g{generator version}-m{migrations hash}.db` plus a `.sample.json` of
5,000 nodes the queries are made from. Reruns reuse both; `--rebuild` forces a new build (do so
after changing what the index stores without a migration, e.g. `search.index_text`).

Then it times `await service.searching.search(q, env=..., ecosystem=..., limit=5)` in-process, and the
MCP tool `search` through `mcp.Client` over stdio against `python -m knowmesh_mcp.cli.main serve
--stdio --db <db>`, printing p50/p95/p99 overall and per query kind beside the targets, and the
peak RSS of both processes. Beside hit@1 and hit@5 it prints the plain BM25 baseline
(`bench/baseline.py`: an FTS5 OR of the query's tokens ranked by bm25() over the same documents,
in a table of the same database file). Prints figures; asserts nothing; exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import random
import resource
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for entry in (str(ROOT), str(HERE)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import baseline  # noqa: E402
from synthetic import FAMILIES, GENERATOR_VERSION, KIND_SHARES, Corpus, Meta, make_queries  # noqa: E402

from knowmesh_mcp.search import query as search_module  # noqa: E402
from knowmesh_mcp.core.normalize import NORMALIZER_VERSION  # noqa: E402
from knowmesh_mcp.services.mesh import Mesh  # noqa: E402

OUT = HERE / "out"
SAMPLE_SIZE = 5000
LIMIT = 5
TARGETS = {"inproc_p50": 3.0, "inproc_p95": 10.0, "mcp_p50": 6.0, "rss_mb": 300.0}


# --- helpers -----------------------------------------------------------------------------


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))]


def verdict(value: float, target: float) -> str:
    return f"target <= {target:g}: {'ok' if value <= target else 'MISSED'}"


def max_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux


def cache_paths(nodes: int, seed: int) -> tuple[Path, Path]:
    """The cached database and its node sample, keyed by what shapes their content.

    Besides the generator: the migrations, and the normalizer and search-index versions (on a
    mismatch the service rebuilds derived rows when it opens the database, which would land
    in the timed process).
    """
    digest = hashlib.sha256()
    digest.update(f"{NORMALIZER_VERSION}:{getattr(search_module, 'SEARCH_INDEX_VERSION', 0)}".encode())
    for path in sorted((ROOT / "store" / "migrations").glob("*.sql")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    stem = f"search-n{nodes}-s{seed}-g{GENERATOR_VERSION}-m{digest.hexdigest()[:8]}"
    return OUT / f"{stem}.db", OUT / f"{stem}.sample.json"


def remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def result_ids(result: Any) -> list[str]:
    items = result.get("results", []) if isinstance(result, dict) else []
    return [item.get("id") for item in items if isinstance(item, dict)]


# --- build (in a child process: `--prepare`) ---------------------------------------------


async def prepare(nodes: int, seed: int, build: bool) -> None:
    """Build the database (or, when it exists, only replay the generator) and write the sample."""
    db, sample_file = cache_paths(nodes, seed)
    OUT.mkdir(parents=True, exist_ok=True)
    wanted = set(random.Random(f"sample:{seed}").sample(range(nodes), min(nodes, SAMPLE_SIZE)))
    metas: list[Meta] = []
    ecosystems: Counter[str] = Counter()
    solutions: Counter[int] = Counter()
    generating = 0.0
    started = time.perf_counter()

    def stream():
        nonlocal generating
        mark = time.perf_counter()
        for index, document, meta in Corpus(seed).generate(nodes):
            if index in wanted:
                metas.append(meta)
            ecosystems[meta.ecosystem] += 1
            solutions[len(document["content"]["solutions"])] += 1
            generating += time.perf_counter() - mark
            if index and index % 20_000 == 0:
                elapsed = time.perf_counter() - started
                print(f"  ... {index:,} nodes, {elapsed:.0f} s ({index / elapsed:,.0f} nodes/s)", flush=True)
            yield f"synthetic:{index}", document
            mark = time.perf_counter()

    build_info: dict[str, Any] = {}
    if build:
        for stale in OUT.glob(f"search-n{nodes}-s{seed}-*"):
            stale.unlink()
        building = db.with_name(db.stem + ".building.db")
        remove_db(building)
        print(f"building {nodes:,} nodes (seed {seed}) into {db.relative_to(ROOT)} ...", flush=True)
        service = await Mesh.open(building, seed=False)
        try:
            report = await service.documents.import_documents(stream())
        finally:
            await service.close()
        elapsed = time.perf_counter() - started
        for suffix in ("-wal", "-shm"):  # gone after a clean close; moved along if not
            if Path(str(building) + suffix).exists():
                os.replace(str(building) + suffix, str(db) + suffix)
        os.replace(building, db)
        created, skipped, invalid = len(report.created), len(report.skipped), len(report.invalid)
        print(f"build: {created:,} created, {skipped} skipped, {invalid} invalid of {nodes:,} generated "
              f"in {elapsed:.1f} s = {nodes / elapsed:,.0f} nodes/s (generating documents: {generating:.1f} s; "
              f"validate + index + write: {elapsed - generating:.1f} s)")
        for item in (report.skipped + report.invalid)[:5]:
            print(f"  not created: {json.dumps(item)[:300]}")
        print(f"build: database {db.stat().st_size / 2**20:,.0f} MB; builder peak RSS {max_rss_mb():,.0f} MB")
        print("build: per ecosystem " + ", ".join(f"{k} {v:,}" for k, v in ecosystems.most_common()))
        print(f"build: solutions per node {dict(sorted(solutions.items()))} (0 = no answer yet, 2 = linux + macos)")
        build_info = {"created": created, "skipped": skipped, "invalid": invalid, "seconds": round(elapsed, 1),
                      "generating_seconds": round(generating, 1)}
    else:
        for _ in stream():
            pass
        print(f"replayed the generator for the node sample in {time.perf_counter() - started:.1f} s")
    previous = json.loads(sample_file.read_text()) if sample_file.exists() and not build else {}
    sample_file.write_text(json.dumps({
        "nodes": nodes, "seed": seed, "generator": GENERATOR_VERSION,
        "build": build_info or previous.get("build", {}),
        "metas": [m.to_json() for m in metas],
    }))


# --- in-process search -------------------------------------------------------------------


def kind_table(rows: list[dict[str, Any]], *, quality: bool) -> None:
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_kind[row["kind"]].append(row)
    header = f"  {'kind':<17}{'n':>5}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}"
    if quality:
        header += f"{'empty':>8}{'hit@1':>8}{'bm25':>7}{'hit@5':>8}{'bm25':>7}{'shape@1':>9}"
    print(header + "   (ms; hit = the node the error came from, bm25 = plain FTS5 OR/bm25, shape = same template)")
    for kind in [k for k, _ in KIND_SHARES] + ["ALL"]:
        group = rows if kind == "ALL" else by_kind.get(kind, [])
        if not group:
            continue
        ms = [r["ms"] for r in group]
        line = (f"  {kind:<17}{len(group):>5}{percentile(ms, .5):>8.2f}{percentile(ms, .95):>8.2f}"
                f"{percentile(ms, .99):>8.2f}{max(ms):>8.2f}")
        if quality:
            empty = sum(1 for r in group if not r["ids"]) / len(group)
            expecting = [r for r in group if r["expect"]]
            def share(test) -> float:
                return sum(1 for r in expecting if test(r)) / len(expecting)

            hit1 = (f"{share(lambda r: r['ids'][:1] == [r['expect']]):>8.0%}"
                    f"{share(lambda r: r['baseline'][:1] == [r['expect']]):>7.0%}" if expecting else f"{'-':>8}{'-':>7}")
            hit5 = (f"{share(lambda r: r['expect'] in r['ids']):>8.0%}"
                    f"{share(lambda r: r['expect'] in r['baseline']):>7.0%}" if expecting else f"{'-':>8}{'-':>7}")
            shaped = [r for r in group if r["kind"] != "nomatch"]
            shape1 = (f"{sum(1 for r in shaped if r['ids'] and same_shape(r['ids'][0], r['shape'])) / len(shaped):>9.0%}"
                      if shaped else f"{'-':>9}")
            line += f"{empty:>8.0%}{hit1}{hit5}{shape1}"
        print(line)


def same_shape(node_id: str | None, shape: str) -> bool:
    return bool(node_id) and (node_id == shape or node_id.startswith(shape + "-"))


def annotate(queries: list[dict[str, Any]], metas_by_id: dict[str, Meta]) -> None:
    """Add the expected error template (`shape`) and drop expectations a wrong filter rules out."""
    for query in queries:
        meta = metas_by_id[query["source"]]
        family = FAMILIES[meta.family]
        query["shape"] = f"{family.ecosystem}/{family.key}"
        if query["ecosystem"] and query["ecosystem"] != meta.ecosystem:
            query["expect"] = None


async def run_in_process(db: Path, queries: list[dict[str, Any]], warmup: list[dict[str, Any]], show: int) -> dict[str, float]:
    started = time.perf_counter()
    service = await Mesh.open(db, seed=False)
    try:
        opened = time.perf_counter() - started
        nodes = await service.store.count_nodes()
        print(f"\nin-process: {nodes:,} nodes in {db.relative_to(ROOT)}; Mesh.open {opened:.2f} s")

        async def one(query: dict[str, Any]) -> tuple[float, Any, str | None]:
            started = time.perf_counter()
            try:
                result = await service.searching.search(query["q"], env=query["env"], ecosystem=query["ecosystem"], limit=LIMIT)
                error = None
            except Exception as exc:  # a benchmark reports, it does not stop
                result, error = None, f"{type(exc).__name__}: {exc}"
            return (time.perf_counter() - started) * 1000, result, error

        started = time.perf_counter()
        for query in warmup:
            await one(query)
        print(f"in-process: warm-up {len(warmup)} queries in {time.perf_counter() - started:.2f} s")
        rows, errors = [], Counter()
        for query in queries:
            ms, result, error = await one(query)
            if error:
                errors[error[:160]] += 1
            rows.append({**query, "ms": ms, "ids": result_ids(result)})
        for message, count in errors.most_common(5):
            print(f"in-process: {count} queries raised {message}")
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for row in rows:  # the baseline over the same documents, not timed
                row["baseline"] = baseline.search(connection, row["q"], LIMIT)
        finally:
            connection.close()
        kind_table(rows, quality=True)
        for row in rows[:show]:
            print(f"    [{row['kind']}] {row['q'][:90]!r} env={row['env']} eco={row['ecosystem']} -> {row['ids'][:3]}")
        ms = [r["ms"] for r in rows]
        expecting = [r for r in rows if r["expect"]]
        return {"p50": percentile(ms, .5), "p95": percentile(ms, .95), "p99": percentile(ms, .99), "n": len(ms),
                "hit5": sum(r["expect"] in r["ids"] for r in expecting) / max(1, len(expecting)),
                "bm25_hit5": sum(r["expect"] in r["baseline"] for r in expecting) / max(1, len(expecting))}
    finally:
        await service.close()


# --- MCP stdio -----------------------------------------------------------------------------


def find_server_pid(db: Path) -> int | None:
    """The stdio server child: its command line names the bench database (psutil-free)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"knowmesh_mcp.cli.main" in argv and str(db).encode() in argv:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                found.append((ppid != me, int(entry.name)))
        except (OSError, ValueError, IndexError):
            continue
    return min(found)[1] if found else None


def proc_status_mb(pid: int, field: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def run_mcp(db: Path, queries: list[dict[str, Any]], warmup: list[dict[str, Any]]) -> dict[str, float] | None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "KNOWMESH_DB": str(db)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "knowmesh_mcp.cli.main", "serve", "--stdio", "--db", str(db), "--empty"], env=env,
    )
    print(f"\nMCP stdio: {sys.executable} -m knowmesh_mcp.cli.main serve --stdio --db {db.relative_to(ROOT)} --empty")
    started = time.perf_counter()
    async with Client(params) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        print(f"MCP stdio: spawn + initialize + tools/list {time.perf_counter() - started:.2f} s; tools: {', '.join(sorted(tools))}")
        if "search" not in tools:
            print("MCP stdio: the server has no `search` tool yet (knowmesh_mcp/mcp/server.py); nothing to time. "
                  "Rerun this command when it lands.")
            return None
        pid = find_server_pid(db)

        async def one(query: dict[str, Any]) -> tuple[float, Any, str | None]:
            arguments = {"q": query["q"], "limit": LIMIT}
            for key in ("env", "ecosystem"):
                if query[key]:
                    arguments[key] = query[key]
            started = time.perf_counter()
            try:
                result = await client.call_tool("search", arguments)
            except Exception as exc:
                return (time.perf_counter() - started) * 1000, None, f"{type(exc).__name__}: {exc}"
            ms = (time.perf_counter() - started) * 1000
            if result.is_error:
                return ms, result, "tool error: " + (result.content[0].text if result.content else "")
            return ms, result, None

        for query in warmup:
            await one(query)
        rows, errors, sizes = [], Counter(), []
        for query in queries:
            ms, result, error = await one(query)
            if error:
                errors[error[:160]] += 1
            structured = getattr(result, "structured_content", None) if result is not None else None
            if result is not None and result.content:
                sizes.append(sum(len(getattr(block, "text", "").encode()) for block in result.content))
            rows.append({**query, "ms": ms, "ids": result_ids(structured)})
        hwm = proc_status_mb(pid, "VmHWM") if pid else None
        rss = proc_status_mb(pid, "VmRSS") if pid else None
    for message, count in errors.most_common(5):
        print(f"MCP stdio: {count} calls failed: {message}")
    print(f"MCP stdio: {len(rows)} timed calls after {len(warmup)} warm-up; mean response text {sum(sizes) / max(1, len(sizes)):,.0f} bytes")
    kind_table(rows, quality=False)
    ms = [r["ms"] for r in rows]
    return {"p50": percentile(ms, .5), "p95": percentile(ms, .95), "p99": percentile(ms, .99), "n": len(ms),
            "pid": pid or 0, "hwm": hwm or 0.0, "rss": rss or 0.0}


# --- main --------------------------------------------------------------------------------


def corpus_and_queries(nodes: int, seed: int, count: int, warmup: int, *,
                       rebuild: bool = False) -> tuple[Path, list[dict[str, Any]], list[dict[str, Any]]]:
    """The cached database (built first if missing, in a child process) and the timed and warm-up
    queries made from its node sample, annotated. `bench/search_ab.py` reads the same."""
    db, sample_file = cache_paths(nodes, seed)
    build = rebuild or not db.exists()
    if build or not sample_file.exists():
        # A child process, so that the figures below are of a process that only searched.
        command = [sys.executable, __file__, "--prepare", "--nodes", str(nodes), "--seed", str(seed)]
        subprocess.run(command + (["--build"] if build else []), check=True)
    info = json.loads(sample_file.read_text())
    if not build:
        built = info.get("build", {})
        print(f"cached database {db.relative_to(ROOT)} ({db.stat().st_size / 2**20:,.0f} MB; built in "
              f"{built.get('seconds', '?')} s, {built.get('created', '?')} nodes); --rebuild to rebuild")
    metas = [Meta(**m) for m in info["metas"]]
    metas_by_id = {m.id: m for m in metas}
    queries = make_queries(metas, seed=seed, count=count)
    warmups = make_queries(metas, seed=seed, count=warmup, tag="warmup")
    annotate(queries, metas_by_id)
    annotate(warmups, metas_by_id)
    return db, queries, warmups


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000, help="timed in-process queries (>= 500 recommended)")
    parser.add_argument("--mcp-queries", type=int, default=400, help="timed MCP calls (a prefix of the query mix)")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached database")
    parser.add_argument("--skip-mcp", action="store_true", help="skip the MCP stdio round trips")
    parser.add_argument("--show", type=int, default=0, metavar="N", help="print the first N queries with their top ids")
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.prepare:
        asyncio.run(prepare(args.nodes, args.seed, args.build))
        return 0

    wall = time.perf_counter()
    db, queries, warmup = corpus_and_queries(args.nodes, args.seed, args.queries, args.warmup, rebuild=args.rebuild)
    baseline.ensure(db)  # the plain BM25 table beside the product's, built once per database
    mix = Counter(q["kind"] for q in queries)
    print(f"queries: {len(queries)} ({', '.join(f'{k} {v}' for k, v in mix.items())}); "
          f"{sum(1 for q in queries if q['env'])} with env, {sum(1 for q in queries if q['ecosystem'])} with ecosystem; limit {LIMIT}")

    inproc = asyncio.run(run_in_process(db, queries, warmup, args.show))
    rss_inproc = max_rss_mb()  # before the mcp import below, which the search itself does not need
    mcp = None
    if not args.skip_mcp:
        mcp_queries = queries[: max(0, args.mcp_queries)]
        mcp = asyncio.run(run_mcp(db, mcp_queries, warmup[:30]))

    print("\nsummary (targets beside the figures; nothing is asserted)")
    print(f"  hit@5 {inproc['hit5']:.1%} against plain FTS5 OR/bm25 {inproc['bm25_hit5']:.1%} "
          f"({'ok' if inproc['hit5'] >= inproc['bm25_hit5'] else 'MISSED'}: never below the baseline)")
    print(f"  in-process search p50 {inproc['p50']:.2f} ms ({verdict(inproc['p50'], TARGETS['inproc_p50'])}), "
          f"p95 {inproc['p95']:.2f} ms ({verdict(inproc['p95'], TARGETS['inproc_p95'])}), p99 {inproc['p99']:.2f} ms "
          f"[{inproc['n']} queries]")
    print(f"  in-process peak RSS {rss_inproc:,.0f} MB ({verdict(rss_inproc, TARGETS['rss_mb'])})")
    if args.skip_mcp:
        print("  MCP stdio: skipped (--skip-mcp)")
    elif mcp:
        print(f"  MCP stdio search p50 {mcp['p50']:.2f} ms ({verdict(mcp['p50'], TARGETS['mcp_p50'])}), "
              f"p95 {mcp['p95']:.2f} ms, p99 {mcp['p99']:.2f} ms [{mcp['n']} calls]")
        if mcp["hwm"]:
            print(f"  stdio server peak RSS (VmHWM of pid {mcp['pid']}) {mcp['hwm']:,.0f} MB "
                  f"({verdict(mcp['hwm'], TARGETS['rss_mb'])}); VmRSS at the end {mcp['rss']:,.0f} MB")
        else:
            print("  stdio server peak RSS: server process not found in /proc")
    else:
        print("  MCP stdio search: waiting for the `search` tool")
    print(f"  total wall time {time.perf_counter() - wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
