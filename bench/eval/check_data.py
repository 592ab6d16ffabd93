"""Check the search evaluation data: queries, decisive-line fixtures and the starter corpus.

    python bench/eval/check_data.py [--quiet]

Prints every problem found and exits 1 if there is any (0 when all holds). What it checks is in
bench/eval/README.md; `load_queries()` and `load_fixtures()` are what the evaluation and the tests read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from knowmesh_mcp.core.model import InvalidNode, validate_node  # noqa: E402
from knowmesh_mcp.services.publishing import check_overlaps  # noqa: E402
from knowmesh_mcp.core.errors import KnowmeshError  # noqa: E402
from knowmesh_mcp.services.import_export import load_documents  # noqa: E402
from knowmesh_mcp.store import store_dir  # noqa: E402

QUERIES = HERE / "queries"
FIXTURES = ROOT / "tests" / "fixtures" / "decisive_lines"
KINDS = ("pasted", "raw_error", "traceback", "natural_language", "short_phrase", "env_selection", "confusable", "no_answer")
FIELDS = {"kind", "q", "env", "ecosystem", "expect", "expect_solution", "source", "note"}


def _jsonl(folder: Path) -> list[dict[str, Any]]:
    items = []
    for file in sorted(folder.glob("*.jsonl")):
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as error:
                    item = {"invalid": str(error)}
                item["at"] = f"{file.relative_to(ROOT)}:{number}"
                items.append(item)
    return items


def load_queries(folder: Path = QUERIES) -> list[dict[str, Any]]:
    return _jsonl(folder)


def load_fixtures() -> list[dict[str, Any]]:
    return _jsonl(FIXTURES)


def thread(url: str) -> str:
    """A source URL without its comment anchor or query: one thread, one key."""
    return url.split("#", 1)[0].split("?", 1)[0].rstrip("/")


def problems() -> list[str]:
    found: list[str] = []
    documents: dict[str, dict[str, Any]] = {}
    provenance: dict[str, str] = {}
    for source, raw in load_documents([store_dir() / "starter"]):
        try:
            document = validate_node(raw)
            check_overlaps(document)
        except (InvalidNode, KnowmeshError) as error:
            found.append(f"{source}: invalid document: {error}")
            continue
        documents[document.id] = raw
        for solution in raw["content"]["solutions"]:
            for url in (solution.get("provenance") or {}).get("sources", []):
                provenance[thread(url)] = document.id
    queries = load_queries()
    query_threads: dict[str, str] = {}
    for query in queries:
        where = query["at"]
        if "invalid" in query:
            found.append(f"{where}: {query['invalid']}")
            continue
        missing = FIELDS - query.keys()
        if missing:
            found.append(f"{where}: missing {sorted(missing)}")
            continue
        if query["kind"] not in KINDS:
            found.append(f"{where}: unknown kind {query['kind']!r}")
        if not isinstance(query["q"], str) or not query["q"].strip():
            found.append(f"{where}: empty q")
        expect = query["expect"]
        if (expect is None) != (query["kind"] == "no_answer"):
            found.append(f"{where}: expect must be null exactly for no_answer")
        if expect is not None and expect not in documents:
            found.append(f"{where}: expect {expect!r} is not a starter node")
        if query["expect_solution"] is not None and expect in documents:
            ids = [s["id"] for s in documents[expect]["content"]["solutions"]]
            if query["expect_solution"] not in ids:
                found.append(f"{where}: {expect} has no solution {query['expect_solution']!r}")
        if query["kind"] == "env_selection" and (not query["env"] or not query["expect_solution"]):
            found.append(f"{where}: env_selection needs env and expect_solution")
        source = query["source"]
        if source != "written":
            if not isinstance(source, str) or not source.startswith("https://"):
                found.append(f"{where}: source must be a thread URL or 'written'")
                continue
            query_threads[thread(source)] = where
            if thread(source) in provenance:
                found.append(f"{where}: thread {source} is also provenance of {provenance[thread(source)]}")
        elif query["kind"] == "pasted":
            found.append(f"{where}: a pasted query needs its thread URL as source")
    for fixture in load_fixtures():
        where = fixture["at"]
        if "invalid" in fixture:
            found.append(f"{where}: {fixture['invalid']}")
            continue
        if not all(isinstance(fixture.get(k), str) for k in ("source", "text", "decisive")):
            found.append(f"{where}: source, text and decisive are required strings")
            continue
        for wanted in [fixture["decisive"], *fixture.get("also", [])]:
            if wanted not in fixture["text"]:
                found.append(f"{where}: {wanted!r} is not a substring of text")
        if thread(fixture["source"]) in query_threads:
            found.append(f"{where}: thread {fixture['source']} is also a query ({query_threads[thread(fixture['source'])]})")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="print only problems")
    args = parser.parse_args()
    found = problems()
    for problem in found:
        print(problem)
    if not args.quiet:
        queries = [q for q in load_queries() if "invalid" not in q]
        real = sum(1 for q in queries if q.get("source") != "written")
        print(f"nodes {len(list((store_dir() / 'starter').glob('*.json')))}, queries {len(queries)} ({real} real), "
              f"fixtures {len(load_fixtures())}, problems {len(found)}")
        print("kinds:", dict(Counter(q.get("kind") for q in queries)))
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
