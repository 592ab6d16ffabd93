"""A team's mesh under load: several `serve --http` servers on one PostgreSQL database, beside the
same run on SQLite with one server; then a check that nothing acknowledged was lost.

    python bench/team_load.py [--nodes 10000] [--clients 32] [--seconds 120] [--servers 3]
                              [--burst 12] [--burst-every 10] [--seed 7] [--backend both|sqlite|postgres]

The mesh is `bench/load_bench.py`'s cached database (starter corpus plus `--nodes` synthetic
nodes), copied as it is for SQLite and with `knowmesh-mcp copy` into a fresh database of a
private PostgreSQL server (tests/postgres_server.py, or KNOWMESH_TEST_POSTGRES). Clients are
closed loops spread over the servers, with load_bench's mix: 80 % search, 15 % read, 5 % write
(patches after a read of the base revision, outcome reports, new nodes). Every `--burst-every`
seconds `--burst` reports from distinct agents arrive at once, spread over the servers (twelve
at once deadlocked a server's pool before issue 47).

After the run the servers stop and the database is opened directly: every acknowledged write
must be there (each 202 report by its id, each 201 node, each 200 patch's revision), and the
stored statistics of every reported node must equal a replay of its stored reports
(`evidence.node_stats`, what each report's transaction computes). Prints throughput and
p50/p95/p99 per route for each backend side by side, status codes, every error, the requests
slower than 5 s, and the check's counts. Prints figures; asserts nothing; exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for entry in (str(ROOT), str(HERE), str(ROOT / "tests")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import load_bench  # noqa: E402
from load_bench import Record, Request, Workload, percentile  # noqa: E402

from knowmesh_mcp.services.copying import copy_mesh  # noqa: E402
from knowmesh_mcp.core.evidence import node_stats  # noqa: E402
from knowmesh_mcp.services.outcomes import current_revisions, node_answers  # noqa: E402
from knowmesh_mcp.store import open_store  # noqa: E402

SLOW_MS = 5000.0  # the line: no request slower than this
SCORE_TOLERANCE = 1e-4  # report weights decay with age: a replay minutes later differs by ~1e-6


@dataclass
class Acks:
    """What the servers acknowledged: it must all be in the database afterwards."""

    reports: list[tuple[str, int]] = field(default_factory=list)  # (node, feedback id)
    nodes: list[str] = field(default_factory=list)
    revisions: list[tuple[str, int]] = field(default_factory=list)  # (node, revision)

    def note(self, request: Request, response: httpx2.Response | None) -> None:
        if request.group != "write" or response is None or response.status_code >= 300:
            return
        body = response.json()
        if request.route.startswith("POST feedback"):
            self.reports.append((body["node"], body["id"]))
        elif request.route == "POST node":
            self.nodes.append(body["id"])
        elif request.route == "PATCH article":
            self.revisions.append((request.path.removeprefix("/v1/nodes/").removesuffix("/article"), body["revision"]))


async def client_loop(url: str, work: Workload, client: int, seed: int, deadline: float, acks: Acks) -> list[Record]:
    rng = random.Random(f"team-client:{seed}:{client}")
    groups, weights = zip(*load_bench.MIX)
    records: list[Record] = []
    writes = 0
    async with httpx2.AsyncClient(base_url=url, timeout=load_bench.TIMEOUT_S) as http:
        while time.perf_counter() < deadline:
            group = rng.choices(groups, weights)[0]
            if group == "search":
                request: Request | None = load_bench.search_request(rng, work)
            elif group == "read":
                request = load_bench.read_request(rng, work)
            else:
                reads, request = await load_bench.write_request(http, rng, work, client, writes)
                records += reads
                writes += 1
            if request is not None:
                record, response = await load_bench.send(http, request)
                records.append(record)
                acks.note(request, response)
    return records


async def bursts(urls: list[str], work: Workload, size: int, every: float, deadline: float, seed: int,
                 acks: Acks) -> list[Record]:
    """`size` reports from distinct agents at once, spread over the servers, every `every` seconds."""
    rng = random.Random(f"team-burst:{seed}")
    records: list[Record] = []
    clients = [httpx2.AsyncClient(base_url=url, timeout=load_bench.TIMEOUT_S) for url in urls]
    try:
        round_ = 0
        while time.perf_counter() + every < deadline:
            await asyncio.sleep(every)
            requests = []
            for n in range(size):
                request = load_bench.feedback_request(rng, work, 10_000 + round_, n)
                requests.append(Request("write", "POST feedback (burst)", request.method, request.path, body=request.body))
            answers = await asyncio.gather(*(load_bench.send(clients[n % len(clients)], r) for n, r in enumerate(requests)))
            for request, (record, response) in zip(requests, answers):
                records.append(record)
                acks.note(request, response)
            round_ += 1
    finally:
        for client in clients:
            await client.aclose()
    return records


@dataclass
class Outcome:
    backend: str
    servers: int
    records: list[Record]
    elapsed: float
    acks: Acks
    missing: list[str]
    stats_checked: int
    stats_differing: list[str]


async def run(backend: str, db: str, servers: int, args: argparse.Namespace, workdir: Path, sample_file: Path) -> Outcome:
    work = Workload.load(sample_file, args.seed)
    ports = [load_bench.free_port() for _ in range(servers)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    processes = [load_bench.start_server(db, port, workdir / f"{backend}-{n}.stderr", "off")  # type: ignore[arg-type]
                 for n, port in enumerate(ports)]
    acks = Acks()
    try:
        for url, process in zip(urls, processes):
            if await load_bench.wait_until_up(url, process) is None:
                load_bench.print_stderr_tail(workdir / f"{backend}-{urls.index(url)}.stderr")
                raise SystemExit(f"{backend}: the server at {url} did not start")
        print(f"\n{backend}: {servers} server(s), {args.clients} clients for {args.seconds:g} s, "
              f"a burst of {args.burst} reports every {args.burst_every:g} s", flush=True)
        started = time.perf_counter()
        deadline = started + args.seconds
        results = await asyncio.gather(
            bursts(urls, work, args.burst, args.burst_every, deadline, args.seed, acks),
            *(client_loop(urls[n % servers], work, n, args.seed, deadline, acks) for n in range(args.clients)))
        elapsed = time.perf_counter() - started
        died = [n for n, process in enumerate(processes) if process.poll() is not None]
    finally:
        for process in processes:
            load_bench.stop_server(process)
    for n in died:
        print(f"{backend}: server {n} DIED during the run")
        load_bench.print_stderr_tail(workdir / f"{backend}-{n}.stderr")
    missing, checked, differing = await check(db, acks)
    return Outcome(backend, servers, [r for records in results for r in records], elapsed, acks, missing, checked, differing)


async def check(db: str, acks: Acks) -> tuple[list[str], int, list[str]]:
    """(acknowledged writes not found, nodes whose stats were replayed, nodes whose stats differ)."""
    store = await open_store(db)
    missing: list[str] = []
    try:
        for node_id, report_id in acks.reports:
            rows = await store.feedback_after(node_id, report_id - 1, 1)
            if not rows or rows[0]["id"] != report_id:
                missing.append(f"report {report_id} on {node_id}")
        found = await store.get_nodes(acks.nodes)
        missing += [f"node {node_id}" for node_id in acks.nodes if node_id not in found]
        for node_id, revision in acks.revisions:
            if revision not in {r.revision for r in await store.revisions(node_id)}:
                missing.append(f"revision {revision} of {node_id}")
        reported = sorted({node_id for node_id, _ in acks.reports})
        differing = []
        stored = await store.stats_of(reported)
        async with store.write() as tx:  # reads only: the replay sees exactly what is stored
            now = datetime.now(UTC)
            for node_id in reported:
                _, document, known = await node_answers(tx, node_id)
                replayed = node_stats(await tx.feedback_of(node_id), current_revisions(document, known), now)
                if not same_stats(stored.get(node_id, []), replayed):
                    differing.append(node_id)
    finally:
        await store.close()
    return missing, len(reported), differing


def same_stats(stored: list[Any], replayed: list[Any]) -> bool:
    """Equal states and agent counts; weighted counts and scores equal but for the age that passed."""
    def key(row: Any) -> tuple[Any, ...]:
        return row.solution_id, row.solution_revision, row.cluster
    ours, theirs = sorted(stored, key=key), sorted(replayed, key=key)
    if [key(r) for r in ours] != [key(r) for r in theirs]:
        return False
    for a, b in zip(ours, theirs):
        if (a.failure_state, a.answer_state, a.solved_agents, a.failed_agents, a.sample_size, a.last_verified) != \
                (b.failure_state, b.answer_state, b.solved_agents, b.failed_agents, b.sample_size, b.last_verified):
            return False
        if any(abs(x - y) > SCORE_TOLERANCE for x, y in ((a.solved, b.solved), (a.failed, b.failed),
                                                            (a.success_score, b.success_score))):
            return False
    return True


def report(outcome: Outcome) -> None:
    records, elapsed = outcome.records, outcome.elapsed
    print(f"\n== {outcome.backend}, {outcome.servers} server(s): {len(records):,} requests in {elapsed:.1f} s")
    load_bench.print_latency(records, elapsed)
    load_bench.print_statuses(records)
    errors = load_bench.print_problems(records)
    slow = [r for r in records if r.ms > SLOW_MS]
    print(f"\nrequests over {SLOW_MS / 1000:g} s: {len(slow)}" + "".join(
        f"\n  {r.route} {r.status} {r.ms:.0f} ms" for r in sorted(slow, key=lambda r: -r.ms)[:10]))
    acks = outcome.acks
    print(f"acknowledged: {len(acks.reports):,} reports, {len(acks.nodes):,} new nodes, {len(acks.revisions):,} patches; "
          f"missing afterwards: {len(outcome.missing)}" + "".join(f"\n  {m}" for m in outcome.missing[:10]))
    print(f"statistics replayed from the stored reports: {outcome.stats_checked:,} nodes, differing: "
          f"{len(outcome.stats_differing)}" + "".join(f"\n  {n}" for n in outcome.stats_differing[:10]))
    verdict = "ok" if errors == 0 and not slow and not outcome.missing and not outcome.stats_differing else "MISSED"
    print(f"summary {outcome.backend}: {len(records) / elapsed:,.0f} req/s, 5xx and no answer {errors}, over 5 s {len(slow)}, "
          f"lost {len(outcome.missing)}, stats differing {len(outcome.stats_differing)} ({verdict}: all must be 0)")


def side_by_side(outcomes: list[Outcome]) -> None:
    routes = sorted({(r.group, r.route) for o in outcomes for r in o.records})
    head = "".join(f"{o.backend + ' x' + str(o.servers):>36}" for o in outcomes)
    print(f"\n{'route':<26}{head}\n{'':<26}" + "".join(f"{'req/s':>9}{'p50':>9}{'p95':>9}{'p99':>9}" for _ in outcomes)
          + "   (ms)")
    for group, route in [*routes, ("", "ALL")]:
        cells = []
        for o in outcomes:
            ms = [r.ms for r in o.records if route == "ALL" or (r.group, r.route) == (group, route)]
            cells.append(f"{len(ms) / o.elapsed:>9.1f}{percentile(ms, .5):>9.1f}{percentile(ms, .95):>9.1f}"
                         f"{percentile(ms, .99):>9.1f}" if ms else f"{'-':>36}")
        print(f"{route:<26}" + "".join(cells))


async def postgres_copy(server_url: str, source: Path) -> str:
    from pg_scale import fresh_database

    url, _ = fresh_database(server_url, "knowmesh_team_load")
    started = time.perf_counter()
    copied = await copy_mesh(str(source), url)
    print(f"postgres: {copied.summary()} in {time.perf_counter() - started:.1f} s")
    return url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--servers", type=int, default=3, help="HTTP servers on the PostgreSQL database")
    parser.add_argument("--burst", type=int, default=12, help="reports sent at once in each burst")
    parser.add_argument("--burst-every", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--backend", choices=("both", "sqlite", "postgres"), default="both")
    args = parser.parse_args()

    db, sample_file = load_bench.cache_paths(args.nodes, args.seed)
    if not db.exists() or not sample_file.exists():
        asyncio.run(load_bench.build(args.nodes, args.seed))
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="knowmesh-team-load-") as folder:
        workdir = Path(folder)
        if args.backend in ("both", "sqlite"):
            copy = workdir / "team.db"
            shutil.copyfile(db, copy)
            outcomes.append(asyncio.run(run("sqlite", str(copy), 1, args, workdir, sample_file)))
        if args.backend in ("both", "postgres"):
            from postgres_server import private_postgres

            with private_postgres() as server:
                url = asyncio.run(postgres_copy(server, db))
                outcomes.append(asyncio.run(run("postgres", url, args.servers, args, workdir, sample_file)))
    for outcome in outcomes:
        report(outcome)
    side_by_side(outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
