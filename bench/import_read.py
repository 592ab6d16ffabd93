"""Import throughput and read latency at 10,000 nodes.

    python bench/import_read.py [--nodes 10000] [--reads 2000]

Generates distinct node documents, imports them through the CLI path (`Mesh.documents.import_documents`,
the same call `knowmesh-mcp import` makes) into a fresh database, then times JSON and Markdown
reads in-process. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from knowmesh_mcp.services.import_export import load_documents
from knowmesh_mcp.services.mesh import Mesh

ECOSYSTEMS = ["python", "node", "go", "rust", "shell", "docker", "postgres", "typescript"]
WORDS = ("cannot find resolve import module package build fails missing symbol linker version mismatch "
         "permission denied socket timeout refused lock conflict path cache token schema index").split()


def generate(count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    documents = []
    for index in range(count):
        ecosystem = ECOSYSTEMS[index % len(ECOSYSTEMS)]
        words = " ".join(rng.choice(WORDS) for _ in range(6))
        solutions = [
            {"id": "linux", "title": "On Linux", "env": ["linux"], "fix": [f"step one {index}", "step two"],
             "verify": {"command": f"check-{index} --linux", "expected": "exit 0"}},
            {"id": "macos", "title": "On macOS", "env": ["macos"], "fix": [f"brew step {index}"],
             "verify": {"command": f"check-{index} --macos", "expected": "exit 0"}},
        ] if index % 5 else []
        documents.append({
            "id": f"{ecosystem}/generated-{index:05d}",
            "ecosystem": ecosystem,
            "title": f"Generated failure {index}: {words}",
            "signature": {"error": f"E{index:05d}Error: {words} in 'mod_{index}'", "environment": ["linux"]},
            "content": {
                "symptom": f"The build stops with {words}. " * 3,
                "context": f"Project {index} on CI with a cold cache; {words}.",
                "root_cause": f"A stale {rng.choice(WORDS)} shadows the {rng.choice(WORDS)}.",
                "solutions": solutions,
                "failed_attempts": [f"retry {index}"],
                "boundaries": ["Only for generated data."],
            },
        })
    return documents


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def bench(nodes: int, reads: int, workdir: Path) -> None:
    source = workdir / "generated.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in generate(nodes)), encoding="utf-8")

    service = await Mesh.open(workdir / "bench.db", seed=False)
    try:
        started = time.perf_counter()
        report = await service.documents.import_documents(load_documents([source]))
        elapsed = time.perf_counter() - started
        assert len(report.created) == nodes, report.to_dict()
        print(f"import: {nodes} nodes in {elapsed:.2f} s = {nodes / elapsed:,.0f} nodes/s (parse + validate + write)")

        ids = [f"{ECOSYSTEMS[i % len(ECOSYSTEMS)]}/generated-{i:05d}" for i in range(nodes)]
        rng = random.Random(1)
        for label, make_request in (
            ("JSON read", lambda: service.nodes.read_request()),
            ("JSON read ?env=", lambda: service.nodes.read_request(env="ubuntu-24.04,python-3.12,pip")),
        ):
            samples = []
            for _ in range(reads):
                node_id = rng.choice(ids)
                t0 = time.perf_counter()
                result = await service.nodes.read_node(node_id, make_request())
                json.dumps(result.body)
                samples.append((time.perf_counter() - t0) * 1000)
            print(f"{label}: p50 {statistics.median(samples):.3f} ms, p95 {percentile(samples, 0.95):.3f} ms ({reads} reads)")
        samples = []
        for _ in range(reads):
            t0 = time.perf_counter()
            (await service.nodes.read_node(rng.choice(ids))).markdown()
            samples.append((time.perf_counter() - t0) * 1000)
        print(f"Markdown read: p50 {statistics.median(samples):.3f} ms, p95 {percentile(samples, 0.95):.3f} ms ({reads} reads)")
    finally:
        await service.close()

    cli_db = workdir / "cli.db"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", "import", str(source), "--db", str(cli_db), "--empty"],
                   check=True, capture_output=True)
    cli_elapsed = time.perf_counter() - t0
    print(f"CLI `knowmesh-mcp import` of {nodes}: {cli_elapsed:.2f} s wall = {nodes / cli_elapsed:,.0f} nodes/s (process start included)")
    t0 = time.perf_counter()
    again = subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", "import", str(source), "--db", str(cli_db)],
                           check=True, capture_output=True, text=True)
    print(f"second import: {time.perf_counter() - t0:.2f} s, says: {again.stdout.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--reads", type=int, default=2_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        asyncio.run(bench(args.nodes, args.reads, Path(workdir)))


if __name__ == "__main__":
    main()
