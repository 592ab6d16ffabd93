"""`knowmesh-mcp doctor` and GET /v1/health: a few lines a user can act on, exit 1 with the reason."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import httpx2
import pytest

from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.store import migrations

from conftest import opened, serving

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]


def doctor(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KNOWMESH_DB": db}
    return subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", "doctor", *args], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


async def test_doctor_on_a_healthy_mesh_says_what_a_user_needs_to_know(tmp_path):
    db = str(tmp_path / "mesh.db")
    async with opened(db, seed=True) as service:
        nodes = await service.store.count_nodes()
        await service.tokens.add_token("alice")
        await service.tokens.add_token("mia", role="maintainer")
    checked = doctor(db)
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert lines[0] == f"database        {db} (sqlite)"
    latest = len(migrations())
    assert lines[1].startswith(f"schema version  {latest} (latest {latest})")
    assert lines[2] == f"nodes           {nodes}" and nodes > 100
    assert "tokens          1 agent, 1 maintainer" in lines and "last sync       never synced" in lines
    assert lines[-1] == "ok"


async def test_doctor_exits_1_with_the_reason(tmp_path):
    missing = doctor(str(tmp_path / "nowhere.db"))
    assert missing.returncode == 1 and "no database at" in missing.stderr
    db = str(tmp_path / "broken.db")
    async with opened(db, seed=True):
        pass
    with sqlite3.connect(db) as connection:
        connection.execute("DELETE FROM node_index WHERE node_pk IN (SELECT pk FROM nodes ORDER BY pk LIMIT 2)")
    broken = doctor(db, "--json")
    assert broken.returncode == 1
    assert any("2 node(s) are missing from the search index" in p for p in json.loads(broken.stdout)["problems"])


async def test_health_route_reports_auth_tokens_and_syncs(service, tmp_path):
    async with serving(build_app(service=service, auth="required", with_mcp=False)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
            nobody = (await client.get("/v1/health")).json()
            await service.tokens.add_token("alice")
            fine = (await client.get("/v1/health")).json()
        async with opened(tmp_path / "personal.db") as personal:
            await personal.sync.sync_from(url)
            synced = await personal.health.check()
    assert nobody["ok"] is False and nobody["auth"] == "required"
    assert any("nobody can write" in problem for problem in nobody["problems"])
    assert fine["ok"] is True and fine["tokens"] == {"agent": 1, "maintainer": 0}
    assert fine["database"] == service.store.path and fine["schema_version"] == fine["latest_schema_version"]
    assert [s["remote"] for s in synced["syncs"]] == [url] and synced["auth"] is None
