"""The command line as a new user meets it (issue 14): --version, the stdio server typed at a
terminal, Ctrl-C, --help defaults, `export | head`, import --verbose, the search table, read
--include, and progress on a terminal only. Every command runs as a real subprocess."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from knowmesh_mcp.cli.main import build_parser

QUIET = ("Traceback", "Exception ignored", "BrokenPipeError", "KeyboardInterrupt")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_") and k != "XDG_DATA_HOME"}
    return {**env, "PYTHONPATH": os.pathsep.join(sys.path), **extra}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "knowmesh_mcp.cli.main", *args]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cli(*args), capture_output=True, text=True, input="", env=env or clean_env(), timeout=120)


def write_jsonl(path: Path, documents: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    return path


def read_until(fd: int, wanted: bytes, timeout: float = 60) -> bytes:
    """What a terminal shows until `wanted` appears (or the program ends, or time runs out)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            seen += chunk
    return seen


# -- --version and --help ------------------------------------------------------------------

def test_version_is_the_installed_package_version():
    done = run("--version")
    assert done.returncode == 0 and done.stdout == f"knowmesh-mcp {version('knowmesh-mcp')}\n" and done.stderr == ""


def test_serve_help_shows_every_default():
    text = " ".join(run("serve", "--help").stdout.split())
    for shown in ("--host HOST HTTP only: the address to listen on (default: 127.0.0.1)",
                  "--port PORT HTTP only: the port to listen on (default: 8765)", "0 disables) (default: 10)",
                  "(default: off on a loopback --host, required on any other)", "(default: $KNOWMESH_URL)",
                  "(default: $KNOWMESH_DB or ~/.local/share/knowmesh/knowmesh.db)", "MCP over stdin/stdout (the default)",
                  "--tools NAME,... serve only these MCP tools", "(default: all;"):
        assert shown in text, shown


