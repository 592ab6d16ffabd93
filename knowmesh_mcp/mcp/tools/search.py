"""`search`: the nodes for a raw error, best first, bounded by max_bytes."""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.mcp.tools.base import READ, Calls
from knowmesh_mcp.services.reading import fit_search_to_budget
from knowmesh_mcp.wire import requests as wire
from knowmesh_mcp.wire.results import SearchEnvelope

NAME, TITLE, WRITES = "search", "Search known failures", False
DESCRIPTION = (
    "Call FIRST when a command, build or test fails, before debugging by hand. Nodes best first, "
    "each with a 0..1 score (>= 0.5: likely) and its answer for `env`; no match: `guidance` has a "
    "ready create_node call."
)
ANNOTATIONS, ARGUMENTS, RESULT = READ, wire.SearchArgs, SearchEnvelope


async def call(args: wire.SearchArgs, calls: Calls, ctx: Any) -> dict[str, Any]:
    envelope = await calls.mesh().searching.search(
        args.q, env=wire.env_text(args.env), ecosystem=args.ecosystem, limit=args.limit
    )
    return fit_search_to_budget(envelope, args.max_bytes)
