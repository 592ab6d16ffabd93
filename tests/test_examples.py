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
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from knowmesh_mcp.cli.main import build_parser
from knowmesh_mcp.mcp.server import TOOL_NAMES
from knowmesh_mcp.services.import_export import load_documents
from knowmesh_mcp.store import store_dir

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

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
    assert set(parsed.tools or ()) <= set(TOOL_NAMES), f"{args}: --tools names a tool the server lacks"
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
    assert {"README.md", "agent_loop.py", "claude-code.md", "claude-code.mcp.json", "claude-code.mcp.http.json",
            "claude_desktop_config.json", "vscode-mcp.json", "vscode-mcp.http.json", "cursor-mcp.json",
            "cursor-mcp.http.json"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_file_holds_one_entry_so_a_copy_never_lists_the_tools_twice(path):
    """stdio in <client>.json, HTTP in <client>.http.json, both named knowmesh: merging one into a
    configuration that has the other replaces it instead of adding a second set of tools."""
    (name, entry), = servers_of(path).items()
    assert name == "knowmesh"
    assert ("url" in entry) == path.name.endswith(".http.json"), path.name
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    assert f"[`{path.name}`]({path.name})" in readme, f"{path.name} is not in the README's table"


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
    await service.creation.create_node(make_doc())
    (entry,) = load("claude_desktop_config.remote.json")["mcpServers"].values()
    entry = {**entry, "args": [base_url if arg == "http://HOST:8765" else arg for arg in entry["args"]]}
    async with Client(stdio_server(entry, tmp_path)) as client:
        assert "search" in {tool.name for tool in (await client.list_tools()).tools}
        found = await client.call_tool("search", {"q": make_doc()["signature"]["error"]})
        assert found.structured_content["results"][0]["id"] == make_doc()["id"]
    assert not (tmp_path / "client.db").exists(), "the remote front opens no local store"


@pytest.mark.parametrize("name", ["claude-code.mcp.http.json", "vscode-mcp.http.json", "cursor-mcp.http.json"])
async def test_the_http_entries_reach_mcp(base_url, name):
    (url,) = [entry["url"] for entry in servers_of(EXAMPLES / name).values() if "url" in entry]
    served = urlsplit(url)._replace(netloc=urlsplit(base_url).netloc).geturl()  # same path, the test's port
    async with Client(served) as client:
        assert "search" in {tool.name for tool in (await client.list_tools()).tools}


# -- the agent loop -------------------------------------------------------------------------
#
# The loop runs the verify command twice: before the fix (the baseline, which must fail) and after
# the user says the fix is applied. Only the second run is reported; a node's verify command here
# is `test -f <marker>`, and "applying the fix" is creating the marker while the script waits.

async def loop(base_url: str, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    """agent_loop.py as a subprocess, without blocking the event loop that serves base_url. A new
    session has no controlling terminal, so nothing can wait on a question; `input` is its stdin
    (all of it, written at once: too early to apply a fix between the two verify runs), else /dev/null."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_")}
    with anyio.fail_after(60):
        result = await anyio.run_process([sys.executable, str(AGENT_LOOP), "--url", base_url, *args], check=False,
                                         input=input or None, stdin=None if input else subprocess.DEVNULL,
                                         start_new_session=True, env=env)
    result.stdout, result.stderr = result.stdout.decode(), result.stderr.decode()
    return result


Answer = Callable[[str], bytes]


def yes(output: str) -> bytes:
    return b"y"


def no(output: str) -> bytes:
    return b"n"


def converse(command: list[str], *answers: Answer, terminal: bool) -> tuple[int, str]:
    """Run `command` with a pseudo-terminal (terminal=True) or pipes as stdin and stdout. Each time it
    asks a [y/N] question, call the next answer with the output so far (it may act first, e.g. apply
    the fix) and type what it returns, with a newline; an empty line (no) once they run out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_")}
    if terminal:
        import pty

        master, slave = pty.openpty()
        try:
            process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        finally:
            os.close(slave)
        read_from = write_to = master
    else:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=env, start_new_session=True)
        assert process.stdin and process.stdout
        read_from, write_to = process.stdout.fileno(), process.stdin.fileno()
    output, asked = b"", 0
    try:
        while select.select([read_from], [], [], 30)[0]:
            try:
                chunk = os.read(read_from, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            while output.count(b"[y/N]") > asked:
                typed = answers[asked](output.decode()) if asked < len(answers) else b""
                asked += 1
                os.write(write_to, typed + b"\n")
        return process.wait(timeout=30), output.decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if terminal:
            os.close(master)
        else:
            for pipe in (process.stdin, process.stdout):
                try:
                    pipe.close()
                except OSError:  # the child is gone: a broken pipe on the last flush
                    pass


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


def fixable(make_doc, tmp_path: Path, node_id: str) -> tuple[dict[str, Any], Path]:
    """A node whose verify command fails until its fix step (creating a marker file) is applied."""
    marker = tmp_path / f"{node_id.replace('/', '-')}-fixed"
    return node_with_verify(make_doc, node_id, "KnowmeshLoopError: the widget frobnicator stalled",
                            f"test -f {shlex.quote(str(marker))}", marker), marker


async def feedback_rows(service, node_id: str) -> list[dict[str, Any]]:
    names = ("outcome", "agent_id", "node_version", "solution_revision", "cluster", "exit_code", "reason")
    rows = (await service.outcomes.list_feedback(node_id))["feedback"]
    return [{name: row[name] for name in names} for row in rows]


async def test_agent_loop_reports_solved_only_once_the_applied_fix_makes_verify_pass(service, base_url, make_doc, tmp_path):
    document, marker = fixable(make_doc, tmp_path, "python/loop-fixed")
    created = await service.creation.create_node(document)
    command = [sys.executable, str(AGENT_LOOP), "--url", base_url, "--env", "linux,python-3.12", "--yes",
               "--applied-on-stdin", "--agent-id", "a1", document["signature"]["error"]]
    at_the_question: dict[str, Any] = {}

    def apply_fix(output: str) -> bytes:  # in the converse thread, while the script waits on stdin
        at_the_question.update(output=output, marker=marker.exists(),
                               reports=anyio.from_thread.run(feedback_rows, service, document["id"]))
        marker.touch()
        return b"y"

    status, output = await anyio.to_thread.run_sync(lambda: converse(command, apply_fix, terminal=False))
    assert status == 0, output
    assert at_the_question["marker"] is False, "fix steps are shown, never run"
    assert at_the_question["reports"] == [], "nothing is reported before the fix is applied"
    before = at_the_question["output"]
    assert f"1. touch {marker}" in before and f"$ test -f {marker}" in before
    assert "Baseline: exit code 1, the problem is present" in before and before.rstrip().endswith("[y/N]")
    after = output[len(before):]
    assert f"$ test -f {marker}" in after and "exit code 0 (baseline 1): solved" in after and "Reported solved" in after
    assert await feedback_rows(service, document["id"]) == [{
        "outcome": "solved", "agent_id": "a1", "node_version": created["version"], "solution_revision": 1,
        "cluster": "linux|python-3|", "exit_code": 0, "reason": None,
    }]
    read = (await service.nodes.read_node(document["id"], service.nodes.read_request(env="linux,python-3.12"))).body
    assert read["stats"]["sample_size"] == 1


async def test_agent_loop_reports_failed_when_verify_still_fails_after_the_fix(service, base_url, make_doc, tmp_path):
    document, marker = fixable(make_doc, tmp_path, "python/loop-not-fixed")
    await service.creation.create_node(document)

    failed = await loop(base_url, "--env", "linux,python-3.12", "--yes", "--applied-on-stdin", "--agent-id", "a1",
                        document["signature"]["error"], input=b"y\n")  # "applied", but the marker never appears
    assert failed.returncode == 0, failed.stderr
    assert not marker.exists() and failed.stdout.count(f"$ test -f {marker}") == 2
    assert "exit code 1 (baseline 1): failed" in failed.stdout and "Reported failed" in failed.stdout
    (row,) = await feedback_rows(service, document["id"])
    assert (row["outcome"], row["agent_id"], row["exit_code"]) == ("failed", "a1", 1)
    assert "still exited with 1" in row["reason"] and "before the fix (baseline) it exited with 1" in row["reason"]


async def test_agent_loop_reports_nothing_when_the_baseline_already_passes(service, base_url, make_doc):
    document = node_with_verify(make_doc, "python/loop-passes", "KnowmeshLoopError: the widget frobnicator stalled", "exit 0")
    await service.creation.create_node(document)

    for extra in (["--applied-on-stdin"], []):
        passed = await loop(base_url, "--env", "linux,python-3.12", "--yes", *extra, "--agent-id", "a1",
                            document["signature"]["error"], input=b"y\n")
        assert passed.returncode == 0, passed.stderr
        assert passed.stdout.count("$ exit 0") == 1 and "Fix applied?" not in passed.stdout
        assert "already passes before any fix (exit code 0): the problem is not present on this machine" in passed.stdout
        assert "nothing reported" in passed.stdout and "Reported" not in passed.stdout
    assert await feedback_rows(service, document["id"]) == []


async def test_agent_loop_reports_nothing_when_the_fix_is_not_confirmed(service, base_url, make_doc, tmp_path):
    document, marker = fixable(make_doc, tmp_path, "python/loop-declined")
    await service.creation.create_node(document)
    error = document["signature"]["error"]

    for extra, stdin, said in ((["--applied-on-stdin"], b"n\n", "Fix not confirmed"),
                               (["--applied-on-stdin"], b"", "Fix not confirmed"),  # the end of input
                               ([], b"y\n", "No terminal to confirm the fix on")):  # stdin is not asked without the flag
        declined = await loop(base_url, "--env", "linux,python-3.12", "--yes", *extra, "--agent-id", "a1", error, input=stdin)
        assert declined.returncode == 0, declined.stderr
        assert declined.stdout.count(f"$ test -f {marker}") == 1, "the baseline only"
        assert said in declined.stdout and "nothing reported" in declined.stdout and "Reported" not in declined.stdout
    assert await feedback_rows(service, document["id"]) == []


async def test_agent_loop_sends_nothing_without_consent_or_in_a_dry_run(service, base_url, make_doc, tmp_path):
    document, marker = fixable(make_doc, tmp_path, "python/loop-dry")
    await service.creation.create_node(document)
    error = document["signature"]["error"]
    command = [sys.executable, str(AGENT_LOOP), "--url", base_url, "--env", "linux,python-3.12", "--yes", "--dry-run",
               "--applied-on-stdin", "--agent-id", "a1", error]

    def apply_fix(output: str) -> bytes:
        marker.touch()
        return b"y"

    status, output = await anyio.to_thread.run_sync(lambda: converse(command, apply_fix, terminal=False))
    assert status == 0, output
    assert "Dry run" in output and '"outcome": "solved"' in output and "baseline" in output
    marker.unlink()
    unasked = await loop(base_url, "--env", "linux,python-3.12", "--agent-id", "a1", error)  # no --yes, no terminal
    assert unasked.returncode == 0, unasked.stderr
    assert "$ test -f" not in unasked.stdout and "nothing reported" in unasked.stdout
    assert await feedback_rows(service, document["id"]) == []


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
async def test_agent_loop_asks_at_the_terminal_before_verify_and_after_the_fix(service, base_url, make_doc, tmp_path):
    document, marker = fixable(make_doc, tmp_path, "python/loop-asks")
    await service.creation.create_node(document)
    command = [sys.executable, str(AGENT_LOOP), "--url", base_url, "--env", "linux,python-3.12", "--agent-id", "a1",
               document["signature"]["error"]]

    def at_terminal(*answers: Answer) -> tuple[int, str]:
        return converse(command, *answers, terminal=True)

    status, output = await anyio.to_thread.run_sync(at_terminal, no)  # declines to run verify
    assert status == 0 and "[y/N] n" in output and "$ test -f" not in output and "nothing reported" in output
    status, output = await anyio.to_thread.run_sync(at_terminal, yes, no)  # runs the baseline, declines the fix
    assert status == 0 and output.count("$ test -f") == 1 and "Fix not confirmed" in output, output
    assert await feedback_rows(service, document["id"]) == []

    def apply_fix(output: str) -> bytes:
        marker.touch()
        return b"y"

    status, output = await anyio.to_thread.run_sync(at_terminal, yes, apply_fix)
    assert status == 0 and output.count("$ test -f") == 2 and "Reported solved" in output, output
    assert [row["outcome"] for row in await feedback_rows(service, document["id"])] == ["solved"]


async def test_agent_loop_guides_when_nothing_matches_and_fails_on_http_errors(service, base_url, make_doc):
    nothing = await loop(base_url, "--env", "linux", "zqxj vorpal snicker-snack frumious")
    assert nothing.returncode == 0, nothing.stderr
    assert "POST /v1/nodes" in nothing.stdout and '"solutions": []' in nothing.stdout

    document = node_with_verify(make_doc, "python/loop-anonymous", "GizmoSprocketTimeout: no answer from the sprocket", "exit 3")
    await service.creation.create_node(document)
    anonymous = await loop(base_url, "--env", "linux", "--yes", "--applied-on-stdin", document["signature"]["error"],
                           input=b"y\n")  # failed needs agent.id
    assert anonymous.returncode == 1
    assert "HTTP 400 invalid_feedback" in anonymous.stderr and "agent.id" in anonymous.stderr
    unreachable = await loop("http://127.0.0.1:9", "anything")
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr
    both_on_stdin = await loop(base_url, "--applied-on-stdin", "-", input=b"an error")
    assert both_on_stdin.returncode == 2 and "give the error text as an argument" in both_on_stdin.stderr


# -- guesses (score below 0.5) and verify commands that cannot run here ------------------------
#
# A result scoring below 0.5 is a guess: the loop shows it as one and never runs or reports
# anything for it unless someone types y at a terminal (--yes does not). A verify command that
# exits 126 or 127 could not run on this machine: it says nothing about the problem or the fix.

GUESSED_ERROR = "KeyError: 'user_id'"  # nothing in these meshes is about it: every result is a guess


async def searched(http, query: str, env: str) -> dict[str, Any]:
    response = await http.get("/v1/search", params={"q": query, "env": env})
    assert response.status_code == 200, response.text
    return response.json()


async def feedback_of(http, node_id: str) -> list[dict[str, Any]]:
    """The node's reports, as GET /v1/nodes/{id}/feedback lists them."""
    response = await http.get(f"/v1/nodes/{node_id}/feedback")
    assert response.status_code == 200, response.text
    return response.json()["feedback"]


def ran_a_command(output: str) -> bool:
    """Whether the loop ran a verify command: it prints each one as a "$ command" line first."""
    return any(line.startswith("$ ") for line in output.splitlines())


async def test_agent_loop_shows_a_weak_starter_result_as_a_guess_and_runs_and_reports_nothing_under_yes(service, base_url, http):
    """The reproduction of issue 48: a Python KeyError against the starter corpus, whose best result
    is about something else. Under --yes (and a harness's "y" on stdin) it was offered as "Top match",
    its verify command ran, and its exit code was read as "the problem is present"."""
    await service.documents.import_documents(load_documents([store_dir() / "starter"]), summary="Starter corpus")
    env = "ubuntu-24.04,python-3.12,pip"
    found = await searched(http, GUESSED_ERROR, env)
    assert found["results"], "the starter corpus returns hints for this error"
    top = found["results"][0]
    assert top["score"] < 0.5 and found["guidance"]["reason"] == "weak_match", found  # the premise of this test

    guessed = await loop(base_url, "--env", env, "--yes", "--applied-on-stdin", "--agent-id", "a1", GUESSED_ERROR,
                         input=b"y\n")
    assert guessed.returncode == 0, guessed.stderr
    out = guessed.stdout
    assert "Top match" not in out, out
    assert "It is a guess, not the answer" in out and f"Guess: {top['id']} ({top['match']}, score {top['score']})" in out
    assert found["guidance"]["message"] in out, "the server's guidance is shown"
    assert "No terminal to ask on: a guess is used only after an explicit y there (--yes does not accept it)" in out
    assert not ran_a_command(out) and "Baseline" not in out and "Fix applied?" not in out, out
    assert "Guess not used: nothing run, nothing reported" in out and "Reported" not in out
    assert "POST /v1/nodes" in out and '"id": "python/keyerror-user-id"' in out, "how to publish it instead"
    for result in found["results"]:
        assert await feedback_of(http, result["id"]) == []


def guessed_node(make_doc, tmp_path: Path) -> tuple[dict[str, Any], Path, Path]:
    """A node that is only a guess for GUESSED_ERROR; its verify command leaves a trace (`ran`) when
    it runs, and passes once its fix step has created `fixed`."""
    ran, fixed = tmp_path / "verify-ran", tmp_path / "fixed"
    document = node_with_verify(make_doc, "python/loop-guess", "KnowmeshLoopError: the widget frobnicator stalled",
                                f"touch {shlex.quote(str(ran))}; test -f {shlex.quote(str(fixed))}", fixed)
    return document, ran, fixed


async def test_agent_loop_runs_and_reports_a_guess_only_after_an_explicit_y_at_the_terminal(service, base_url, http,
                                                                                           make_doc, tmp_path):
    document, ran, fixed = guessed_node(make_doc, tmp_path)
    await service.creation.create_node(document)
    env = "linux,python-3.12"
    (top,) = (await searched(http, GUESSED_ERROR, env))["results"]
    assert top["id"] == document["id"] and top["score"] < 0.5, top  # the premise: a guess

    # --yes without a terminal (a harness answering every question on stdin): nothing runs
    for extra in (["--applied-on-stdin"], []):
        unattended = await loop(base_url, "--env", env, "--yes", *extra, "--agent-id", "a1", GUESSED_ERROR, input=b"y\ny\n")
        assert unattended.returncode == 0, unattended.stderr
        assert "It is a guess" in unattended.stdout and "Top match" not in unattended.stdout
        assert not ran_a_command(unattended.stdout) and "Guess not used: nothing run, nothing reported" in unattended.stdout
    assert not ran.exists(), "the guess's verify command never ran"

    command = [sys.executable, str(AGENT_LOOP), "--url", base_url, "--env", env, "--yes", "--agent-id", "a1", GUESSED_ERROR]

    def at_terminal(*answers: Answer) -> tuple[int, str]:
        return converse(command, *answers, terminal=True)

    # --yes at a terminal: the guess question is still asked, and "n" (or just Enter) stops everything
    for answer in (no, lambda output: b""):
        status, output = await anyio.to_thread.run_sync(at_terminal, answer)
        assert status == 0, output
        assert "This is a guess (score" in output and "(--yes does not answer this) [y/N]" in output, output
        assert "Guess not used: nothing run, nothing reported" in output and not ran_a_command(output), output
    assert not ran.exists() and await feedback_of(http, document["id"]) == []

    # an explicit y accepts it: from there it is the ordinary loop (--yes answers the verify question), and reported
    def apply_fix(output: str) -> bytes:
        fixed.touch()
        return b"y"

    status, output = await anyio.to_thread.run_sync(at_terminal, yes, apply_fix)
    assert status == 0 and output.count("[y/N]") == 2, output
    assert ran.exists() and output.count("$ touch") == 2 and "exit code 0 (baseline 1): solved" in output, output
    (row,) = await feedback_of(http, document["id"])
    assert row["outcome"] == "solved"
    assert f"the search scored this node {top['score']} (below 0.5: a guess), used after an explicit y" in row["note"]


@pytest.mark.parametrize("exit_code", [126, 127])
async def test_agent_loop_stops_and_reports_nothing_when_the_baseline_cannot_run(service, base_url, http, make_doc,
                                                                                tmp_path, exit_code):
    """127: the shell found no such command; 126: it found a file it cannot execute. Neither means
    "the problem is present", so neither may lead to a report (failed, solved or env_mismatch)."""
    if exit_code == 127:
        command = "knowmesh-no-such-program --check"
    else:
        script = tmp_path / "check.sh"
        script.write_text("#!/bin/sh\nexit 0\n")
        script.chmod(0o644)  # not executable
        command = shlex.quote(str(script))
    document = node_with_verify(make_doc, f"python/loop-cannot-run-{exit_code}", "GizmoSprocketTimeout: no answer "
                                "from the sprocket", command)
    created = await http.post("/v1/nodes", json=document)
    assert created.status_code == 201, created.text
    (top, *_) = (await searched(http, document["signature"]["error"], "linux,python-3.12"))["results"]
    assert top["id"] == document["id"] and top["score"] >= 0.5, top  # the premise: a likely match

    stopped = await loop(base_url, "--env", "linux,python-3.12", "--yes", "--applied-on-stdin", "--agent-id", "a1",
                         document["signature"]["error"], input=b"y\n")
    assert stopped.returncode == 0, stopped.stderr
    out = stopped.stdout
    assert "Top match: " + document["id"] in out and "guess" not in out
    assert out.count("$ ") == 1 and f"Baseline: exit code {exit_code} (" in out, out
    assert "the verify command cannot run here" in out and "nothing reported" in out, out
    assert f"exit code {exit_code}, the problem is present" not in out and "Fix applied?" not in out and "Reported" not in out, out
    assert await feedback_of(http, document["id"]) == []


async def test_agent_loop_reports_nothing_when_verify_cannot_run_after_the_fix(service, base_url, http, make_doc, tmp_path):
    """The baseline fails as it should (exit 1), but after the fix the command is not found (127):
    that is not a failed fix, nor an env_mismatch."""
    marker = tmp_path / "fixed"
    command = f"if test -f {shlex.quote(str(marker))}; then knowmesh-no-such-program; else exit 1; fi"
    document = node_with_verify(make_doc, "python/loop-gone-after-fix", "GizmoSprocketTimeout: no answer from the "
                                "sprocket", command, marker)
    created = await http.post("/v1/nodes", json=document)
    assert created.status_code == 201, created.text
    cmd = [sys.executable, str(AGENT_LOOP), "--url", base_url, "--env", "linux,python-3.12", "--yes",
           "--applied-on-stdin", "--agent-id", "a1", document["signature"]["error"]]

    def apply_fix(output: str) -> bytes:
        marker.touch()
        return b"y"

    status, output = await anyio.to_thread.run_sync(lambda: converse(cmd, apply_fix, terminal=False))
    assert status == 0, output
    assert output.count("$ if test -f") == 2 and "Baseline: exit code 1, the problem is present" in output, output
    assert "exit code 127 (command not found; baseline 1): the verify command cannot run here after the fix" in output
    assert "Nothing reported: not failed, and not env_mismatch either" in output, output
    assert "Reported" not in output and ": failed" not in output
    assert await feedback_of(http, document["id"]) == []
