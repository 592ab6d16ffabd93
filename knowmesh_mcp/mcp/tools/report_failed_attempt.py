"""`report_failed_attempt`: an approach that did not work, while no answer applies."""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.mcp.tools.base import APPEND, Calls, plain, without_notes
from knowmesh_mcp.wire import requests as wire
from knowmesh_mcp.wire.results import FailedAttemptReceipt

NAME, TITLE, WRITES = "report_failed_attempt", "Share a failed approach", True
DESCRIPTION = (
    "No answer applies to your environment: record an approach you tried and why it failed, so "
    "others skip it. 409 answer_exists: run that answer instead."
)
ANNOTATIONS, ARGUMENTS, RESULT = APPEND, wire.FailedAttemptArgs, FailedAttemptReceipt


async def call(args: wire.FailedAttemptArgs, calls: Calls, ctx: Any) -> dict[str, Any]:
    agent = plain(args.agent)
    actor = await calls.actor_for(agent, ctx)
    attempt = {
        "environment": wire.env_object(args.env),
        "summary": args.summary,
        "steps": args.steps,
        "reason": args.reason,
        "agent": agent,
    }
    return without_notes(
        await calls.submitted(
            actor,
            ctx,
            lambda counted: calls.mesh().failures.report_failed_attempt(
                args.id, attempt, submission=counted, actor=actor
            ),
        )
    )
