"""The README's two commands are the ones that work: CI runs its test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    """The first two shell blocks of README.md: install-and-serve, then install-and-test."""
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    return [block.strip() for block in blocks[:2]]


def test_the_readme_opens_with_two_one_line_commands():
    serve, test = readme_commands()
    assert serve == "pip install -e . && knowmesh-mcp serve --http"
    assert test.startswith("scripts/install-test-tools && pip install -e '.[test]'")
    assert "\n" not in serve and "\n" not in test


def test_the_test_command_runs_the_style_and_type_gate_before_the_tests():
    test = readme_commands()[1]
    gate = ["ruff format --check knowmesh_mcp", "ruff check knowmesh_mcp", "mypy"]
    steps = test.split(" && ")
    assert steps[-1] == "python -m pytest" and steps[-1 - len(gate) : -1] == gate


def test_ci_runs_the_readme_test_command_verbatim():
    test = readme_commands()[1]
    lines = [line.strip() for line in (ROOT / ".ci/run").read_text(encoding="utf-8").splitlines()]
    assert test in lines
    assert lines[-1] == test  # the last thing CI does is exactly what a newcomer runs


def test_the_tool_installer_is_executable_and_names_what_it_installs():
    script = ROOT / "scripts/install-test-tools"
    assert script.stat().st_mode & 0o111
    text = script.read_text(encoding="utf-8")
    for package in ("chromium", "chromium-driver", "postgresql", "postgresql-contrib"):
        assert re.search(rf"\b{re.escape(package)}\b", text), package
