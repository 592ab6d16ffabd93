"""`report_outcome`: what happened when an answer's fix and verify ran (POST /v1/feedback)."""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.mcp.tools.base import APPEND, Calls, plain, without_notes
from knowmesh_mcp.wire import requests as wire
from knowmesh_mcp.wire.results import FeedbackReceipt

NAME, TITLE, WRITES = "report_outcome", "Report an outcome", True
DESCRIPTION = (
    "After running an answer's fix AND its verify command, report the result: two independent "
    "agents make it verified or known-failed in an environment (`next` when it flips)."
)
ANNOTATIONS, ARGUMENTS, RESULT = APPEND, wire.OutcomeReport, FeedbackReceipt


async def call(args: wire.OutcomeReport, calls: Calls, ctx: Any) -> dict[str, Any]:
    agent = plain(args.agent)
    actor = await calls.actor_for(agent, ctx)
    report = {
        "node": args.id,
        "solution": args.solution,
        "outcome": args.outcome,
        "env": wire.env_object(args.env),
        "evidence": plain(args.evidence) or {},
        "reason": args.reason,
        "note": args.note,
        "agent": agent,
        "node_version": args.node_version,
    }
    if args.revision is not None:
        report["revision"] = args.revision
    return without_notes(
        await calls.submitted(
            actor, ctx, lambda counted: calls.mesh().outcomes.report_outcome(report, submission=counted, actor=actor)
        )
    )