def parsers(parser: argparse.ArgumentParser, path: str = "knowmesh-mcp"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from parsers(child, f"{path} {name}")


def test_every_option_of_every_command_shows_its_default():
    """Every option that has a default (a value, or one computed from the environment) says it."""
    for path, parser in parsers(build_parser()):
        for action in parser._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            assert action.help, f"{path} {action.option_strings[0]} has no help"
            shown = parser.formatter_class(path)._get_help_string(action)
            computed = action.dest in ("db", "auth", "token") or (action.dest, path) == ("remote", "knowmesh-mcp serve")
            # SUPPRESS: an option repeated on a nested command has no default of its own (the outer one holds)
            if action.default not in (None, False, [], argparse.SUPPRESS) or computed:
                assert "default" in shown, f"{path} {action.option_strings[0]}: {shown!r}"


# -- the stdio server at a terminal, and Ctrl-C ----------------------------------------------

def interruptible() -> None:
    """Runs in the child: Ctrl-C as at a shell prompt. A suite started in the background (`cmd &`,
    nohup) hands its children SIGINT ignored, and a server rightly keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_on_a_terminal_it_says_what_it_is_and_ctrl_c_ends_it(tmp_path):
    """stdin and the controlling terminal are a pty: the hint line, then Ctrl-C typed at it."""
    master, slave = pty.openpty()

    def on_the_terminal() -> None:  # runs in the child: the pty becomes its controlling terminal
        interruptible()
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    server = subprocess.Popen(cli(), stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=clean_env(KNOWMESH_DB=str(tmp_path / "t.db")), preexec_fn=on_the_terminal)
    os.close(slave)
    try:
        hint = server.stderr.readline().decode()
        assert "MCP server on stdin/stdout" in hint and "claude mcp add" in hint and "Ctrl-C" in hint, hint
        time.sleep(1.5)  # past the imports: idle, waiting on stdin
        assert server.poll() is None, "a server waits for its client"
        os.write(master, b"\x03")  # Ctrl-C, through the terminal's line discipline
        code = server.wait(timeout=5)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        os.close(master)
    rest = server.stderr.read().decode()
    server.stderr.close()
    assert server.stdout.read() == b""
    server.stdout.close()
    assert code in (0, 130) and not any(word in rest for word in QUIET), rest


@pytest.mark.parametrize("after", ["idle", "mid-line"])
def test_sigint_ends_a_stdio_server_whose_client_keeps_stdin_open(tmp_path, after):
    server = subprocess.Popen(cli("serve", "--stdio", "--empty", "--db", str(tmp_path / "s.db")), env=clean_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              preexec_fn=interruptible)
    try:
        server.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 1, "serving"
        if after == "mid-line":
            server.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "meth')  # half a message: the reader holds it
            server.stdin.flush()
        time.sleep(0.3)
        started = time.monotonic()
        server.send_signal(signal.SIGINT)
        code = server.wait(timeout=5)  # stdin still open: before the fix this waited for the client to close it
        assert time.monotonic() - started < 3
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        server.stdin.close()
        server.stdout.close()
    errors = server.stderr.read().decode()
    server.stderr.close()
    assert code in (0, 130) and errors == "", errors  # not a terminal: no hint either


# -- pipes ------------------------------------------------------------------------------------

def test_export_into_a_pipe_closed_early_ends_quietly(tmp_path):
    db = tmp_path / "k.db"
    assert run("read", "shell/sed-in-place-bsd-vs-gnu", "--db", str(db)).returncode == 0  # a seeded mesh
    reader, writer = os.pipe()
    export = subprocess.Popen(cli("export", "--db", str(db)), stdout=writer, stderr=subprocess.PIPE, env=clean_env())
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        assert json.loads(pipe.readline())["id"]  # `head -n 1`, then the reader goes away
    code = export.wait(timeout=60)
    errors = export.stderr.read().decode()
    export.stderr.close()
    assert code in (0, 141) and not any(word in errors for word in QUIET), errors
    assert "exported" not in errors, "no claim that the export finished"


def test_a_reader_gone_before_the_first_byte_is_quiet_too(tmp_path):
    """Short output sits in stdout's buffer until exit: the flush must not fail out loud either."""
    reader, writer = os.pipe()
    os.close(reader)
    done = subprocess.run(cli("search", "ModuleNotFoundError", "--db", str(tmp_path / "k.db")), stdout=writer,
                          stderr=subprocess.PIPE, text=True, env=clean_env(), timeout=120)
    os.close(writer)
    assert done.returncode in (0, 141) and done.stderr == "", done.stderr


def test_export_piped_to_head_in_a_shell(tmp_path):
    db = tmp_path / "k.db"
    command = " ".join(cli("export", "--db", str(db)))
    done = subprocess.run(["sh", "-c", f"{command} | head -n 2"], capture_output=True, text=True, env=clean_env(), timeout=120)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 2
    assert not any(word in done.stderr for word in QUIET), done.stderr


# -- import --verbose ---------------------------------------------------------------------------

def test_import_verbose_lists_every_problem(tmp_path, make_doc):
    broken = make_doc(id="python/many-problems", title="", surprise=1)
    broken["content"]["symptom"] = " "
    broken["content"]["solutions"][0]["fix"] = "rm -rf /"
    source = write_jsonl(tmp_path / "broken.jsonl", [broken])
    db = str(tmp_path / "k.db")

    short = run("import", str(source), "--empty", "--db", db)
    assert short.returncode == 2 and "more problem(s)" in short.stderr and "--verbose lists every problem" in short.stderr

    full = run("import", str(source), "--verbose", "--empty", "--db", db)
    assert full.returncode == 2
    listed = [line.strip() for line in full.stderr.splitlines() if line.startswith("    ")]
    assert len(listed) >= 4, full.stderr
    fields = {line.split(": ")[0] for line in listed}
    assert {"/title", "/surprise", "/content/symptom", "/content/solutions/0/fix"} <= fields, listed
    assert "invalid 1" in full.stdout and "--verbose lists" not in full.stderr


# -- the search table ------------------------------------------------------------------------------

def test_search_table_columns_do_not_shift_with_long_ids(tmp_path, make_doc):
    long_id = "python/module-not-found-because-the-virtualenv-interpreter-is-not-the-one-on-path"
    documents = [make_doc(), make_doc(id=long_id, error="ModuleNotFoundError: No module named 'requestsx'")]
    documents[1]["content"]["solutions"][1]["id"] = "use-the-interpreter-of-the-virtualenv-on-linux-hosts"
    db = str(tmp_path / "k.db")
    assert run("import", str(write_jsonl(tmp_path / "d.jsonl", documents)), "--empty", "--db", db).returncode == 0
    done = run("search", "ModuleNotFoundError: No module named 'requests'", "--env", "ubuntu-24.04", "--db", db)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.split("\n\n")[0].splitlines()
    assert len(rows) == 2
    starts = [header.index(name) for name in ("MATCH", "ID", "ANSWER", "TITLE")]
    for row in rows:
        for start in starts:
            assert row[start - 2:start] == "  " and row[start] != " ", (header, row)
    assert {row[starts[1]:].split()[0] for row in rows} == {long_id, "python/module-not-found-venv"}
    assert "use-the-interpreter-of-the-virtualenv-on-linux-hosts" in done.stdout


# -- read --include --------------------------------------------------------------------------------

def test_read_include_archived_failures_as_the_article_says(tmp_path, make_doc):
    db = str(tmp_path / "k.db")
    assert run("import", str(write_jsonl(tmp_path / "d.jsonl", [make_doc()])), "--empty", "--db", db).returncode == 0
    plain = run("read", "python/module-not-found-venv", "--db", db)
    assert "include=archived_failures" in plain.stdout and "pip install requests (went to" not in plain.stdout
    shown = run("read", "python/module-not-found-venv", "--include", "archived_failures", "--db", db)
    assert shown.returncode == 0 and "pip install requests (went to the system interpreter)" in shown.stdout
    both = run("read", "python/module-not-found-venv", "--include", "archived_failures,alternatives", "--json", "--db", db)
    assert json.loads(both.stdout)["content"]["alternatives"] == ["pip install --user requests"]
    wrong = run("read", "python/module-not-found-venv", "--include", "everything", "--db", db)
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "alternatives, archived_failures" in wrong.stderr


# -- progress on a terminal only -------------------------------------------------------------------

def on_a_terminal(*args: str) -> tuple[int, str, str]:
    """(exit code, what stderr's terminal showed, stdout) of a command whose stderr is a pty."""
    master, slave = pty.openpty()
    process = subprocess.Popen(cli(*args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=clean_env())
    os.close(slave)
    shown = read_until(master, b"\x00never", timeout=120)  # to the end of the program
    os.close(master)
    out = process.stdout.read().decode()
    process.stdout.close()
    return process.wait(timeout=30), shown.decode(errors="replace"), out


def test_import_and_export_show_progress_on_a_terminal_and_nothing_when_piped(tmp_path):
    first, second = str(tmp_path / "one.db"), str(tmp_path / "two.db")
    exported = tmp_path / "mesh.jsonl"
    code, shown, _ = on_a_terminal("export", "-o", str(exported), "--db", first)
    assert code == 0 and re.search(r"\r50 documents", shown) and shown.rstrip().endswith(
        f"exported {len(exported.read_text().splitlines())} documents"), shown
    code, shown, out = on_a_terminal("import", str(exported), "--empty", "--db", second)
    assert code == 0 and "\r[" + "#" * 30 + "]" in shown and "documents" in shown and out.startswith("created "), shown

    piped_export = run("export", "-o", str(tmp_path / "again.jsonl"), "--db", first)
    assert piped_export.stderr == f"exported {len(exported.read_text().splitlines())} documents\n"
    piped_import = run("import", str(exported), "--db", str(tmp_path / "three.db"), "--empty")
    assert piped_import.stderr == "" and piped_import.stdout.startswith("created ")


def test_an_index_rebuild_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path):
    import sqlite3

    db = str(tmp_path / "old.db")
    assert run("export", "-o", str(tmp_path / "warm.jsonl"), "--db", db).returncode == 0  # a seeded mesh

    def as_if_the_search_code_changed() -> None:
        with sqlite3.connect(db) as connection:
            connection.execute("UPDATE meta SET value = '0' WHERE key = 'search_index_version'")

    as_if_the_search_code_changed()
    code, shown, out = on_a_terminal("search", "ModuleNotFoundError: No module named 'requests'", "--db", db)
    assert code == 0 and "\r[" + "#" * 30 + "]" in shown and "nodes reindexed" in shown, shown
    assert "python/" in out
    as_if_the_search_code_changed()
    piped = run("search", "ModuleNotFoundError: No module named 'requests'", "--db", db)
    assert piped.returncode == 0 and piped.stderr == ""


# -- a search whose best result is only a guess ----------------------------------------------------

WEAK_QUERY = "TypeError: Cannot read properties of undefined (reading 'map')"  # no starter node is about it
LIKELY_QUERY = "ModuleNotFoundError: No module named 'requests'"


def test_search_says_when_every_result_is_a_guess(tmp_path):
    db = str(tmp_path / "k.db")  # seeded with the starter corpus, as a fresh install is
    envelope = json.loads(run("search", WEAK_QUERY, "--json", "--db", db).stdout)
    assert envelope["results"] and envelope["results"][0]["score"] < 0.5, envelope["results"][:1]
    assert envelope["guidance"]["reason"] == "weak_match"  # --json stays the envelope as it is

    weak = run("search", WEAK_QUERY, "--db", db)
    assert weak.returncode == 0 and weak.stderr == "", weak.stderr
    first, blank, header = weak.stdout.splitlines()[:3]
    assert first == "Guesses only. " + envelope["guidance"]["message"], weak.stdout  # before the table
    assert blank == "" and header.startswith("SCORE  MATCH  ID"), weak.stdout
    assert weak.stdout.rstrip().endswith(
        "None of them is your problem? Publish it as an open problem with POST /v1/nodes (MCP tool create_node); "
        "add --json for the ready body."), weak.stdout

    likely = run("search", LIKELY_QUERY, "--db", db)
    assert likely.returncode == 0 and likely.stderr == "", likely.stderr
    assert likely.stdout.startswith("SCORE  MATCH"), likely.stdout  # a likely match: the table as it was
    assert "Guesses only" not in likely.stdout and "below 0.5" not in likely.stdout
    assert "open problem with POST" not in likely.stdout
    assert likely.stdout.rstrip().splitlines()[-1].startswith("Read one: knowmesh-mcp read python/")
