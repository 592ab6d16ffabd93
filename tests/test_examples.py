"""The files in examples/: every client configuration parses and starts a real server the way the
client would, and examples/agent_loop.py runs the whole loop against a real HTTP server."""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from knowmesh_mcp.cli import build_parser

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CONFIGS = sorted(EXAMPLES.glob("*.json"))
AGENT_LOOP = EXAMPLES / "agent_loop.py"
KNOWN_ENV = {"KNOWMESH_AGENT_ID", "KNOWMESH_DB", "KNOWMESH_EMPTY", "KNOWMESH_URL"}


def load(name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES / name).read_text(encoding="utf-8"))


def servers_of(path: Path) -> dict[str, dict[str, Any]]:
    """The server entries of one configuration: VS Code uses "servers", the others "mcpServers"."""
    data = json.loads(path.read_text(encoding="utf-8"))
    key = "servers" if path.name.startswith("vscode") else "mcpServers"
    assert set(data) == {key}, f"{path.name}: expected only {key!r}"
    assert data[key], f"{path.name}: no servers"
    return data[key]


def parse_serve(args: list[str]):
    """The server's own command line, through the real CLI parser."""
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit:
        pytest.fail(f"knowmesh-mcp rejects {args}")
    assert parsed.command == "serve" and not parsed.http, args
    return parsed


def shell_lines(markdown: str, program: str) -> list[list[str]]:
    """The commands that start with `program` in the fenced shell blocks of a Markdown text."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", markdown, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith(program + " "):
                commands.append(shlex.split(line, comments=True))
    return commands


# -- the configuration files ----------------------------------------------------------------

def test_every_client_has_its_files():
    names = {path.name for path in EXAMPLES.iterdir()}
    assert {"README.md", "agent_loop.py", "claude-code.md", "claude-code.mcp.json", "claude_desktop_config.json",
            "vscode-mcp.json", "cursor-mcp.json"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_server_entry_is_a_valid_stdio_or_http_server(path):
    for name, entry in servers_of(path).items():
        if "command" in entry:
            assert "url" not in entry, name
            assert entry["command"] == "knowmesh-mcp", name
            parsed = parse_serve(entry["args"])
            assert parsed.stdio, f"{path.name}:{name} must name --stdio explicitly"
            assert set(entry.get("env", {})) <= KNOWN_ENV, name
            if path.name.startswith("vscode") or path.name.startswith("claude-code"):
                assert entry["type"] == "stdio", name
        else:
            assert set(entry) <= {"type", "url"}, name
            assert urlsplit(entry["url"]).scheme == "http" and entry["url"].endswith("/mcp"), name
            if not path.name.startswith("cursor"):
                assert entry["type"] == "http", f"{path.name}:{name}"
    if path.name.startswith("claude_desktop"):
        assert all("command" in entry for entry in servers_of(path).values()), "Claude Desktop launches stdio only"


def test_the_remote_desktop_config_fronts_a_remote_mesh():
    (entry,) = load("claude_desktop_config.remote.json")["mcpServers"].values()
    assert parse_serve(entry["args"]).remote == "http://HOST:8765"


def test_claude_mcp_add_commands_are_well_formed():
    commands = shell_lines((EXAMPLES / "claude-code.md").read_text(encoding="utf-8"), "claude")
    commands += shell_lines((EXAMPLES / "README.md").read_text(encoding="utf-8"), "claude")
    adds = [tokens for tokens in commands if tokens[:3] == ["claude", "mcp", "add"]]
    assert len(adds) >= 6
    kinds = set()
    for tokens in adds:
        rest = tokens[3:]
        head, server = (rest[: rest.index("--")], rest[rest.index("--") + 1:]) if "--" in rest else (rest, [])
        options: dict[str, list[str]] = {}
        positionals: list[str] = []
        option = None
        for word in head:  # as claude's parser reads it: --env takes every value up to the next option
            if word.startswith("-"):
                option = {"-t": "--transport", "-s": "--scope", "-e": "--env", "-H": "--header"}.get(word, word)
                assert option in {"--transport", "--scope", "--env", "--header"}, word
                options.setdefault(option, [])
            elif option is not None:
                options[option].append(word)
                option = option if option == "--env" else None
            else:
                positionals.append(word)
        assert all(re.fullmatch(r"[A-Z_]+=\S+", e) for e in options.get("--env", [])), f"-e ate an argument: {tokens}"
        assert set(options.get("--scope", [])) <= {"local", "project", "user"}, tokens
        assert {e.partition("=")[0] for e in options.get("--env", [])} <= KNOWN_ENV, tokens
        if server:
            assert positionals[0].startswith("knowmesh") and len(positionals) == 1, tokens
            assert options.get("--transport", ["stdio"]) == ["stdio"], tokens
            assert server[0] == "knowmesh-mcp", tokens
            parse_serve(server[1:])
            kinds.add("stdio")
        else:
            assert options["--transport"] == ["http"], tokens
            _name, url = positionals
            assert url == "http://127.0.0.1:8765/mcp", tokens
            kinds.add("http")
        kinds.update(options.get("--scope", []))
    assert kinds >= {"stdio", "http", "project", "user"}


def test_vscode_add_mcp_line_matches_the_file():
    (command,) = shell_lines((EXAMPLES / "README.md").read_text(encoding="utf-8"), "code")
    added = json.loads(command[command.index("--add-mcp") + 1])
    name = added.pop("name")
    assert servers_of(EXAMPLES / "vscode-mcp.json")[name] == added


# -- the servers those files start ----------------------------------------------------------

def stdio_server(entry: dict[str, Any], tmp_path: Path, **env: str) -> StdioServerParameters:
    """The entry's command and args, as the client runs them, on a store inside tmp_path."""
    command = shutil.which(entry["command"])
    if command is None:
        pytest.skip(f"{entry['command']} is not installed on PATH")
    return StdioServerParameters(command=command, args=entry["args"], env={
        "KNOWMESH_DB": str(tmp_path / "client.db"), "KNOWMESH_EMPTY": "1", "KNOWMESH_AGENT_ID": "example-client",
        "PYTHONPATH": os.pathsep.join(sys.path), **entry.get("env", {}), **env,
    })


