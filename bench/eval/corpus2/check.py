"""Check the second evaluation corpus (README.md beside this file): every node valid and cited,
every query well-formed, real and from a thread nothing else here uses.

    python bench/eval/corpus2/check.py      # prints the problems (exit 1) or the counts (exit 0)
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EVAL = HERE.parent
ROOT = EVAL.parent.parent
for entry in (str(ROOT), str(EVAL), str(EVAL.parent)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from check_data import load_queries, thread  # noqa: E402

from knowmesh_mcp.core.model import InvalidNode, validate_node  # noqa: E402
from knowmesh_mcp.core.normalize import normalize_signature  # noqa: E402
from knowmesh_mcp.store import store_dir  # noqa: E402

KINDS = ("pasted", "natural_language", "no_answer", "env_selection", "confusable")
FIELDS = {"kind", "q", "env", "ecosystem", "expect", "expect_solution", "source", "note", "decisive"}
REQUIRED = FIELDS - {"decisive"}


def nodes() -> dict[str, tuple[Path, dict[str, Any]]]:
    return {raw["id"]: (path, raw) for path in sorted((HERE / "nodes").glob("*.json"))
            for raw in [json.loads(path.read_text(encoding="utf-8"))]}


def queries() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted((HERE / "queries").glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                found.append((f"{path.name}:{number}", json.loads(line)))
    return found


def cited(raw: dict[str, Any]) -> list[str]:
    return [url for solution in raw.get("content", {}).get("solutions", [])
            for url in (solution.get("provenance") or {}).get("sources", [])]


def used_elsewhere() -> set[str]:
    """Threads the first corpus's queries, the decisive-line fixtures and the starter nodes cite."""
    used = {thread(q["source"]) for q in load_queries() if q["source"] != "written"}
    for path in (ROOT / "tests" / "fixtures" / "decisive_lines").glob("*.jsonl"):
        used |= {thread(json.loads(line)["source"]) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}
    for path in (store_dir() / "starter").glob("*.json"):
        used |= {thread(url) for url in cited(json.loads(path.read_text(encoding="utf-8")))}
    return used


async def not_importable(documents: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Nodes a mesh would not take beside the others (an empty mesh, a dry-run import): a node whose
    normalized error and quoted values equal another's is the same problem to the product (409
    duplicate_node), so siblings must differ in their error line, not only in their article."""
    from knowmesh_mcp.services.mesh import Mesh

    with tempfile.TemporaryDirectory(prefix="corpus2-check-") as folder:
        service = await Mesh.open(Path(folder) / "check.db", seed=False)
        try:
            report = await service.documents.import_documents(documents, dry_run=True)
        finally:
            await service.close()
    return [f"{item.get('source')}: not importable: {item.get('reason')}" for item in report.skipped + report.invalid]


def problems() -> list[str]:
    found: list[str] = []
    ours = nodes()
    found += asyncio.run(not_importable([(path.name, raw) for path, raw in ours.values()]))
    provenance: set[str] = set()
    for node_id, (path, raw) in ours.items():
        expected_name = node_id.replace("/", "__") + ".json"
        if path.name != expected_name:
            found.append(f"{path.name}: named {expected_name} by its id")
        try:
            validate_node(raw)
        except InvalidNode as error:
            found.append(f"{path.name}: invalid: {error}")
        sources = cited(raw)
        if not sources:
            found.append(f"{path.name}: no solution cites its threads (provenance.sources)")
        provenance |= {thread(url) for url in sources}
    elsewhere = used_elsewhere()
    seen: dict[str, str] = {}
    for where, query in queries():
        if set(query) - FIELDS or REQUIRED - set(query):
            found.append(f"{where}: fields {sorted(set(query) ^ FIELDS)} differ from the README's")
            continue
        if query["kind"] not in KINDS:
            found.append(f"{where}: kind {query['kind']!r} is not one of {KINDS}")
        if (query["expect"] is None) != (query["kind"] == "no_answer"):
            found.append(f"{where}: expect must be null exactly for no_answer")
        if query["expect"] is not None and query["expect"] not in ours:
            found.append(f"{where}: expect {query['expect']!r} is not a node of this corpus")
        source = str(query["source"])
        if not source.startswith("https://"):
            found.append(f"{where}: source must be the thread's URL")
            continue
        key = thread(source)
        if key in elsewhere:
            found.append(f"{where}: {key} is cited by the first corpus, a fixture or a starter node")
        if key in provenance:
            found.append(f"{where}: {key} is a node's provenance here: a query thread must be another")
        if query["q"] in seen:
            found.append(f"{where}: the same q as {seen[query['q']]}")
        seen[query["q"]] = where
        if query.get("decisive") and query["decisive"] not in query["q"]:
            found.append(f"{where}: decisive is not a substring of q")
    return found


def main() -> int:
    found = problems()
    for problem in found:
        print(problem)
    if found:
        return 1
    kinds = Counter(query["kind"] for _, query in queries())
    families = Counter(normalize_signature(raw["signature"]["error"]) for _, raw in nodes().values())
    print(f"nodes {len(nodes())} ({sum(1 for n in families.values() if n >= 4)} normalized errors shared by 4 or more), "
          f"queries {sum(kinds.values())}: " + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
