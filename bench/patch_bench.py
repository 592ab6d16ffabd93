"""Article edit throughput: revisions per second, sequential and with concurrent writers.

    python bench/patch_bench.py [--revisions 1000] [--writers 8]

Each patch is a real edit through `Mesh.articles.patch_article` (validation, field diff, solution
revisions, version, revision row, undo token, index rows, one transaction) on a database
seeded with the starter corpus. Concurrent writers edit different nodes, so each edit wins;
their throughput shows what the single write path sustains under contention. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from knowmesh_mcp.services.mesh import Mesh


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def edit_loop(service: Mesh, node_id: str, count: int, latencies: list[float]) -> None:
    base = (await service.articles.read_article(node_id)).body["revision"]
    for index in range(count):
        started = time.perf_counter()
        result = await service.articles.patch_article(
            node_id, base_revision=base, agent={"id": f"bench-{node_id}"}, summary=f"bench edit {index}",
            ops=[{"op": "set", "path": "/content/context", "value": f"Benchmark context, edit {index}."}],
        )
        latencies.append((time.perf_counter() - started) * 1000)
        base = result["revision"]


async def bench(revisions: int, writers: int, workdir: Path) -> None:
    service = await Mesh.open(workdir / "patch.db")
    try:
        nodes = [entry["id"] for entry in (await service.nodes.list_nodes(limit=100))["nodes"]]
        sequential: list[float] = []
        started = time.perf_counter()
        await edit_loop(service, nodes[0], revisions, sequential)
        elapsed = time.perf_counter() - started
        print(f"sequential: {revisions} revisions in {elapsed:.2f} s = {revisions / elapsed:,.0f} revisions/s; "
              f"latency p50 {statistics.median(sequential):.2f} ms, p95 {percentile(sequential, 0.95):.2f} ms "
              f"(target >= 300 revisions/s)")

        concurrent: list[float] = []
        per_writer = max(1, revisions // writers)
        started = time.perf_counter()
        await asyncio.gather(*(edit_loop(service, nodes[1 + w], per_writer, concurrent) for w in range(writers)))
        elapsed = time.perf_counter() - started
        total = per_writer * writers
        print(f"{writers} concurrent writers: {total} revisions in {elapsed:.2f} s = {total / elapsed:,.0f} revisions/s; "
              f"latency p50 {statistics.median(concurrent):.2f} ms, p95 {percentile(concurrent, 0.95):.2f} ms")
    finally:
        await service.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revisions", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        asyncio.run(bench(args.revisions, args.writers, Path(workdir)))


if __name__ == "__main__":
    main()
