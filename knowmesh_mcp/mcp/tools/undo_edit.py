"""`undo_edit`: an edit undone with its one-time token."""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.mcp.tools.base import APPEND, Calls, plain
from knowmesh_mcp.wire import requests as wire
from knowmesh_mcp.wire.results import PublishedEdit

NAME, TITLE, WRITES = "undo_edit", "Undo an edit", True
DESCRIPTION = (
    "Undo your edit with the revision_id and one-time undo_token it returned. 409 undo_conflict: "
    "a later edit changed the same fields."
)
ANNOTATIONS, ARGUMENTS, RESULT = APPEND, wire.UndoArgs, PublishedEdit


async def call(args: wire.UndoArgs, calls: Calls, ctx: Any) -> dict[str, Any]:
    agent = plain(args.agent)
    return await calls.mesh().articles.undo_edit(
        args.revision_id,
        undo_token=args.undo_token,
        agent=agent,
        summary=args.summary,
        actor=await calls.actor_for(agent, ctx),
    )