async def test_the_vscode_stdio_entry_starts_a_working_server(tmp_path):
    entry = servers_of(EXAMPLES / "vscode-mcp.json")["knowmesh"]
    async with Client(stdio_server(entry, tmp_path)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"search", "read_article", "report_outcome", "create_node"} <= names
        found = await client.call_tool("search", {"q": "ModuleNotFoundError: No module named 'requests'"})
        assert not found.is_error and found.structured_content["results"] == []  # KNOWMESH_EMPTY: no starter corpus
    assert (tmp_path / "client.db").exists()


async def test_the_remote_desktop_entry_reaches_the_mesh(service, base_url, make_doc, tmp_path):
    await service.create_node(make_doc())
    (entry,) = load("claude_desktop_config.remote.json")["mcpServers"].values()
    entry = {**entry, "args": [base_url if arg == "http://HOST:8765" else arg for arg in entry["args"]]}
    async with Client(stdio_server(entry, tmp_path)) as client:
        assert "search" in {tool.name for tool in (await client.list_tools()).tools}
        found = await client.call_tool("search", {"q": make_doc()["signature"]["error"]})
        assert found.structured_content["results"][0]["id"] == make_doc()["id"]
    assert not (tmp_path / "client.db").exists(), "the remote front opens no local store"


@pytest.mark.parametrize("name", ["claude-code.mcp.json", "vscode-mcp.json", "cursor-mcp.json"])
async def test_the_http_entries_reach_mcp(base_url, name):
    (url,) = [entry["url"] for entry in servers_of(EXAMPLES / name).values() if "url" in entry]
    served = urlsplit(url)._replace(netloc=urlsplit(base_url).netloc).geturl()  # same path, the test's port
    async with Client(served) as client:
        assert "search" in {tool.name for tool in (await client.list_tools()).tools}


# -- the agent loop -------------------------------------------------------------------------

