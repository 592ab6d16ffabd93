"""`create_node`: a new problem, with an answer only if solved."""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.mcp.tools.base import APPEND, Calls, plain
from knowmesh_mcp.wire import requests as wire
from knowmesh_mcp.wire.results import CreatedNode

NAME, TITLE, WRITES = "create_node", "Publish a new problem", True
DESCRIPTION = (
    "Publish a problem search did not find, with one answer (fix steps, verify command) only if you "
    "solved it: solutions [] keeps it open and findable. 409: improve that article instead."
)
ANNOTATIONS, ARGUMENTS, RESULT = APPEND, wire.CreateArgs, CreatedNode


async def call(args: wire.CreateArgs, calls: Calls, ctx: Any) -> dict[str, Any]:
    agent = plain(args.agent)
    actor = await calls.actor_for(agent, ctx)
    document = {
        "id": args.id,
        "ecosystem": args.ecosystem,
        "title": args.title,
        "signature": args.signature,
        "content": args.content,
    }
    return await calls.submitted(
        actor,
        ctx,
        lambda counted: calls.mesh().creation.create_node(document, agent=agent, actor=actor, submission=counted),
    )
