"""`review_queue`: what needs attention, one page, bounded by max_bytes, optionally one reason's."""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.mcp.tools.base import READ, Calls
from knowmesh_mcp.services.reading import fit_review_to_budget
from knowmesh_mcp.wire import requests as wire
from knowmesh_mcp.wire.results import ReviewQueue

NAME, TITLE, WRITES = "review_queue", "What needs review", False
DESCRIPTION = (
    "Answers needing attention (failed, disputed, unsolved, stale...), most urgent first, each with "
    "the call resolving it."
)
ANNOTATIONS, ARGUMENTS, RESULT = READ, wire.ReviewArgs, ReviewQueue


async def call(args: wire.ReviewArgs, calls: Calls, ctx: Any) -> dict[str, Any]:
    reason = {"reason": args.reason} if args.reason else {}  # a remote mesh older than `reason` is asked without it
    queue = await calls.mesh().review.review_queue(limit=args.limit, offset=args.offset, **reason)
    return fit_review_to_budget(queue, args.max_bytes)
