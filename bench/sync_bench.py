"""Sync throughput: a personal mesh pulling a team mesh over real HTTP.

    python bench/sync_bench.py [--nodes 5000] [--edits 200] [--merges 0] [--team-db postgresql://...]

The team mesh is a `knowmesh-mcp serve --http` subprocess over a database of synthetic nodes
(bench/synthetic.py); the personal mesh syncs from it in this process, as
`knowmesh-mcp sync --from URL` does. Prints: the first full sync (nodes/s), a second sync
with nothing to change, and an incremental sync after `--edits` team edits. `--merges N` first
merges N pairs of the team's nodes (each change a sync reads names the nodes merged into it).
`--team-db` puts the team mesh in an empty PostgreSQL database instead of a SQLite file.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import Corpus  # noqa: E402

from knowmesh_mcp.services.maintaining import write_merge  # noqa: E402
from knowmesh_mcp.services.mesh import Mesh  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def wait_until_up(url: str) -> None:
    async with httpx2.AsyncClient(timeout=2) as client:
        for _ in range(200):
            try:
                if (await client.get(f"{url}/llms.txt")).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


async def timed_sync(personal: Mesh, url: str, label: str) -> None:
    started = time.perf_counter()
    report = await personal.sync.sync_from(url)
    elapsed = time.perf_counter() - started
    written = len(report.created) + len(report.updated)
    rate = f" = {written / elapsed:,.0f} nodes/s" if written else ""
    print(f"{label}: created {len(report.created)}, updated {len(report.updated)}, unchanged {report.unchanged} "
          f"in {elapsed:.2f} s{rate}")


async def bench(nodes: int, edits: int, merges: int, workdir: Path, team_db: str | None = None) -> None:
    team_db = team_db or str(workdir / "team.db")
    team = await Mesh.open(team_db, seed=False)
    documents = [(f"synthetic-{i}", document) for i, document, _ in Corpus(seed=7).generate(nodes)]
    created = (await team.documents.import_documents(documents)).created
    async with team.store.write() as tx:  # what confirmed dedupe tasks write, without the votes
        for merged, canonical in zip(created[:2 * merges:2], created[1:2 * merges:2]):
            await write_merge(tx, merged, canonical, "active", None, "bench-maintainer", "local")
    await team.close()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "knowmesh_mcp.cli.main", "serve", "--http", "--port", str(port), "--db", str(team_db),
         "--write-limit", "0"],
        env={**os.environ, "KNOWMESH_EMPTY": "1"},
    )
    personal = await Mesh.open(workdir / "personal.db", seed=False)
    try:
        await wait_until_up(url)
        await timed_sync(personal, url, f"first sync of {nodes:,} nodes, {merges:,} of them merged into others")
        await timed_sync(personal, url, "second sync, nothing changed")
        async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
            listed = (await client.get("/v1/nodes", params={"limit": edits, "fields": "title"})).json()["nodes"]
            for entry in listed:
                article = (await client.get(f"/v1/nodes/{entry['id']}/article")).json()
                await client.patch(f"/v1/nodes/{entry['id']}/article", json={
                    "base_revision": article["revision"], "agent": {"id": "bench-team"}, "summary": "bench edit",
                    "ops": [{"op": "set", "path": "/content/context", "value": "Edited on the team for the sync bench."}],
                })
        await timed_sync(personal, url, f"incremental sync after {len(listed)} team edits")
    finally:
        await personal.close()
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--edits", type=int, default=200)
    parser.add_argument("--merges", type=int, default=0)
    parser.add_argument("--team-db", help="an empty PostgreSQL database for the team mesh (default: a SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        asyncio.run(bench(args.nodes, args.edits, args.merges, Path(workdir), args.team_db))


if __name__ == "__main__":
    main()