async def loop(base_url: str, *args: str) -> subprocess.CompletedProcess:
    """agent_loop.py as a subprocess, without blocking the event loop that serves base_url. A new
    session has no controlling terminal, so nothing can wait on a question."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_")}
    with anyio.fail_after(60):
        result = await anyio.run_process([sys.executable, str(AGENT_LOOP), "--url", base_url, *args], check=False,
                                         stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    result.stdout, result.stderr = result.stdout.decode(), result.stderr.decode()
    return result


def at_terminal(command: list[str], answer: bytes) -> tuple[int, str]:
    """Run `command` with a pseudo-terminal as stdin and stdout; type `answer` when it asks [y/N]."""
    import pty

    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_")}
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    finally:
        os.close(slave)
    output, answered = b"", False
    try:
        while select.select([master], [], [], 30)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            if not answered and b"[y/N]" in output:
                os.write(master, answer + b"\n")
                answered = True
        return process.wait(timeout=30), output.decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)


def node_with_verify(make_doc, node_id: str, error: str, command: str, marker: Path | None = None) -> dict[str, Any]:
    """A node whose one answer has the given verify command; its fix step would create `marker`."""
    document = make_doc(id=node_id, error=error)
    document["signature"]["aliases"] = []
    document["content"]["solutions"] = [{
        "id": "check", "title": "A harmless check", "env": [],
        "fix": [f"touch {shlex.quote(str(marker))}" if marker else "echo fixed"],
        "verify": {"command": command, "expected": "exit 0"},
    }]
    return document


async def feedback_rows(service, node_id: str) -> list[dict[str, Any]]:
    async with service.store.write() as tx, tx.connection.execute(
        "SELECT outcome, agent_id, node_version, solution_revision, cluster, exit_code, reason FROM feedback "
        "WHERE node_id = ? ORDER BY id", (node_id,)
    ) as cursor:
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row)) for row in await cursor.fetchall()]


async def test_agent_loop_reports_solved_and_failed(service, base_url, make_doc, tmp_path):
    marker = tmp_path / "fix-step-ran"
    passing = node_with_verify(make_doc, "python/loop-passes", "KnowmeshLoopError: the widget frobnicator stalled", "exit 0",
                               marker)
    failing = node_with_verify(make_doc, "python/loop-fails", "GizmoSprocketTimeout: no answer from the sprocket", "exit 3")
    created = await service.create_node(passing)
    await service.create_node(failing)

    solved = await loop(base_url, "--env", "linux,python-3.12", "--yes", "--agent-id", "a1", passing["signature"]["error"])
    assert solved.returncode == 0, solved.stderr
    assert f"1. touch {marker}" in solved.stdout and not marker.exists(), "fix steps are shown, never run"
    assert "$ exit 0" in solved.stdout and "Reported solved" in solved.stdout
    assert await feedback_rows(service, passing["id"]) == [{
        "outcome": "solved", "agent_id": "a1", "node_version": created["version"], "solution_revision": 1,
        "cluster": "linux|python-3|", "exit_code": 0, "reason": None,
    }]
    read = (await service.read_node(passing["id"], service.read_request(env="linux,python-3.12"))).body
    assert read["stats"]["sample_size"] == 1

    failed = await loop(base_url, "--env", "linux,python-3.12", "--yes", "--agent-id", "a1", failing["signature"]["error"])
    assert failed.returncode == 0, failed.stderr
    assert "exit code 3: failed" in failed.stdout and "Reported failed" in failed.stdout
    (row,) = await feedback_rows(service, failing["id"])
    assert (row["outcome"], row["agent_id"], row["exit_code"]) == ("failed", "a1", 3)
    assert "exited with 3" in row["reason"]


async def test_agent_loop_sends_nothing_without_consent_or_in_a_dry_run(service, base_url, make_doc):
    document = node_with_verify(make_doc, "python/loop-dry", "KnowmeshLoopError: the widget frobnicator stalled", "exit 0")
    await service.create_node(document)
    error = document["signature"]["error"]

    dry = await loop(base_url, "--env", "linux,python-3.12", "--yes", "--dry-run", "--agent-id", "a1", error)
    assert dry.returncode == 0, dry.stderr
    assert "Dry run" in dry.stdout and '"outcome": "solved"' in dry.stdout
    unasked = await loop(base_url, "--env", "linux,python-3.12", "--agent-id", "a1", error)  # no --yes, no terminal
    assert unasked.returncode == 0, unasked.stderr
    assert "$ exit 0" not in unasked.stdout and "nothing reported" in unasked.stdout
    assert await feedback_rows(service, document["id"]) == []


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
async def test_agent_loop_runs_verify_only_after_a_y_at_the_terminal(service, base_url, make_doc):
    document = node_with_verify(make_doc, "python/loop-asks", "KnowmeshLoopError: the widget frobnicator stalled", "exit 0")
    await service.create_node(document)
    command = [sys.executable, str(AGENT_LOOP), "--url", base_url, "--env", "linux,python-3.12", "--agent-id", "a1",
               document["signature"]["error"]]

    status, output = await anyio.to_thread.run_sync(at_terminal, command, b"n")
    assert status == 0 and "[y/N] n" in output and "$ exit 0" not in output and "nothing reported" in output
    assert await feedback_rows(service, document["id"]) == []
    status, output = await anyio.to_thread.run_sync(at_terminal, command, b"y")
    assert status == 0 and "$ exit 0" in output and "Reported solved" in output, output
    assert [row["outcome"] for row in await feedback_rows(service, document["id"])] == ["solved"]


async def test_agent_loop_guides_when_nothing_matches_and_fails_on_http_errors(service, base_url, make_doc):
    nothing = await loop(base_url, "--env", "linux", "zqxj vorpal snicker-snack frumious")
    assert nothing.returncode == 0, nothing.stderr
    assert "POST /v1/nodes" in nothing.stdout and '"solutions": []' in nothing.stdout

    document = node_with_verify(make_doc, "python/loop-anonymous", "GizmoSprocketTimeout: no answer from the sprocket", "exit 3")
    await service.create_node(document)
    anonymous = await loop(base_url, "--env", "linux", "--yes", document["signature"]["error"])  # failed needs agent.id
    assert anonymous.returncode == 1
    assert "HTTP 400 invalid_feedback" in anonymous.stderr and "agent.id" in anonymous.stderr
    unreachable = await loop("http://127.0.0.1:9", "anything")
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr
