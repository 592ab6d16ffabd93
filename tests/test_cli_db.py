"""A --db that is not a knowmesh database is refused at once, with one line, and never touched.

Every command is run as a real subprocess with a timeout: before this was fixed, a failed open
left aiosqlite's (non-daemon) worker thread running and the process never exited.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowmesh_mcp.cli import main as cli
from knowmesh_mcp.store.sqlite import connection as store_module
from knowmesh_mcp.core.errors import DatabaseUnusable, KnowmeshError
from knowmesh_mcp.store import SqliteStore

TIMEOUT = 5  # seconds: a refused database must not take longer than this, for any command


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_") and k != "XDG_DATA_HOME"}
    env.update(extra)
    return env


def run(*args: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "knowmesh_mcp.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, input="", env=env or clean_env(), timeout=timeout)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def commands(tmp_path: Path) -> dict[str, list[str]]:
    """Every command that opens the local database, with arguments that get it as far as the open."""
    documents = tmp_path / "import-me.jsonl"
    if not documents.exists():
        documents.write_text('{"id": "python/x"}\n', encoding="utf-8")
    return {
        "serve-stdio": ["serve", "--stdio"],
        "serve-http": ["serve", "--http", "--port", str(free_port())],
        "search": ["search", "ModuleNotFoundError: No module named 'requests'"],
        "read": ["read", "shell/sed-in-place-bsd-vs-gnu"],
        "import": ["import", str(documents)],
        "export": ["export"],
        "sync": ["sync", "--from", "http://127.0.0.1:9"],
    }


COMMANDS = ["serve-stdio", "serve-http", "search", "read", "import", "export", "sync"]


def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("These are my notes.\nNot a database.\n", encoding="utf-8")
    return path


def jsonl_file(tmp_path: Path) -> Path:
    path = tmp_path / "mesh.jsonl"
    path.write_text("".join(json.dumps({"id": f"python/n{i}", "title": "t"}) + "\n" for i in range(3)), encoding="utf-8")
    return path


def foreign_sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "other-app.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    connection.execute("INSERT INTO users (name) VALUES ('ada')")
    connection.commit()
    connection.close()
    return path


BAD_FILES = {
    "text": (text_file, "is not a knowmesh database (file is not a database)"),
    "jsonl": (jsonl_file, "is not a knowmesh database (file is not a database)"),
    "passwd": (lambda tmp_path: Path("/etc/passwd"), "is not a knowmesh database (file is not a database)"),
    "foreign-sqlite": (foreign_sqlite, "is not a knowmesh database (a SQLite database with no schema_migrations table"),
}


def assert_one_line_naming(result: subprocess.CompletedProcess, path: Path, expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"knowmesh-mcp: ") and str(path) in lines[0] and expected in lines[0], lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("kind", list(BAD_FILES))
@pytest.mark.parametrize("command", COMMANDS)
def test_bad_database_file_exits_2_at_once_and_is_untouched(tmp_path, command, kind):
    make, expected = BAD_FILES[kind]
    path = make(tmp_path)
    before = path.read_bytes()
    started = time.monotonic()
    result = run(*commands(tmp_path)[command], "--db", str(path))
    assert time.monotonic() - started < TIMEOUT
    assert_one_line_naming(result, path, expected)
    assert path.read_bytes() == before
    if path.parent == tmp_path:
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted({path.name, "import-me.jsonl"})  # no -wal, -shm


@pytest.mark.parametrize("command", COMMANDS)
def test_missing_folder_of_explicit_db_is_an_error(tmp_path, command):
    path = tmp_path / "no" / "such" / "dir" / "k.db"
    result = run(*commands(tmp_path)[command], "--db", str(path))
    assert_one_line_naming(result, path, f"folder {tmp_path / 'no' / 'such' / 'dir'} does not exist")
    assert not (tmp_path / "no").exists()


def test_missing_folder_of_knowmesh_db_is_an_error(tmp_path):
    path = tmp_path / "nowhere" / "k.db"
    result = run("export", env=clean_env(KNOWMESH_DB=str(path)))
    assert_one_line_naming(result, path, "does not exist")
    assert not path.parent.exists()


def test_nonexistent_root_folder_is_an_error():
    result = run("export", "--db", "/nonexistent/dir/x.db")
    assert_one_line_naming(result, Path("/nonexistent/dir/x.db"), "folder /nonexistent/dir does not exist")
    assert not Path("/nonexistent").exists()


@pytest.mark.parametrize("kind", ["folder", "device", "under-a-file"])
def test_paths_that_cannot_be_a_database_file(tmp_path, kind):
    path = {"folder": tmp_path, "device": Path("/dev/null"), "under-a-file": text_file(tmp_path) / "k.db"}[kind]
    result = run("read", "shell/sed-in-place-bsd-vs-gnu", "--db", str(path))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert str(path) in result.stderr


@pytest.mark.parametrize("make", [
    lambda c: c.execute("CREATE TABLE schema_migrations (version TEXT PRIMARY KEY)"),  # Rails
    lambda c: c.executescript("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT);"
                              "INSERT INTO schema_migrations VALUES (1, 'create_users', 'x');"),
    lambda c: c.executescript("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT);"
                              "CREATE TABLE users (id INTEGER);"),
    lambda c: c.executescript("PRAGMA journal_mode = WAL; CREATE TABLE t (x);"),
], ids=["rails-migrations", "other-migration-names", "empty-migrations-beside-other-tables", "wal-mode"])
def test_other_applications_sqlite_is_refused_and_unchanged(tmp_path, make):
    path = tmp_path / "app.db"
    connection = sqlite3.connect(path)
    make(connection)
    connection.commit()
    connection.close()
    before = path.read_bytes()
    result = run("export", "--db", str(path))
    assert_one_line_naming(result, path, "is not a knowmesh database")
    assert path.read_bytes() == before


def test_default_location_is_still_created(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    result = run("read", "shell/sed-in-place-bsd-vs-gnu", env=clean_env(HOME=str(home)), timeout=60)
    assert result.returncode == 0, result.stderr
    assert (home / ".local" / "share" / "knowmesh" / "knowmesh.db").is_file()
    xdg = run("export", env=clean_env(HOME=str(home), XDG_DATA_HOME=str(tmp_path / "x" / "y")), timeout=60)
    assert xdg.returncode == 0, xdg.stderr
    assert (tmp_path / "x" / "y" / "knowmesh" / "knowmesh.db").is_file()


@pytest.mark.parametrize("prepare", [lambda p: p.touch(), lambda p: sqlite3.connect(p).execute("VACUUM")],
                         ids=["zero-bytes", "empty-sqlite"])
def test_empty_files_become_a_new_database(tmp_path, prepare):
    path = tmp_path / "k.db"
    prepare(path)
    result = run("read", "shell/sed-in-place-bsd-vs-gnu", "--db", str(path), timeout=60)
    assert result.returncode == 0, result.stderr


def test_serve_http_still_starts_and_seeds_a_new_database(tmp_path):
    port = free_port()
    db = tmp_path / "served.db"
    server = subprocess.Popen([sys.executable, "-m", "knowmesh_mcp.cli.main", "serve", "--http", "--port", str(port),
                               "--db", str(db)], env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/nodes/shell/sed-in-place-bsd-vs-gnu", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert server.poll() is None, server.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        server.terminate()
        server.communicate(timeout=30)


# -- SqliteStore.open directly ------------------------------------------------------------------

def new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """Threads started since `before` that are still running, after giving stopped ones a moment to end."""
    deadline = time.monotonic() + 2
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.01)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(BAD_FILES))
async def test_store_open_on_a_bad_file_raises_and_leaves_no_thread(tmp_path, kind):
    make, expected = BAD_FILES[kind]
    path = make(tmp_path)
    before_bytes = path.read_bytes()
    before = set(threading.enumerate())
    with pytest.raises(DatabaseUnusable) as raised:
        await SqliteStore.open(path)
    assert str(path) in raised.value.message and expected in raised.value.message
    assert raised.value.status == 400 and raised.value.code == "database_unusable"
    assert new_threads(before) == []
    assert path.read_bytes() == before_bytes


@pytest.mark.anyio
async def test_store_open_does_not_create_folders(tmp_path):
    before = set(threading.enumerate())
    with pytest.raises(DatabaseUnusable, match="does not exist"):
        await SqliteStore.open(tmp_path / "missing" / "k.db")
    assert not (tmp_path / "missing").exists()
    assert new_threads(before) == []


@pytest.mark.anyio
async def test_store_open_reads_a_file_it_may_not_write_and_names_a_write(tmp_path, monkeypatch):
    """A file this process may not write opens for reading (tests/test_storage_faults.py does it with
    real read-only mounts); a write is 403 read_only_database, never a 500."""
    path = tmp_path / "k.db"
    store = await SqliteStore.open(path)
    await store.close()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: real_access(p, mode) and not (str(p) == str(path) and mode & os.W_OK))
    store = await SqliteStore.open(path)
    try:
        assert await store.count_nodes() == 0
        with pytest.raises(KnowmeshError) as refused:
            async with store.write() as tx:
                await tx.set_meta("x", "y")
        assert (refused.value.status, refused.value.code) == (403, "read_only_database")
    finally:
        await store.close()


@pytest.mark.anyio
@pytest.mark.parametrize("failure", ["migrate", "reader", "sqlite-in-migrate"])
async def test_store_open_never_leaks_a_connection_on_any_failure(tmp_path, monkeypatch, failure):
    """Whatever fails after the writer connection is open, every connection is closed and its thread ends."""
    real_connect = store_module._connect
    calls = []

    async def connect(path, **kwargs):
        calls.append(path)
        if failure == "reader" and len(calls) == 2:
            raise RuntimeError("reader failed")
        return await real_connect(path, **kwargs)

    async def migrate(connection):
        if failure == "migrate":
            raise RuntimeError("migration failed")
        await connection.execute("SELECT * FROM no_such_table")

    monkeypatch.setattr(store_module, "_connect", connect)
    if failure != "reader":
        monkeypatch.setattr(store_module, "_migrate", migrate)
    before = set(threading.enumerate())
    expected = DatabaseUnusable if failure == "sqlite-in-migrate" else RuntimeError
    with pytest.raises(expected):
        await SqliteStore.open(tmp_path / "k.db")
    assert new_threads(before) == []


# -- --db and --empty before or after a command's own arguments (issue 49) ----------------------

def command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every runnable command of the parser, walked through its subparsers: ("search",), ("token", "add"), ..."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        yield path, parser
    for action in actions:
        for name, subparser in action.choices.items():
            yield from command_paths(subparser, (*path, name))


PATHS = {path: parser for path, parser in command_paths(cli.build_parser())}
# What a command needs beside --db to get as far as opening the database (a command not named here
# is run with no arguments of its own; a new command that needs some fails below until given them).
ARGUMENTS: dict[tuple[str, ...], list[str]] = {
    ("serve",): ["--stdio"],
    ("search",): ["ModuleNotFoundError: No module named 'requests'"],
    ("read",): ["python/no-such-node"],
    ("import",): ["{documents}"],
    ("sync",): ["--from", "http://127.0.0.1:9"],
    ("token", "add"): ["alice", "--role", "maintainer"],
    ("token", "revoke"): ["alice"],
    ("admin", "promote"): ["python/no-such-node", "--note", "n"],
    ("admin", "draft"): ["python/no-such-node"],
    ("admin", "deprecate"): ["python/no-such-node"],
    ("admin", "merge"): ["1"],
    ("admin", "close-issue"): ["1", "--note", "fixed"],
    ("admin", "discard-issue"): ["1", "--note", "no"],
    ("admin", "audit"): ["--target", "python/x"],
}
# Commands that open no database of --db: copy names both of its databases (--from, --to).
NO_DATABASE = {("copy",)}
DATABASE_PATHS = sorted(set(PATHS) - NO_DATABASE)


def placements(path: tuple[str, ...], own: list[str], db: str) -> dict[str, list[str]]:
    """The command line of `path` with --db and --empty at each place a user may put them."""
    db_opts, head, rest = ["--db", db, "--empty"], [path[0]], list(path[1:])
    lines = {
        "after-command": [*head, *db_opts, *rest, *own],
        "at-end": [*path, *own, *db_opts],
    }
    if rest:  # a command with actions: also between the action and its arguments, and split across both levels
        lines["after-action"] = [*path, *db_opts, *own]
        lines["db-before-empty-after"] = [*head, "--db", db, *rest, *own, "--empty"]
        lines["empty-before-db-after"] = [*head, "--empty", *rest, *own, "--db", db]
    return lines


def test_the_walk_finds_every_command_and_nested_action():
    assert {("search",), ("serve",), ("copy",), ("token", "add"), ("token", "list"), ("token", "revoke"),
            ("admin", "promote"), ("admin", "merge"), ("admin", "audit")} <= set(PATHS)
    assert not any(len(path) == 1 and path[0] in {"token", "admin"} for path in PATHS)  # their actions are walked
    assert set(ARGUMENTS) <= set(PATHS), "ARGUMENTS names a command that no longer exists"


@pytest.mark.parametrize("path", DATABASE_PATHS, ids=" ".join)
def test_db_and_empty_parse_the_same_wherever_they_are_placed(path):
    own = [a.replace("{documents}", "docs.jsonl") for a in ARGUMENTS.get(path, [])]
    parsed = {}
    for where, argv in placements(path, own, "/tmp/team.db").items():
        try:
            parsed[where] = vars(cli.build_parser().parse_args(argv))
        except SystemExit:
            pytest.fail(f"{' '.join(path)}: the command line {argv} is refused ({where}); "
                        "a new command needing arguments gets them in ARGUMENTS")
        assert (parsed[where]["db"], parsed[where]["empty"]) == ("/tmp/team.db", True), (where, argv)
    first = next(iter(parsed.values()))
    assert all(namespace == first for namespace in parsed.values()), parsed


def test_nested_defaults_do_not_overwrite_an_outer_value():
    for argv in (["token", "--db", "a.db", "list"], ["admin", "--db", "a.db", "--empty", "flagged"]):
        args = cli.build_parser().parse_args(argv)
        assert args.db == "a.db", argv
    assert cli.build_parser().parse_args(["token", "--empty", "list"]).empty is True
    plain = cli.build_parser().parse_args(["token", "list"])
    assert (plain.db, plain.empty) == (None, False)


@pytest.mark.parametrize("action", [["promote", "python/x"], ["merge", "3"], ["close-issue", "1", "--note", "n"],
                                    ["flagged"], ["audit", "--target", "python/x"]])
def test_admin_options_go_before_the_action_or_after_its_arguments(action):
    """`admin promote X --json` as `admin --json promote X`: --remote, --token and --json anywhere."""
    own = ["--remote", "http://team:8000", "--token", "t0k", "--json"]
    before = vars(cli.build_parser().parse_args(["admin", *own, *action]))
    after = vars(cli.build_parser().parse_args(["admin", *action, *own]))
    assert before == after
    assert (after["remote"], after["token"], after["json"]) == ("http://team:8000", "t0k", True)
    plain = cli.build_parser().parse_args(["admin", *action])  # nested defaults undo nothing
    assert (plain.remote, plain.token, plain.json) == (None, None, False)
    outer = cli.build_parser().parse_args(["admin", "--json", "--remote", "http://team:8000", *action])
    assert (outer.remote, outer.json) == ("http://team:8000", True)


def starter_state(db: Path) -> str | None:
    connection = sqlite3.connect(db)
    try:
        row = connection.execute("SELECT value FROM meta WHERE key = 'starter_corpus'").fetchone()
    finally:
        connection.close()
    return row[0] if row else None


async def made_with_starter_pending(db: Path) -> None:
    """A new knowmesh database whose starter corpus no command has loaded or declined yet."""
    from knowmesh_mcp.services.mesh import Mesh

    service = await Mesh.open(db, seed=None)
    await service.close()


class ServedNothing:
    """Stands in for the MCP server of `serve --stdio`: the database is opened for real, nothing is served."""

    async def run_stdio_async(self) -> None:
        return None


@pytest.mark.parametrize("path", DATABASE_PATHS, ids=" ".join)
def test_db_and_empty_reach_the_database_wherever_they_are_placed(tmp_path, monkeypatch, path):
    """Each placement runs the real command (`cli.main`) on a real SQLite file made beforehand with its
    starter corpus pending: only a command that opened that file, with --empty, leaves it "declined".
    The default location (under a private HOME) is never made."""
    import knowmesh_mcp.mcp.server

    home = tmp_path / "home"
    home.mkdir()
    for name in [n for n in os.environ if n.startswith("KNOWMESH_") or n == "XDG_DATA_HOME"]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(knowmesh_mcp.mcp.server, "build_mcp_server", lambda *args, **kwargs: ServedNothing())
    documents = tmp_path / "docs.jsonl"
    documents.write_text('{"id": "python/x"}\n', encoding="utf-8")
    own = [a.replace("{documents}", str(documents)) for a in ARGUMENTS.get(path, [])]
    codes = {}
    for where, _ in placements(path, own, "").items():
        db = tmp_path / f"{where}.db"
        asyncio.run(made_with_starter_pending(db))
        assert starter_state(db) == "pending"
        codes[where] = cli.main(placements(path, own, str(db))[where])
        assert starter_state(db) == "declined", f"{' '.join(path)} ({where}): --db or --empty did not reach the database"
    assert not (home / ".local").exists(), "the default database was made"
    assert len(set(codes.values())) == 1, codes  # the same outcome wherever the options stand
