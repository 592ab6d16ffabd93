"""Load on the HTTP server: throughput, latency and errors of a real `serve --http` under concurrent clients.

    python bench/load_bench.py [--nodes 10000] [--clients 8] [--seconds 60] [--seed 7] [--rebuild] [--auth required]

The database holds the starter corpus plus `--nodes` synthetic nodes from `bench/synthetic.py`.
The first run builds it (`Mesh.open(db)`, which seeds the starter corpus, then
`service.documents.import_documents(...)`) and caches it in `bench/out/` as
`load-n{nodes}-s{seed}-g{generator version}-m{hash}.db`, where the hash covers the migrations,
the starter corpus and the normalizer and search-index versions, beside a `.sample.json` with
up to 5,000 of the created nodes (their error metadata and answer ids) and the generator's next
3,000 documents that a dry-run import accepts, which become the new nodes the clients create. Reruns reuse both; `--rebuild` forces a build.

Each run copies the cached database to a temporary directory, starts
`python -m knowmesh_mcp.cli.main serve --http --port <free port> --db <copy> --write-limit 0`, waits
for `/llms.txt`, sends a few untimed warm-up searches, and then runs `--clients` closed-loop
clients (one `httpx2.AsyncClient` each, one request at a time) for `--seconds`. Each request is
80 % search (GET /v1/search with a query of `synthetic.make_queries`, with its env when it has
one), 15 % read (GET /v1/nodes/{id}?env=... or /v1/nodes/{id}.md) and 5 % write; a client's
writes rotate through PATCH /v1/nodes/{id}/article (after a GET of the article for a fresh
base_revision, counted as a request of its own), POST /v1/feedback and POST /v1/nodes.

With `--auth required` the server takes writes with agent tokens only: each client gets its own
token (made with `token add` on the copy before the server starts) and sends it on every request,
reads too, so every request pays for the token check; bodies then name no agent, and a second
report of one client on one answer and environment is a fair `409 duplicate_report`.

Prints requests per second and p50/p95/p99 latency overall, per operation and per route, the
count of each status code, the CPU used by the server and by the load generator (both share
this machine: a saturated generator understates the server), and every error: a 5xx, a
connection error or a timeout (10 s), with its route, status and body. There should be none.
Unexpected 4xx are listed too. If the server died, the tail of its stderr is printed.
Prints figures; asserts nothing; exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for entry in (str(ROOT), str(HERE)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from synthetic import GENERATOR_VERSION, Corpus, Meta, env_for, make_queries  # noqa: E402

from knowmesh_mcp.core.normalize import NORMALIZER_VERSION  # noqa: E402
from knowmesh_mcp.search.query import SEARCH_INDEX_VERSION  # noqa: E402
from knowmesh_mcp.services.mesh import Mesh  # noqa: E402

OUT = HERE / "out"
CACHE_FORMAT = 2  # bump when the sample file changes shape
SAMPLE_SIZE = 5000
FRESH_DOCUMENTS = 3000  # new nodes for POST /v1/nodes; creates stop (and are reported) past this
QUERY_COUNT = 2000
WARMUP = 30
LIMIT = 5
TIMEOUT_S = 10.0
MIX = [("search", 0.80), ("read", 0.15), ("write", 0.05)]
WRITES = ["patch", "feedback", "create"]
FEEDBACK_ENVS = [{"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"},
                 {"os": "macos-15", "runtime": "node-20", "pkg_manager": "npm"},
                 {"os": "debian-12", "runtime": "go-1.22"}]
EXPECTED_4XX = {("write", "PATCH article"): {409}}  # a concurrent edit of the same node is a fair conflict
EXPECTED_4XX_WITH_TOKENS = {**EXPECTED_4XX, ("write", "POST feedback"): {409}}  # one agent per client: one vote each


# --- helpers -----------------------------------------------------------------------------


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cache_paths(nodes: int, seed: int) -> tuple[Path, Path]:
    """The cached database and its sample, keyed by everything that shapes their content."""
    digest = hashlib.sha256(f"{CACHE_FORMAT}:{NORMALIZER_VERSION}:{SEARCH_INDEX_VERSION}".encode())
    for path in sorted((ROOT / "store" / "migrations").glob("*.sql")) + sorted((ROOT / "store" / "starter").rglob("*.json")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    stem = f"load-n{nodes}-s{seed}-g{GENERATOR_VERSION}-m{digest.hexdigest()[:8]}"
    return OUT / f"{stem}.db", OUT / f"{stem}.sample.json"


def remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# --- build --------------------------------------------------------------------------------


async def build(nodes: int, seed: int) -> None:
    """Build the database (starter corpus + synthetic nodes) and write the sample beside it."""
    db, sample_file = cache_paths(nodes, seed)
    OUT.mkdir(parents=True, exist_ok=True)
    for stale in OUT.glob(f"load-n{nodes}-s{seed}-*"):
        stale.unlink()
    wanted = set(random.Random(f"load-sample:{seed}").sample(range(nodes), min(nodes, SAMPLE_SIZE)))
    sample: list[dict[str, Any]] = []
    fresh: list[dict[str, Any]] = []

    def stream():
        for index, document, meta in Corpus(seed).generate(nodes + FRESH_DOCUMENTS):
            if index >= nodes:  # the generator's next documents: distinct from every node above
                fresh.append(document)
                continue
            if index in wanted:
                sample.append({"meta": meta.to_json(), "solutions": [s["id"] for s in document["content"]["solutions"]]})
            yield f"synthetic:{index}", document

    building = db.with_name(db.stem + ".building.db")
    remove_db(building)
    print(f"building the starter corpus + {nodes:,} synthetic nodes (seed {seed}) into {db.relative_to(ROOT)} ...", flush=True)
    started = time.perf_counter()
    service = await Mesh.open(building)  # a new database: seeds the starter corpus
    try:
        report = await service.documents.import_documents(stream())
        total = await service.store.count_nodes()
        # Keep what the clients can use: sampled nodes that were created, new documents that would be.
        created = set(report.created)
        sample = [entry for entry in sample if entry["meta"]["id"] in created]
        creatable = set((await service.documents.import_documents(((d["id"], d) for d in fresh), dry_run=True)).created)
        fresh = [d for d in fresh if d["id"] in creatable]
    finally:
        await service.close()
    for suffix in ("-wal", "-shm"):
        if Path(str(building) + suffix).exists():
            os.replace(str(building) + suffix, str(db) + suffix)
    os.replace(building, db)
    print(f"build: {len(report.created):,} synthetic nodes created ({len(report.skipped)} skipped, "
          f"{len(report.invalid)} invalid), {total:,} nodes in all, in {time.perf_counter() - started:.1f} s; "
          f"sample {len(sample):,} nodes, {len(fresh):,} new documents for POST /v1/nodes")
    for item in (report.skipped + report.invalid)[:3]:
        print(f"  not created: {json.dumps(item)[:200]}")
    sample_file.write_text(json.dumps({"nodes": nodes, "seed": seed, "total": total, "sample": sample, "fresh": fresh}))


# --- the workload ---------------------------------------------------------------------------


@dataclass
class Workload:
    metas: list[Meta]
    solutions: dict[str, list[str]]  # node id -> answer ids
    answered: list[str]  # the sampled nodes with at least one answer: feedback targets
    queries: list[dict[str, Any]]
    fresh: list[dict[str, Any]]  # shared by every client: popped once each
    total_nodes: int

    @classmethod
    def load(cls, sample_file: Path, seed: int) -> Workload:
        info = json.loads(sample_file.read_text())
        metas = [Meta(**entry["meta"]) for entry in info["sample"]]
        solutions = {entry["meta"]["id"]: entry["solutions"] for entry in info["sample"]}
        answered = [node_id for node_id, ids in solutions.items() if ids]
        queries = make_queries(metas, seed=seed, count=QUERY_COUNT, tag="load")
        return cls(metas, solutions, answered, queries, list(reversed(info["fresh"])), info["total"])


@dataclass
class Request:
    group: str  # search | read | write
    route: str  # the label the tables use
    method: str
    path: str
    params: dict[str, Any] | None = None
    body: dict[str, Any] | None = None


@dataclass
class Record:
    group: str
    route: str
    status: int | None  # None: no response (connection error or timeout)
    ms: float
    error: str | None  # a 5xx body, an exception, or an unexpected 4xx body


def search_request(rng: random.Random, work: Workload) -> Request:
    query = rng.choice(work.queries)
    params = {"q": query["q"], "limit": LIMIT}
    for key in ("env", "ecosystem"):
        if query[key]:
            params[key] = query[key]
    return Request("search", "GET search ?env=" if query["env"] else "GET search", "GET", "/v1/search", params)


def read_request(rng: random.Random, work: Workload) -> Request:
    meta = rng.choice(work.metas)
    if rng.random() < 0.5:
        return Request("read", "GET node ?env=", "GET", f"/v1/nodes/{meta.id}", {"env": env_for(rng, meta.ecosystem)})
    return Request("read", "GET node .md", "GET", f"/v1/nodes/{meta.id}.md")


def feedback_request(rng: random.Random, work: Workload, client: int, serial: int) -> Request:
    node_id = rng.choice(work.answered)
    solution = rng.choice(work.solutions[node_id])
    body: dict[str, Any] = {"node": node_id, "solution": solution, "env": rng.choice(FEEDBACK_ENVS),
                            "agent": {"id": f"load-{client}-{serial}"}}  # one agent per report: no duplicate_report
    if rng.random() < 0.7:
        body.update(outcome="solved", evidence={"verify": "true", "exit_code": 0})
    else:
        body.update(outcome="failed", reason="the verify command still exits 1 under the load bench")
    return Request("write", "POST feedback", "POST", "/v1/feedback", body=body)


def create_request(work: Workload, client: int) -> Request | None:
    if not work.fresh:
        return None
    document = work.fresh.pop()
    return Request("write", "POST node", "POST", "/v1/nodes", body={**document, "agent": {"id": f"load-{client}"}})


def patch_body(base_revision: Any, client: int, serial: int) -> dict[str, Any]:
    return {"base_revision": base_revision, "agent": {"id": f"load-{client}"}, "summary": "load bench edit",
            "ops": [{"op": "set", "path": "/content/context",
                     "value": f"Edited under load by client {client} (write {serial}); seen on CI with a warm cache."}]}


# --- the clients ----------------------------------------------------------------------------


def anonymous(body: dict[str, Any] | None) -> dict[str, Any] | None:
    """A body without `agent`: with a token, the token says who acts."""
    return {k: v for k, v in body.items() if k != "agent"} if body else body


async def send(http: httpx2.AsyncClient, request: Request) -> tuple[Record, httpx2.Response | None]:
    started = time.perf_counter()
    tokens = "authorization" in http.headers
    try:
        response = await http.request(request.method, request.path, params=request.params,
                                      json=anonymous(request.body) if tokens else request.body)
    except httpx2.HTTPError as exc:  # connection refused or reset, timeout, protocol error
        ms = (time.perf_counter() - started) * 1000
        return Record(request.group, request.route, None, ms, f"{type(exc).__name__}: {exc}"), None
    ms = (time.perf_counter() - started) * 1000
    status = response.status_code
    expected = EXPECTED_4XX_WITH_TOKENS if tokens else EXPECTED_4XX
    unexpected_4xx = 400 <= status < 500 and status not in expected.get((request.group, request.route), set())
    error = f"{response.text[:400]}" if status >= 500 or unexpected_4xx else None
    return Record(request.group, request.route, status, ms, error), response


async def write_request(http: httpx2.AsyncClient, rng: random.Random, work: Workload, client: int,
                        serial: int) -> tuple[list[Record], Request | None]:
    """The client's next write in the rotation, and the records of what it took to make it (a patch
    first reads its base revision: a request of its own); None when that read failed."""
    kind = WRITES[serial % len(WRITES)]
    if kind == "create" and (request := create_request(work, client)) is not None:
        return [], request
    if kind == "feedback" or kind == "create":  # no fresh document left: a feedback instead
        return [], feedback_request(rng, work, client, serial)
    node_id = rng.choice(work.metas).id
    read, response = await send(http, Request("write", "GET article (base)", "GET", f"/v1/nodes/{node_id}/article"))
    if response is None or response.status_code != 200:
        return [read], None
    return [read], Request("write", "PATCH article", "PATCH", f"/v1/nodes/{node_id}/article",
                           body=patch_body(response.json().get("revision"), client, serial))


async def write(http: httpx2.AsyncClient, rng: random.Random, work: Workload, client: int, serial: int) -> list[Record]:
    records, request = await write_request(http, rng, work, client, serial)
    if request is not None:
        records.append((await send(http, request))[0])
    return records


async def run_client(url: str, work: Workload, client: int, seed: int, deadline: float, token: str | None) -> list[Record]:
    rng = random.Random(f"load-client:{seed}:{client}")
    groups, weights = zip(*MIX)
    records: list[Record] = []
    writes = 0
    headers = {"authorization": f"Bearer {token}"} if token else None
    async with httpx2.AsyncClient(base_url=url, timeout=TIMEOUT_S, headers=headers) as http:
        while time.perf_counter() < deadline:
            group = rng.choices(groups, weights)[0]
            if group == "search":
                records.append((await send(http, search_request(rng, work)))[0])
            elif group == "read":
                records.append((await send(http, read_request(rng, work)))[0])
            else:
                records += await write(http, rng, work, client, writes)
                writes += 1
    return records


async def drive(url: str, work: Workload, clients: int, seconds: float, seed: int,
                tokens: list[str | None]) -> tuple[list[Record], float]:
    async with httpx2.AsyncClient(base_url=url, timeout=TIMEOUT_S) as http:
        for query in work.queries[-WARMUP:]:  # untimed: first-touch of the index pages
            await http.get("/v1/search", params={"q": query["q"], "limit": LIMIT})
    started = time.perf_counter()
    results = await asyncio.gather(*(run_client(url, work, index, seed, started + seconds, tokens[index])
                                     for index in range(clients)))
    return [record for records in results for record in records], time.perf_counter() - started


# --- the server -------------------------------------------------------------------------------


def start_server(db: Path, port: int, stderr_path: Path, auth: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "knowmesh_mcp.cli.main", "serve", "--http", "--port", str(port), "--db", str(db),
               "--write-limit", "0", "--auth", auth]
    print(f"server: {' '.join(['python', *command[1:]])}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with stderr_path.open("wb") as stderr:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


async def wait_until_up(url: str, server: subprocess.Popen, limit_s: float = 60.0) -> float | None:
    """Seconds until /llms.txt answers 200, or None if the server exited or never answered."""
    started = time.perf_counter()
    async with httpx2.AsyncClient(timeout=2) as http:
        while time.perf_counter() - started < limit_s and server.poll() is None:
            try:
                if (await http.get(f"{url}/llms.txt")).status_code == 200:
                    return time.perf_counter() - started
            except httpx2.HTTPError:
                pass
            await asyncio.sleep(0.1)
    return None


def stop_server(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def print_stderr_tail(stderr_path: Path, lines: int = 40) -> None:
    tail = stderr_path.read_text(errors="replace").splitlines()[-lines:]
    print(f"\nserver stderr (last {len(tail)} lines):")
    for line in tail:
        print(f"  | {line}")


# --- report ---------------------------------------------------------------------------------


def latency_row(label: str, records: list[Record], elapsed: float) -> str:
    ms = [r.ms for r in records]
    return (f"  {label:<22}{len(records):>8,}{len(records) / elapsed:>9.1f}{percentile(ms, .5):>9.2f}"
            f"{percentile(ms, .95):>9.2f}{percentile(ms, .99):>9.2f}{max(ms):>9.1f}")


def print_latency(records: list[Record], elapsed: float) -> None:
    print(f"\n  {'operation':<22}{'requests':>8}{'req/s':>9}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}   (ms)")
    by_group: dict[str, list[Record]] = defaultdict(list)
    by_route: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for record in records:
        by_group[record.group].append(record)
        by_route[(record.group, record.route)].append(record)
    for group, _ in MIX:
        if by_group.get(group):
            print(latency_row(group, by_group[group], elapsed))
            for (owner, route), subset in sorted(by_route.items()):
                if owner == group:
                    print(latency_row("  " + route, subset, elapsed))
    print(latency_row("ALL", records, elapsed))


def print_statuses(records: list[Record]) -> None:
    statuses = Counter("no response" if r.status is None else str(r.status) for r in records)
    print("\nstatus codes: " + ", ".join(f"{code} {count:,}" for code, count in sorted(statuses.items())))
    by_route: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        by_route[r.route]["no response" if r.status is None else str(r.status)] += 1
    for route, counter in sorted(by_route.items()):
        print(f"  {route:<22}" + ", ".join(f"{code} {count:,}" for code, count in sorted(counter.items())))


def is_error(record: Record) -> bool:
    return record.status is None or record.status >= 500


def print_problems(records: list[Record]) -> int:
    """Errors (5xx, no response) and unexpected 4xx, grouped by route, status and body; returns the error count."""
    errors = [r for r in records if is_error(r)]
    odd = [r for r in records if r.error and not is_error(r)]
    for title, subset in (("errors (5xx, connection errors, timeouts)", errors), ("unexpected 4xx", odd)):
        grouped = Counter((r.route, r.status, r.error) for r in subset)
        print(f"\n{title}: {len(subset)}")
        for (route, status, body), count in grouped.most_common(10):
            print(f"  {count:>5} x {route} -> {status if status is not None else 'no response'}: {body}")
    return len(errors)


def summary(records: list[Record], elapsed: float, args: argparse.Namespace, total_nodes: int, errors: int) -> str:
    ms = [r.ms for r in records]
    search = [r.ms for r in records if r.group == "search"] or [0.0]
    return (f"summary (nothing is asserted; errors must be 0): {len(records) / elapsed:,.0f} req/s, {len(records):,} requests, "
            f"{args.clients} clients x {elapsed:.0f} s on {total_nodes:,} nodes; all p50 {percentile(ms, .5):.1f} ms, "
            f"p95 {percentile(ms, .95):.1f} ms, p99 {percentile(ms, .99):.1f} ms; search p95 {percentile(search, .95):.1f} ms; "
            f"errors {errors} ({'ok' if errors == 0 else 'MISSED'}: must be 0)")


# --- main -----------------------------------------------------------------------------------


async def run(args: argparse.Namespace, db: Path, work: Workload, workdir: Path) -> None:
    copy = workdir / "load.db"
    shutil.copyfile(db, copy)
    tokens: list[str | None] = [None] * args.clients
    if args.auth == "required":
        service = await Mesh.open(copy, seed=False)
        try:
            tokens = [(await service.tokens.add_token(f"load-{client}"))["token"] for client in range(args.clients)]
        finally:
            await service.close()
    port, stderr_path = free_port(), workdir / "server.stderr"
    url = f"http://127.0.0.1:{port}"
    server = start_server(copy, port, stderr_path, args.auth)
    try:
        up = await wait_until_up(url, server)
        if up is None:
            print(f"server: did not answer {url}/llms.txt (exit code {server.poll()}); nothing to measure")
            print_stderr_tail(stderr_path)
            return
        print(f"server: up in {up:.1f} s at {url} (pid {server.pid})")
        print(f"load: {args.clients} clients for {args.seconds:g} s; mix "
              + ", ".join(f"{group} {share:.0%}" for group, share in MIX) + f"; {len(work.queries)} queries, "
              f"{sum(1 for q in work.queries if q['env'])} with env; {len(work.metas):,} nodes to read and write", flush=True)
        server_cpu, client_cpu = cpu_seconds(server.pid), time.process_time()
        records, elapsed = await drive(url, work, args.clients, args.seconds, args.seed, tokens)
        alive = server.poll() is None
        server_cpu = cpu_seconds(server.pid) - server_cpu if alive else float("nan")
        client_cpu = time.process_time() - client_cpu
        rss = peak_rss_mb(server.pid) if alive else None
    finally:
        stop_server(server)
    if not records:
        print("load: no request completed")
        return
    print(f"load: {len(records):,} requests in {elapsed:.1f} s; CPU: server {server_cpu / elapsed:.0%} of one core, "
          f"load generator {client_cpu / elapsed:.0%} of one core ({os.cpu_count()} cores here)"
          + (f"; server peak RSS {rss:,.0f} MB" if rss else ""))
    print_latency(records, elapsed)
    print_statuses(records)
    errors = print_problems(records)
    created = sum(1 for r in records if r.route == "POST node")
    if created and not work.fresh:
        print(f"\nnote: all {FRESH_DOCUMENTS} fresh documents were created; later create slots sent feedback instead")
    if not alive:
        print(f"\nserver: DIED during the run (exit code {server.returncode})")
    if not alive or errors:
        print_stderr_tail(stderr_path)
    print("\n" + summary(records, elapsed, args, work.total_nodes, errors))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached database")
    parser.add_argument("--auth", choices=("off", "required"), default="off",
                        help="required: each client sends its own agent token on every request")
    args = parser.parse_args()

    db, sample_file = cache_paths(args.nodes, args.seed)
    if args.rebuild or not db.exists() or not sample_file.exists():
        asyncio.run(build(args.nodes, args.seed))
    else:
        print(f"cached database {db.relative_to(ROOT)} ({db.stat().st_size / 2**20:,.0f} MB); --rebuild to rebuild")
    work = Workload.load(sample_file, args.seed)
    with tempfile.TemporaryDirectory(prefix="knowmesh-load-") as workdir:
        asyncio.run(run(args, db, work, Path(workdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
