"""The JSON bodies the `/v1` write routes take: their one definition is `wire` (kept here by name
for code that imports `bodies`)."""

from __future__ import annotations

from knowmesh_mcp.wire.requests import (  # noqa: F401
    Agent,
    ArticlePatch,
    ArticleRevision,
    Body,
    DedupeTask,
    DedupeVote,
    EnvObject,
    Evidence,
    FailedAttempt,
    Feedback,
    Issue,
    IssueResolution,
    MergeConfirmation,
    NewNode,
    PatchOp,
    SearchBody,
    StatusChange,
    Undo,
)
