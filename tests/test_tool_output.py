"""Decisive lines of pasted tool output: real outputs from public threads, and the rules one by one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowmesh_mcp.search.tool_output import WRAPPER, decisive_lines, scan, strip_prefixes

FIXTURES = Path(__file__).with_name("fixtures") / "decisive_lines"


def _fixtures() -> list[dict]:
    items = []
    for file in sorted(FIXTURES.glob("*.jsonl")):
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                items.append({**json.loads(line), "at": f"{file.name}:{number}"})
    return items


REAL = _fixtures()


def test_the_table_holds_enough_real_outputs_with_their_sources():
    assert len(REAL) >= 80
    assert all(item["source"].startswith("https://github.com/") for item in REAL)
    assert len({item["tool"] for item in REAL}) >= 15


@pytest.mark.parametrize("item", REAL, ids=[item["at"] for item in REAL])
def test_the_line_that_names_the_cause_comes_first(item):
    read = scan(item["text"])
    first = read.decisive[0]
    pasted = item["text"].replace("\r\n", "\n").replace("\r", "\n").split("\n")[first.position]
    wanted = [item["decisive"], *item.get("also", [])]
    assert any(w in first.text or w in pasted for w in wanted), (item["source"], first.text)
    assert read.is_output


@pytest.mark.parametrize(("line", "stripped"), [
    ("2024-05-01T10:00:01.1234567Z npm ERR! code ERESOLVE", "code ERESOLVE"),
    ("##[error]Process completed with exit code 1.", "Process completed with exit code 1."),
    ("#12 0.915 ERROR: No matching distribution found for flask==9.9", "ERROR: No matching distribution found for flask==9.9"),
    ("2024-01-01T00:00:00.000000+00:00 app[web.1]: Error: listen EADDRINUSE", "Error: listen EADDRINUSE"),
    ("web-1  | Error: connect ECONNREFUSED 127.0.0.1:5432", "Error: connect ECONNREFUSED 127.0.0.1:5432"),
    ("E   ModuleNotFoundError: No module named 'requests'", "ModuleNotFoundError: No module named 'requests'"),
    ("\x1b[31merror\x1b[0m: could not compile", "error: could not compile"),
    ("[31merror[0m[E0382]: borrow of moved value", "error[E0382]: borrow of moved value"),
    ("> > ModuleNotFoundError: x", "ModuleNotFoundError: x"),
    ("[ERROR] Failed to execute goal x", "Failed to execute goal x"),
    ("E0831 04:12:41.868086    3570 configmap.go:157] Couldn't get configMap", "Couldn't get configMap"),
    ("error[E0382]: borrow of moved value", "error[E0382]: borrow of moved value"),  # not a Heroku prefix
])
def test_transport_prefixes_are_stripped(line, stripped):
    assert strip_prefixes(line) == stripped


def test_a_cause_line_beats_the_wrapper_lines_around_it():
    log = """#8 [4/5] RUN pip install -r requirements.txt
#8 1.204 ERROR: No matching distribution found for flask==9.9
#8 ERROR: process "/bin/sh -c pip install -r requirements.txt" did not complete successfully: exit code: 1
------
ERROR: failed to solve: process "/bin/sh -c pip install -r requirements.txt" did not complete successfully: exit code: 1
Error: Process completed with exit code 1."""
    read = scan(log)
    assert read.lines[0] == "ERROR: No matching distribution found for flask==9.9"
    assert all(line.rank == WRAPPER for line in read.decisive[1:])


def test_make_s_recipe_lines_are_wrappers_around_the_compiler_s_error():
    # https://github.com/solo-io/unik/issues/114: old GNU make names the failed recipe beside `Error 2`
    log = """pkg/daemon/daemon.go:16: imported and not used: "runtime"
make: *** [localbuild] Error 2
Makefile:254: recipe for target 'localbuild' failed
make: *** [Makefile:247: binary] Error 2"""
    read = scan(log)
    assert read.lines[0] == 'pkg/daemon/daemon.go:16: imported and not used: "runtime"'
    assert [line.rank == WRAPPER for line in read.decisive] == [False, True, True, True]


def test_chained_exceptions_put_the_root_first():
    java = """Exception in thread "main" java.lang.RuntimeException: boot failed
\tat com.acme.Main.main(Main.java:10)
Caused by: java.sql.SQLException: cannot open pool
\tat com.acme.Db.open(Db.java:3)
Caused by: java.net.ConnectException: Connection refused
\t... 2 more"""
    assert decisive_lines(java)[0] == "Caused by: java.net.ConnectException: Connection refused"
    python = """Traceback (most recent call last):
  File "a.py", line 2, in <module>
    d["x"]
KeyError: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "a.py", line 4, in <module>
    raise RuntimeError("config incomplete")
RuntimeError: config incomplete"""
    assert decisive_lines(python)[:2] == ["RuntimeError: config incomplete", "KeyError: 'x'"]


def test_a_wrapper_alone_is_still_searched_by():
    read = scan("=== 1 failed in 0.12s ===")
    assert read.lines == ["=== 1 failed in 0.12s ==="] and not read.has_cause and read.is_output


def test_the_error_at_the_end_of_a_long_log_is_found():
    noise = "".join(f"2024-05-01T10:00:{i % 60:02d}.0Z step {i}: compiling module_{i}.c\n" for i in range(30_000))
    log = noise + "2024-05-01T10:09:59.0Z ./main.go:21:9: undefined: parseConfig\n##[error]Process completed with exit code 1.\n"
    assert len(log) > 1_000_000
    assert decisive_lines(log)[0] == "./main.go:21:9: undefined: parseConfig"


@pytest.mark.parametrize(("text", "output"), [
    ("sed in place edit fails on mac", False),
    ("docker commands only work with sudo", False),
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", True),
    ("ModuleNotFoundError: No module named 'x'", True),
    ("bash: nvm: command not found", True),
])
def test_output_is_told_from_prose(text, output):
    assert scan(text).is_output is output
