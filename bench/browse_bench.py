"""Browsing a big mesh: the pages and routes that read the whole mesh, not one node.

    python bench/browse_bench.py [--db PATH_OR_URL] [--rounds 20]

The home page counts nodes per ecosystem and the whole review queue, `/nodes` counts by
ecosystem, `/review` and `GET /v1/review` find every reason's items (up to `REVIEW_SCAN` each)
to say how many there are. Each of them is timed through the HTTP app in this process (no
network), `--rounds` times after one untimed request, and printed as p50 / max with the
response size. The default mesh is `bench/search_bench.py`'s cached 100,000-node database
(built by running that bench once); `--db postgresql://...` times a team mesh, e.g. one made
with `knowmesh-mcp copy --from <that file> --to postgresql://...`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from search_bench import cache_paths  # noqa: E402

from knowmesh_mcp.api.app import build_app  # noqa: E402
from knowmesh_mcp.services.mesh import Mesh  # noqa: E402

ROUTES = ("/", "/nodes", "/nodes/python", "/review", "/review?reason=unsolved", "/v1/review",
          "/v1/review?reason=stale&limit=200", "/sitemap.xml", "/sitemap.xml?page=1", "/sitemap.xml?page=9")


async def run(db: str | Path, rounds: int) -> None:
    service = await Mesh.open(db, seed=False)
    try:
        nodes = await service.store.count_nodes()
        print(f"{nodes:,} nodes in {db}; {rounds} rounds a route after one untimed request")
        app = build_app(service=service, with_mcp=False)
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            print(f"  {'route':38} {'status':>6} {'p50 ms':>8} {'max ms':>8} {'bytes':>9}")
            for route in ROUTES:
                response = await client.get(route)
                times = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    response = await client.get(route)
                    times.append((time.perf_counter() - started) * 1000)
                print(f"  {route:38} {response.status_code:>6} {statistics.median(times):8.1f} {max(times):8.1f} "
                      f"{len(response.content):9,}")
    finally:
        await service.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="a mesh file or postgresql://... (default: search_bench's 100,000-node mesh)")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    db: str | Path = args.db or cache_paths(100_000, 7)[0]
    if not args.db and not Path(db).exists():
        print(f"{db} does not exist: run `python bench/search_bench.py` once to build it, or pass --db")
        return 1
    asyncio.run(run(db if "://" in str(db) else Path(db), args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
