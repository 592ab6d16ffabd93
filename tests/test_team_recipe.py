"""The README's team recipe, run as a reader runs it: the shell lines of its "On PostgreSQL" block,
top to bottom, in subprocesses, against the tests' private PostgreSQL server: a role and a
database made by the superuser, a personal mesh copied in, a token, three `serve --http`
servers, `doctor`; then a report through each server with the token.

Only what cannot be the same here is swapped, each swap checked to apply: names of the role and
database (the test server's superuser is already `knowmesh`), the server's address (a socket of
its own), the personal mesh's path, the ports, and `sudo -u postgres` (the superuser is reached by
PGUSER instead). Followed from the top, the recipe used to break: `token add` (or `doctor`) loaded
the starter corpus, and `copy --to` then refused the database as "a different mesh".
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from conftest import free_port
from postgres_server import binary

ROOT = Path(__file__).resolve().parent.parent
ROLE, DATABASE = "recipe_team", "recipe_mesh"


def recipe_lines() -> list[str]:
    """The shell lines of the README's PostgreSQL block, comments and trailing comments dropped."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### On PostgreSQL: several servers, one mesh"):]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert block is not None
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def swapped(line: str, swaps: dict[str, str]) -> str:
    for old, new in swaps.items():
        line = line.replace(old, new)
    return line


def test_the_readme_team_recipe_works_from_an_empty_cluster(postgres_server: str, tmp_path):
    superuser_url = urlsplit(postgres_server)
    socket_dir = dict(part.split("=", 1) for part in superuser_url.query.split("&"))["host"]
    team_url = f"postgresql://{ROLE}@/{DATABASE}?host={socket_dir}"
    personal = tmp_path / "personal.db"
    ports = [free_port() for _ in range(3)]
    cli = f"{shlex.quote(sys.executable)} -m knowmesh_mcp.cli.main"
    swaps = {
        "sudo -u postgres createuser knowmesh": f"{binary('createuser')} {ROLE}",
        "sudo -u postgres createdb --owner knowmesh knowmesh": f"{binary('createdb')} --owner {ROLE} {DATABASE}",
        "postgresql://knowmesh@db.internal/knowmesh": team_url,
        "~/.local/share/knowmesh/knowmesh.db": str(personal),
        **{f"--port {8765 + n}": f"--port {port}" for n, port in enumerate(ports)},
        "knowmesh-mcp ": cli + " ",
    }
    lines = recipe_lines()
    for old in swaps:
        assert any(old in line for line in lines), f"the README's recipe no longer says {old!r}"
    env = {**os.environ, "PGHOST": socket_dir, "PGUSER": superuser_url.username or "postgres"}
    env.pop("KNOWMESH_DB", None)
    env.pop("KNOWMESH_EMPTY", None)

    # The reader's personal mesh, made the way any first command makes it (the starter corpus).
    made = subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", "search", "KeyError", "--db", str(personal)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert made.returncode == 0, made.stderr

    servers: list[subprocess.Popen[str]] = []
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        for line in (swapped(line, swaps) for line in lines):
            if line.startswith("export "):
                name, _, value = line.removeprefix("export ").partition("=")
                env[name] = value
            elif line.endswith("&"):
                servers.append(subprocess.Popen(line.removesuffix("&"), shell=True, env=env, text=True,
                                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                                start_new_session=True))  # the shell and its server: one group
            else:
                done = subprocess.run(line, shell=True, env=env, capture_output=True, text=True, timeout=300, check=False)
                assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
                outputs[line.split()[3] if line.startswith(cli) else line.split()[0]] = done
        assert len(servers) == 3
        bases = [f"http://127.0.0.1:{port}" for port in ports]
        wait_until_serving(bases, servers)

        copied, doctor = outputs["copy"].stdout, outputs["doctor"].stdout
        assert copied.startswith("copied 177 nodes, 177 revisions"), copied
        assert doctor.splitlines()[0].split(None, 1)[1] == f"{team_url} (postgresql)" and "ok" in doctor.splitlines()
        token = outputs["token"].stdout.split()[0]
        assert token.startswith("km_")
        node = "python/module-not-found-venv"
        with httpx2.Client(timeout=30) as client:
            solution = client.get(f"{bases[0]}/v1/nodes/{node}").json()["content"]["solutions"][0]["id"]
            unsigned = client.post(f"{bases[0]}/v1/feedback", json={
                "node": node, "solution": solution, "outcome": "failed", "reason": "x", "env": {"os": "linux"}})
            receipts = [client.post(f"{base}/v1/feedback", headers={"authorization": f"Bearer {token}"}, json={
                "node": node, "solution": solution, "outcome": "failed", "reason": "still fails",
                "env": {"os": "linux", "runtime": f"python-{n + 3}"}}) for n, base in enumerate(bases)]
            feedback = [client.get(f"{base}/v1/nodes/{node}/feedback").json()["feedback"] for base in bases]
    finally:
        for server in servers:
            os.killpg(server.pid, signal.SIGTERM)
        logs = [server.communicate(timeout=30)[1] for server in servers]
    assert (unsigned.status_code, unsigned.json()["error"]["code"]) == (401, "auth_required")
    assert [r.status_code for r in receipts] == [202] * 3, [r.text for r in receipts]
    assert all(r.json()["proven"] for r in receipts)
    assert feedback[0] == feedback[1] == feedback[2] and [f["agent_id"] for f in feedback[0]] == ["alice"] * 3
    assert not any("Traceback" in log for log in logs), logs


def wait_until_serving(bases: list[str], servers: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + 60
    for base, server in zip(bases, servers):
        while True:
            assert server.poll() is None, f"the server for {base} ended: {server.stderr.read() if server.stderr else ''}"
            try:
                if httpx2.get(f"{base}/v1/health", timeout=2).status_code in (200, 503):
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, f"{base} did not start"
            time.sleep(0.2)


def test_tokens_and_doctor_before_the_copy_leave_room_for_it(pg_database: str, tmp_path):
    """The order the README used to give: `token add` first (it loaded the starter corpus), then the
    copy of a personal mesh, which refused the database as "a different mesh"; `doctor` printed a
    socket URL with a password as `postgresql://user:***@None/...`."""
    personal = str(tmp_path / "personal.db")
    with_password = pg_database.replace("://knowmesh@", "://knowmesh:s3cret@")
    env = {key: value for key, value in os.environ.items() if key not in ("KNOWMESH_DB", "KNOWMESH_EMPTY")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", *args], capture_output=True, text=True,
                              env=env, timeout=300, check=False)

    assert cli("search", "KeyError", "--db", personal).returncode == 0
    env["KNOWMESH_DB"] = with_password
    token, doctor = cli("token", "add", "alice"), cli("doctor")
    copied = cli("copy", "--from", personal, "--to", with_password)
    tokens = cli("token", "list")
    assert token.returncode == 0 and token.stdout.startswith("km_"), token.stderr
    assert doctor.stdout.splitlines()[0].split(None, 1)[1] == with_password.replace("s3cret", "***") + " (postgresql)"
    assert "s3cret" not in doctor.stdout + doctor.stderr + copied.stdout + copied.stderr
    assert copied.returncode == 0 and copied.stdout.startswith("copied 177 nodes, 177 revisions"), copied.stderr
    assert "alice" in tokens.stdout, "the token made before the copy is kept"
