"""`search` (a table of matches, or the JSON envelope) and `read` (one article as Markdown or JSON)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from knowmesh_mcp.cli.mesh import open_service
from knowmesh_mcp.cli.output import table

PUBLISH_HINT = (
    "Publish it as an open problem with POST /v1/nodes (MCP tool create_node); add --json for the ready body."
)


async def run_search(args: argparse.Namespace) -> int:
    query = sys.stdin.read() if args.query == "-" else args.query
    service = await open_service(args)
    try:
        envelope = await service.searching.search(query, env=args.env, ecosystem=args.ecosystem, limit=args.limit)
    finally:
        await service.close()
    if args.json:
        print(json.dumps(envelope, indent=2, ensure_ascii=False))
        return 0
    results = envelope["results"]
    if not results:
        guidance = envelope["guidance"]
        print("No match. " + guidance["message"])
        print(PUBLISH_HINT)
        return 0
    guidance = envelope.get("guidance") or {}
    guesses = guidance.get("reason") == "weak_match"  # the best score is below 0.5: every row is a guess
    if guesses:
        print("Guesses only. " + guidance["message"] + "\n")
    print(table(("SCORE", "MATCH", "ID", "ANSWER", "TITLE"), [result_row(result) for result in results], right=(0,)))
    print(f"\nRead one: knowmesh-mcp read {results[0]['id']}" + (f" --env {args.env}" if args.env else ""))
    if guesses:
        print("None of them is your problem? " + PUBLISH_HINT)
    return 0


def result_row(result: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """One search result as the table's cells: score, match, id, answer, title."""
    return (
        f"{math.floor(result['score'] * 100) / 100:.2f}",  # 0.4999 is no 0.50
        result["match"],
        result["id"],
        (result["solution"] or {}).get("id") or ("open problem" if not result["has_answer"] else "none for env"),
        shortened(result["title"], 60),
    )


def shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def run_read(args: argparse.Namespace) -> int:
    service = await open_service(args)
    try:
        result = await service.nodes.read_node(args.id, service.nodes.read_request(env=args.env, include=args.include))
    finally:
        await service.close()
    if args.json:
        print(json.dumps(result.body, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(result.markdown())
    return 0
