"""Feedback throughput, and what evidence costs search at 100,000 nodes.

    python bench/evidence_bench.py [--share 0.1] [--queries 600]

Copies the 100,000-node database that `bench/search_bench.py` builds (run that first), times
search on it, then records outcome reports on `--share` of the nodes (two or three agents
each, some of them failures, so states flip) through `Mesh.outcomes.report_outcome`, printing its
throughput, and times the same searches again. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import Meta, make_queries  # noqa: E402

from knowmesh_mcp.services.mesh import Mesh  # noqa: E402

ENVS = [{"os": "linux", "runtime": "python-3.12", "pkg_manager": "pip"},
        {"os": "macos-15", "runtime": "node-20", "pkg_manager": "npm"}]


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def time_searches(service: Mesh, queries: list[dict]) -> list[float]:
    for query in queries[:30]:
        await service.searching.search(query["q"], env=query["env"], ecosystem=query["ecosystem"], limit=5)
    samples = []
    for query in queries:
        started = time.perf_counter()
        await service.searching.search(query["q"], env=query["env"], ecosystem=query["ecosystem"], limit=5)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def bench(source: Path, share: float, count: int) -> None:
    info = json.loads(source.with_suffix(".sample.json").read_text())
    queries = make_queries([Meta(**m) for m in info["metas"]], seed=7, count=count)
    with tempfile.TemporaryDirectory() as workdir:
        db = Path(workdir) / "evidence.db"
        shutil.copyfile(source, db)
        service = await Mesh.open(db, seed=False)
        try:
            before = await time_searches(service, queries)
            rng = random.Random(11)
            total = await service.store.count_nodes()
            chosen = rng.sample(range(1, total + 1), int(total * share))
            rows = await service.store.get_nodes_by_pk(chosen)
            reports, started = 0, time.perf_counter()
            for row in rows:
                solutions = row.document["content"]["solutions"]
                if not solutions:
                    continue
                solution = solutions[0]["id"]
                for agent in range(rng.choice([2, 3])):
                    outcome = rng.choice(["solved", "solved", "failed"])
                    body = {"node": row.id, "solution": solution, "outcome": outcome, "env": rng.choice(ENVS),
                            "agent": {"id": f"bench-{agent}"}, "evidence": {"exit_code": 0} if outcome == "solved" else {},
                            "reason": "bench failure" if outcome == "failed" else None}
                    try:
                        await service.outcomes.report_outcome(body)
                        reports += 1
                    except Exception:  # a duplicate (same agent, same cluster) is refused by design
                        pass
            elapsed = time.perf_counter() - started
            print(f"feedback: {reports} reports on {len(rows)} nodes in {elapsed:.1f} s = {reports / elapsed:,.0f} reports/s")
            after = await time_searches(service, queries)
        finally:
            await service.close()
    p50b, p95b = statistics.median(before), percentile(before, 0.95)
    p50a, p95a = statistics.median(after), percentile(after, 0.95)
    print(f"search without evidence: p50 {p50b:.2f} ms, p95 {p95b:.2f} ms ({len(queries)} queries)")
    print(f"search with evidence on {share:.0%} of nodes: p50 {p50a:.2f} ms, p95 {p95a:.2f} ms")
    print(f"ratio: p50 {p50a / p50b:.2f}x, p95 {p95a / p95b:.2f}x (target <= 1.5x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", type=float, default=0.1)
    parser.add_argument("--queries", type=int, default=600)
    args = parser.parse_args()
    found = sorted(glob.glob(str(Path(__file__).parent / "out" / "search-n100000-*.db")))
    if not found:
        print("no 100,000-node database yet: run `python bench/search_bench.py` first")
        return
    asyncio.run(bench(Path(found[-1]), args.share, args.queries))


if __name__ == "__main__":
    main()
