"""The MCP tools, one module each, registered in this order by `mcp_server.build_mcp_server`.

A tool module names itself (`NAME`, `TITLE`, `DESCRIPTION`, `ANNOTATIONS`), its arguments and
result (`ARGUMENTS` of `wire`, `RESULT` of `results`), whether it writes (`WRITES`), and one
`call(args, calls, ctx)` that answers it through `Calls`: the mesh, who acts, the write limit.
Adapters hold no domain logic and no SQL.
"""

from __future__ import annotations

from types import ModuleType

from knowmesh_mcp.mcp.tools import (
    article_history,
    create_node,
    patch_article,
    read_article,
    report_failed_attempt,
    report_outcome,
    review_queue,
    revise_article,
    search,
    undo_edit,
)

TOOLS: tuple[ModuleType, ...] = (
    search,
    read_article,
    article_history,
    review_queue,
    patch_article,
    revise_article,
    undo_edit,
    report_outcome,
    report_failed_attempt,
    create_node,
)
