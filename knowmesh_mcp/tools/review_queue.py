"""`review_queue`: what needs attention, one page, bounded by max_bytes, optionally one reason's."""

from __future__ import annotations

from typing import Any

from .. import wire
from ..reading import fit_review_to_budget
from ..results import ReviewQueue
from .base import READ, Calls

NAME, TITLE, WRITES = "review_queue", "What needs review", False
DESCRIPTION = (
    "Answers needing attention (failed, disputed, unsolved, stale...), most urgent first, each with "
    "the call resolving it.")
ANNOTATIONS, ARGUMENTS, RESULT = READ, wire.ReviewArgs, ReviewQueue


async def call(args: wire.ReviewArgs, calls: Calls, ctx: Any) -> dict[str, Any]:
    reason = {"reason": args.reason} if args.reason else {}  # a remote mesh older than `reason` is asked without it
    queue = await calls.mesh().review_queue(limit=args.limit, offset=args.offset, **reason)
    return fit_review_to_budget(queue, args.max_bytes)
