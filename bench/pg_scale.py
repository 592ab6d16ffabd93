"""A team's mesh on PostgreSQL at scale: import throughput, in-process search latency, and a mixed
load through 1 and then 3 HTTP servers on the same database.

    python bench/pg_scale.py [--nodes 1000000] [--seconds 60] [--clients 8] [--seed 7] [--reuse]

Starts a private PostgreSQL server (tests/postgres_server.py: initdb into a temporary folder, a
Unix socket, no TCP port) unless KNOWMESH_TEST_POSTGRES names one, creates a fresh database,
and imports the starter corpus plus `--nodes` synthetic nodes from `bench/synthetic.py` through
`Mesh.documents.import_documents` (what `knowmesh-mcp import` calls), printing nodes per second. Then it
times 2,000 searches in-process (p50, p95), and runs the closed-loop mixed load of
`bench/load_bench.py` (80 % search, 15 % read, 5 % write) for `--seconds` through one
`serve --http --db postgresql://...` process, then through three at once (the clients spread
over them), printing throughput, p50/p95/p99 and every error for each. On 2 cores the servers,
the database and the load generator share the CPU: the point is correctness under concurrency and
the cost per request. `--reuse` keeps the database an earlier run left on that server (the import
of 1,000,000 nodes takes about 25 minutes here) and measures the rest: the corpus is generated
again for its sample and fresh documents, not imported, and the load's clients are numbered anew
(their writes are new ones, not an earlier run's again). Prints figures; asserts nothing; exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for entry in (str(ROOT), str(HERE), str(ROOT / "tests")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import load_bench  # noqa: E402
from postgres_server import private_postgres  # noqa: E402
from synthetic import Corpus, Meta, make_queries  # noqa: E402

from knowmesh_mcp.services.mesh import Mesh  # noqa: E402


def fresh_database(server_url: str, name: str, *, reuse: bool = False) -> tuple[str, bool]:
    """The URL of database `name` on the server, made empty unless `reuse` finds it there; and
    whether it was kept."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as admin:
        kept = reuse and admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None
        if not kept:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
            admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8'")
    return urlunsplit(urlsplit(server_url)._replace(path=f"/{name}")), kept


async def build(url: str, nodes: int, seed: int, *, imported: bool = False) -> load_bench.Workload:
    """Import the corpus (unless `imported`: then only generate it again); returns the load
    workload (a sample of the nodes, fresh documents to create)."""
    wanted = set(random.Random(f"load-sample:{seed}").sample(range(nodes), min(nodes, load_bench.SAMPLE_SIZE)))
    sample: list[dict[str, Any]] = []
    fresh: list[dict[str, Any]] = []

    generating = [0.0]  # seconds spent making documents, inside the import's loop

    def stream():
        documents = iter(Corpus(seed).generate(nodes + load_bench.FRESH_DOCUMENTS))
        while True:
            began = time.perf_counter()
            item = next(documents, None)
            generating[0] += time.perf_counter() - began
            if item is None:
                return
            index, document, meta = item
            if index >= nodes:
                fresh.append(document)
                continue
            if index in wanted:
                sample.append({"meta": meta.to_json(), "solutions": [s["id"] for s in document["content"]["solutions"]]})
            yield f"synthetic:{index}", document

    started = time.perf_counter()
    service = await Mesh.open(url)  # a new database: migrates and seeds the starter corpus
    seeded = time.perf_counter() - started
    try:
        began = time.perf_counter()
        if imported:
            generated = sum(1 for _ in stream())  # fills the sample and the fresh documents
            created = set(await service.store.get_nodes([entry["meta"]["id"] for entry in sample]))
            print(f"import: skipped (--reuse); {generated:,} synthetic nodes generated again in "
                  f"{time.perf_counter() - began:.1f} s, {len(created):,} of the {len(sample):,} sampled there",
                  flush=True)
        else:
            report = await service.documents.import_documents(stream())
            elapsed = time.perf_counter() - began
            created = set(report.created)
            importing = elapsed - generating[0]
            print(f"import: {len(created):,} synthetic nodes in {elapsed:.1f} s = "
                  f"{len(created) / elapsed:,.0f} nodes/s with the document generator's {generating[0]:.1f} s, "
                  f"{len(created) / importing:,.0f} nodes/s without it (target >= 3,000/s); "
                  f"open + starter corpus {seeded:.1f} s", flush=True)
        total = await service.store.count_nodes()
        print(f"{total:,} nodes in all", flush=True)
        sample = [entry for entry in sample if entry["meta"]["id"] in created]
        creatable = set((await service.documents.import_documents(((d["id"], d) for d in fresh), dry_run=True)).created)
        fresh = [d for d in fresh if d["id"] in creatable]
        metas = [Meta(**entry["meta"]) for entry in sample]
        queries = make_queries(metas, seed=seed, count=2000, tag="pg-scale")
        for query in queries[:30]:  # untimed: first touch of the index pages
            await service.searching.search(query["q"], env=query.get("env"), limit=5)
        timings = []
        for query in queries:
            began = time.perf_counter()
            await service.searching.search(query["q"], env=query.get("env"), limit=5)
            timings.append((time.perf_counter() - began) * 1000)
        print(f"search in-process: {len(timings)} queries, p50 {statistics.median(timings):.2f} ms "
              f"(target <= 8), p95 {load_bench.percentile(timings, .95):.2f} ms (target <= 20)", flush=True)
    finally:
        await service.close()
    solutions = {entry["meta"]["id"]: entry["solutions"] for entry in sample}
    return load_bench.Workload(metas, solutions, [n for n, ids in solutions.items() if ids],
                               make_queries(metas, seed=seed, count=load_bench.QUERY_COUNT, tag="load"),
                               list(reversed(fresh)), total)


