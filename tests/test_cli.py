"""The `knowmesh-mcp` command, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, db: Path | None = None, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_")}
    full_env.update(env or {})
    command = [sys.executable, "-m", "knowmesh_mcp.cli.main", *args]
    if db is not None:
        command += ["--db", str(db)]
    return subprocess.run(command, capture_output=True, text=True, env=full_env, input=stdin, timeout=120)


def write_jsonl(path: Path, documents: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    return path


def test_read_prints_markdown_and_json(tmp_path):
    db = tmp_path / "k.db"
    markdown = run("read", "shell/sed-in-place-bsd-vs-gnu", "--env", "macos-15", db=db)
    assert markdown.returncode == 0, markdown.stderr
    assert markdown.stdout.startswith("---\nid: \"shell/sed-in-place-bsd-vs-gnu\"")
    as_json = json.loads(run("read", "shell/sed-in-place-bsd-vs-gnu", "--env", "ubuntu-24.04", "--json", db=db).stdout)
    assert len(as_json["content"]["solutions"]) == 1
    assert "linux" in as_json["content"]["solutions"][0]["env"]


def test_read_errors_exit_2_with_one_line(tmp_path):
    missing = run("read", "python/does-not-exist", db=tmp_path / "k.db")
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0 and "node_not_found" in missing.stderr
    bad = run("read", "Bad//Id", db=tmp_path / "k.db")
    assert bad.returncode == 2 and "invalid_id" in bad.stderr
    usage = run("frobnicate")
    assert usage.returncode == 2


def test_db_from_environment_and_empty_flag(tmp_path):
    db = tmp_path / "from-env.db"
    result = run("read", "shell/sed-in-place-bsd-vs-gnu", env={"KNOWMESH_DB": str(db), "KNOWMESH_EMPTY": "1"})
    assert result.returncode == 2 and "node_not_found" in result.stderr
    assert db.exists()
    assert run("read", "shell/sed-in-place-bsd-vs-gnu", "--empty", db=tmp_path / "flag.db").returncode == 2


def test_default_db_path_follows_xdg(tmp_path):
    result = run("read", "shell/sed-in-place-bsd-vs-gnu", env={"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "xdg" / "knowmesh" / "knowmesh.db").exists()


def test_import_reports_and_is_idempotent(tmp_path, make_doc):
    db = tmp_path / "k.db"
    good = [make_doc(id=f"python/imported-{i}", error=f"ImportError: cannot import name 'n{i}' from 'pkg{i}'") for i in range(3)]
    invalid = make_doc(id="Python/BAD")
    folder = tmp_path / "nodes"
    (folder / "nested").mkdir(parents=True)
    write_jsonl(folder / "nested" / "a.jsonl", good[:2])
    (folder / "b.json").write_text(json.dumps(good[2]), encoding="utf-8")
    (folder / "c.json").write_text(json.dumps([invalid]), encoding="utf-8")
    (folder / "broken.json").write_text("{oops", encoding="utf-8")

    dry = run("import", str(folder), "--dry-run", "--empty", db=db)
    assert dry.returncode == 2
    assert "would create 3, unchanged 0, skipped 0, invalid 2" in dry.stdout
    assert "invalid_node" in dry.stderr and "invalid_json" in dry.stderr
    assert run("export", db=db).stdout == ""  # dry run wrote nothing

    first = run("import", str(folder / "nested"), str(folder / "b.json"), db=db)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "created 3, unchanged 0, skipped 0, invalid 0"
    second = run("import", str(folder / "nested"), str(folder / "b.json"), db=db)
    assert second.returncode == 0
    assert second.stdout.strip() == "created 0, unchanged 3, skipped 0, invalid 0 (nothing to change)"

    changed = dict(good[0], title="A different title")
    other = run("import", str(write_jsonl(tmp_path / "changed.jsonl", [changed])), db=db)
    assert "skipped 1" in other.stdout and "id exists with different content" in other.stderr


def test_import_missing_path_is_usage_error(tmp_path):
    result = run("import", str(tmp_path / "nope.json"), db=tmp_path / "k.db")
    assert result.returncode == 2 and "no such file" in result.stderr


def test_export_import_round_trip_is_identical(tmp_path):
    first_db, second_db = tmp_path / "one.db", tmp_path / "two.db"
    exported = tmp_path / "mesh.jsonl"
    assert run("export", "-o", str(exported), db=first_db).returncode == 0
    lines = exported.read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 40
    imported = run("import", str(exported), "--empty", db=second_db)
    assert imported.returncode == 0 and imported.stdout.startswith(f"created {len(lines)},")
    assert run("export", db=second_db).stdout.splitlines() == lines
    statuses = {json.loads(line)["status"] for line in lines}
    assert statuses <= {"draft", "verified"} and "verified" in statuses  # status survives the trip


def test_commands_that_do_not_serve_mcp_do_not_import_it(tmp_path):
    probe = (
        "import sys, runpy; sys.argv = ['knowmesh-mcp', 'read', 'shell/sed-in-place-bsd-vs-gnu', '--db', sys.argv[1]];"
        "import knowmesh_mcp.cli.main as cli; code = cli.main(sys.argv[1:]);"
        "print('MCP_IMPORTED' if any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules) else 'MCP_NOT_IMPORTED', file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "k.db")], capture_output=True, text=True, timeout=60)
    assert "MCP_NOT_IMPORTED" in result.stderr, result.stderr


@pytest.mark.parametrize("args", [["serve", "--stdio", "--http"], ["read"], ["import"]])
def test_bad_usage_exits_2(args):
    assert run(*args).returncode == 2
