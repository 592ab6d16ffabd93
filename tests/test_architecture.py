"""The package's shape, as `docs/architecture.md` draws it: layers whose imports point one way,
and modules and functions small enough to read.

Every import counts, including those inside functions: a lazy import is still an arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "knowmesh_mcp"

# Lowest first. A module may import its own subpackage and any subpackage on a lower layer;
# subpackages on one layer know nothing of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("store", "wire"),
    ("search",),
    ("services",),
    ("mcp", "web"),
    ("api",),
    ("cli",),
)
LAYER_OF = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


def name_of(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def subpackage(module: str) -> str | None:
    """`services` for `knowmesh_mcp.services.reading`; None for the package's own `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "knowmesh_mcp" else None


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{name_of(path)}:{node.lineno} imports relatively; the package imports absolutely"
            found.add(node.module or "")
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {module for module in found if module.startswith("knowmesh_mcp.")}


def arrows_back() -> list[str]:
    problems = []
    for path in modules():
        own = path.relative_to(PACKAGE).parts[0]
        if own not in LAYER_OF:
            continue
        for module in sorted(imported_modules(path)):
            other = subpackage(module)
            if other is None or other == own or other not in LAYER_OF:
                continue
            if LAYER_OF[other] >= LAYER_OF[own]:
                problems.append(f"{name_of(path)} ({own}) imports {module} ({other})")
    return problems


def test_every_module_lives_in_a_subpackage_with_a_layer():
    loose = [name_of(path) for path in modules() if path.parent == PACKAGE and path.name != "__init__.py"]
    subpackages = {path.parent.relative_to(PACKAGE).parts[0] for path in modules() if path.parent != PACKAGE}
    assert loose == []
    assert subpackages == set(LAYER_OF)


def test_imports_point_down_the_layers_only():
    assert arrows_back() == []


def test_a_backward_import_is_caught(tmp_path, monkeypatch):
    """The check itself: a `core` module importing the service layer is reported."""
    package = tmp_path / "knowmesh_mcp"
    (package / "core").mkdir(parents=True)
    (package / "core" / "bad.py").write_text("from knowmesh_mcp.services.reading import ReadResult\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", package)
    assert arrows_back() == ["core/bad.py (core) imports knowmesh_mcp.services.reading (services)",
                             "core/bad.py (core) imports knowmesh_mcp.services.reading.ReadResult (services)"]


def sizes() -> dict[str, int]:
    """Lines of every module and of every function (`module.py:function`)."""
    found = {}
    for path in modules():
        text = path.read_text(encoding="utf-8")
        found[name_of(path)] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{name_of(path)}:{node.name}"
                found[key] = max(found.get(key, 0), node.end_lineno - node.lineno + 1)
    return found


def oversized() -> set[str]:
    return {name for name, lines in sizes().items()
            if lines > (MAX_FUNCTION_LINES if ":" in name else MAX_MODULE_LINES)}


def test_no_module_over_600_lines_and_no_function_over_80():
    assert sorted(oversized()) == []


def test_an_oversized_module_and_function_are_caught(tmp_path, monkeypatch):
    """The check itself: a 601-line module holding an 81-line function is reported twice."""
    package = tmp_path / "knowmesh_mcp"
    (package / "core").mkdir(parents=True)
    body = "def long():\n" + "    x = 1\n" * 80 + "\n" * (600 - 81) + "\n"
    (package / "core" / "big.py").write_text(body)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", package)
    assert sizes() == {"core/big.py": 601, "core/big.py:long": 81}
    assert oversized() == {"core/big.py", "core/big.py:long"}