async def drive(urls: list[str], work: load_bench.Workload, clients: int, seconds: float, seed: int, numbering: int):
    started = time.perf_counter()
    first = numbering + 100 * len(urls)  # client numbers of their own per run: a second run's writes are new writes, not repeats
    results = await asyncio.gather(*(load_bench.run_client(urls[index % len(urls)], work, first + index, seed,
                                                           started + seconds, None) for index in range(clients)))
    return [record for records in results for record in records], time.perf_counter() - started


async def load(url: str, servers: int, work: load_bench.Workload, args: argparse.Namespace, workdir: Path,
               numbering: int) -> None:
    processes, urls = [], []
    for index in range(servers):
        port = load_bench.free_port()
        command = [sys.executable, "-m", "knowmesh_mcp.cli.main", "serve", "--http", "--port", str(port), "--db", url,
                   "--write-limit", "0"]
        stderr_path = workdir / f"server-{servers}-{index}.stderr"
        with stderr_path.open("wb") as stderr:
            processes.append((load_bench.subprocess.Popen(command, cwd=ROOT, stdout=load_bench.subprocess.DEVNULL,
                                                          stderr=stderr), stderr_path))
        urls.append(f"http://127.0.0.1:{port}")
    try:
        for (process, stderr_path), base in zip(processes, urls):
            if await load_bench.wait_until_up(base, process) is None:
                print(f"server {base} did not start")
                load_bench.print_stderr_tail(stderr_path)
                return
        print(f"\nload through {servers} server(s): {args.clients} clients for {args.seconds:g} s", flush=True)
        records, elapsed = await drive(urls, work, args.clients, args.seconds, args.seed, numbering)
    finally:
        for process, _ in processes:
            load_bench.stop_server(process)
    load_bench.print_latency(records, elapsed)
    errors = load_bench.print_problems(records)
    if errors:
        for _, stderr_path in processes:
            load_bench.print_stderr_tail(stderr_path, 20)
    print(load_bench.summary(records, elapsed, args, work.total_nodes, errors).replace("summary", f"summary, {servers} server(s)"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--reuse", action="store_true", help="keep the database an earlier run left, skip the import")
    args = parser.parse_args()
    with private_postgres() as server, tempfile.TemporaryDirectory(prefix="knowmesh-pg-scale-") as workdir:
        url, kept = fresh_database(server, f"knowmesh_scale_{args.nodes}", reuse=args.reuse)
        print(f"database: {url}" + (" (kept)" if kept else ""))
        work = asyncio.run(build(url, args.nodes, args.seed, imported=kept))
        # On a kept database the clients are numbered anew, so its writes are not an earlier run's again.
        numbering = (int(time.time()) % 100_000) * 1000 if kept else 0
        for servers in (1, 3):
            asyncio.run(load(url, servers, work, args, Path(workdir), numbering))
    return 0


if __name__ == "__main__":
    sys.exit(main())
