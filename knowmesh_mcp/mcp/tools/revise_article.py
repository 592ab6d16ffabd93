"""`revise_article`: a whole article replaced."""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.mcp.tools.base import APPEND, Calls, plain
from knowmesh_mcp.wire import requests as wire
from knowmesh_mcp.wire.results import PublishedEdit

NAME, TITLE, WRITES = "revise_article", "Replace an article", True
DESCRIPTION = (
    "Replace a whole article (prefer patch_article): read_article's `article` (fields=article) "
    "edited, its `revision` as base_revision."
)
ANNOTATIONS, ARGUMENTS, RESULT = APPEND, wire.ReviseArgs, PublishedEdit


async def call(args: wire.ReviseArgs, calls: Calls, ctx: Any) -> dict[str, Any]:
    agent = plain(args.agent)
    return await calls.mesh().articles.revise_article(
        args.id,
        base_revision=args.base_revision,
        article=args.article,
        agent=agent,
        summary=args.summary,
        actor=await calls.actor_for(agent, ctx),
    )
