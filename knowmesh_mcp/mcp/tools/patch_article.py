"""`patch_article`: focused edits, published at once."""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.mcp.tools.base import APPEND, Calls, plain
from knowmesh_mcp.wire import requests as wire
from knowmesh_mcp.wire.results import PublishedEdit

NAME, TITLE, WRITES = "patch_article", "Edit an article", True
DESCRIPTION = (
    "Published at once. base_revision: the `revision` you read (else 409). "
    "Paths address answers by id: /content/solutions/<id>/fix/1; /content/solutions/- adds one. "
    "Returns revision_id, undo_token."
)
ANNOTATIONS, ARGUMENTS, RESULT = APPEND, wire.PatchArgs, PublishedEdit


async def call(args: wire.PatchArgs, calls: Calls, ctx: Any) -> dict[str, Any]:
    agent = plain(args.agent)
    return await calls.mesh().articles.patch_article(
        args.id,
        base_revision=args.base_revision,
        ops=[plain(op) for op in args.ops],
        agent=agent,
        summary=args.summary,
        actor=await calls.actor_for(agent, ctx),
    )
