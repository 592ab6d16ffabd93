"""`article_history`: every revision, or the diff between two."""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.mcp.tools.base import READ, Calls
from knowmesh_mcp.wire import requests as wire
from knowmesh_mcp.wire.results import ArticleHistory

NAME, TITLE, WRITES = "article_history", "Article history", False
DESCRIPTION = "Every revision, or the diff from_revision..to_revision (after a 409 revision_conflict)."
ANNOTATIONS, ARGUMENTS, RESULT = READ, wire.HistoryArgs, ArticleHistory


async def call(args: wire.HistoryArgs, calls: Calls, ctx: Any) -> dict[str, Any]:
    return await calls.mesh().articles.article_history(
        args.id, from_revision=args.from_revision, to_revision=args.to_revision
    )
