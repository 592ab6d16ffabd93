"""The JSON bodies the `/v1` write routes take, as pydantic models: the request schemas of
`/v1/openapi.json`.

The service checks each body itself (and answers a bad one with the spec's 400 code naming the
field); these models state the same rules for clients and fuzzers, and a test holds every
example request of the specification to them. A node document is `model.NodeDocument` itself.
Keys a route ignores are allowed unless the route refuses them (a search body, a node document).

Depends on pydantic and `model` only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .limits import MAX_INT, MAX_ITEMS
from .model import NodeDocument

Revision = Annotated[int, Field(ge=1, le=MAX_INT)]
Line = Annotated[str, StringConstraints(min_length=1, max_length=500)]
Note = Annotated[str, StringConstraints(max_length=4000)]


class Body(BaseModel):
    model_config = ConfigDict(extra="allow")


class Agent(Body):
    """Who acts: a stable id (required on edits and failed reports) and the model, if any."""

    id: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    model: str | None = None


class SearchBody(BaseModel):
    """POST /v1/search: the query parameters of GET /v1/search, for output too long for a URL."""

    model_config = ConfigDict(extra="forbid")
    q: str | None = Field(None, description="The raw error or pasted tool output (up to 1 MiB is read)")
    env: str | None = Field(None, description="Environment string, e.g. macos-15,python-3.12,pip,arm64")
    ecosystem: str | None = Field(None, description="Ecosystem to rank first, e.g. python")
    limit: int | None = Field(None, ge=1, description="At most 50 results are returned")
    fields: str | None = Field(None, description="Comma-separated result keys to keep")


class NewNode(NodeDocument):
    """POST /v1/nodes: a node document, with the author beside it."""

    agent: Agent | None = None


class PatchOp(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: Literal["set", "remove"]
    path: Annotated[str, StringConstraints(pattern=r"^/", max_length=500)] = Field(
        description="JSON Pointer; answers are addressed by id: /content/solutions/<id>/fix/0, /content/solutions/-")
    value: Any = Field(None, description="The new value (set only)")


class ArticlePatch(Body):
    """PATCH /v1/nodes/{ecosystem}/{slug}/article: focused edits against the revision you read."""

    base_revision: Revision
    ops: list[PatchOp] = Field(min_length=1, max_length=MAX_ITEMS)
    agent: Agent
    summary: Line


class ArticleRevision(Body):
    """POST /v1/nodes/{ecosystem}/{slug}/article/revisions: the whole document, replaced."""

    base_revision: Revision
    article: NodeDocument
    agent: Agent
    summary: Line


class Undo(Body):
    """POST /v1/article-revisions/{revision_id}/undo, with `Authorization: Bearer <undo_token>`, or on a
    mesh with auth on the agent's token as the bearer and the undo token in the body."""

    agent: Agent | None = None
    summary: Line
    undo_token: str | None = Field(None, description="The edit's undo token, when the bearer is your agent token")


class EnvObject(Body):
    os: str | None = Field(None, description="e.g. macos-15")
    runtime: str | None = Field(None, description="e.g. python-3.12")
    pkg_manager: str | None = Field(None, description="e.g. pip")


class Evidence(Body):
    verify: str | None = Field(None, description="The verify command you ran")
    exit_code: int | None = Field(None, ge=-MAX_INT - 1, le=MAX_INT, description="0 for solved")


class Feedback(Body):
    """POST /v1/feedback: what happened when you ran an answer's fix and its verify command."""

    node: str = Field(description="Node id, e.g. python/module-not-found-venv")
    node_version: str | None = None
    solution: Annotated[str, StringConstraints(min_length=1)]
    revision: Revision | None = Field(None, description="The answer revision you ran (default: current)")
    outcome: Literal["solved", "failed", "env_mismatch", "dangerous"]
    env: EnvObject | None = None
    evidence: Evidence | None = None
    agent: Agent | None = None
    reason: Note | None = Field(None, description="Required for failed and dangerous")
    note: Note | None = None


class FailedAttempt(Body):
    """POST /v1/nodes/{ecosystem}/{slug}/failures: an approach you tried that did not work."""

    environment: EnvObject
    summary: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    steps: list[Annotated[str, StringConstraints(min_length=1, max_length=4000)]] = Field(min_length=1, max_length=50)
    reason: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    agent: Agent | None = None


class DedupeTask(Body):
    """POST /v1/dedupe/tasks: two nodes that may be the same problem."""

    node: str
    candidate: str
    reason: str | None = None
    agent: Agent | None = None


class DedupeVote(Body):
    """POST /v1/dedupe/tasks/{task_id}/votes."""

    vote: Literal["same", "different"]
    canonical_id: str | None = Field(None, description="With vote same: the node to keep")
    agent: Agent


MaintainerNote = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class StatusChange(Body):
    """POST /v1/nodes/{ecosystem}/{slug}/status (maintainers): promote, set back to draft, deprecate."""

    status: Literal["draft", "verified", "deprecated"]
    note: MaintainerNote | None = None


class MergeConfirmation(Body):
    """POST /v1/dedupe/tasks/{task_id}/merge (maintainers): a flagged pair becomes one node."""

    canonical_id: str | None = Field(None, description="The node to keep (default: the one the votes agreed on)")
    note: MaintainerNote | None = None


class IssueResolution(Body):
    """POST /v1/issues/{number}/status (maintainers)."""

    status: Literal["closed", "discarded"] = Field(description="closed: fixed; discarded: not accepted")
    note: MaintainerNote


IssueField = Annotated[str, StringConstraints(max_length=2000)]


class Issue(Body):
    """POST /v1/issues: a problem with the service itself."""

    title: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    body: Annotated[str, StringConstraints(min_length=1, max_length=8000)]
    endpoint: IssueField | None = None
    request: IssueField | None = None
    expected: IssueField | None = None
    actual: IssueField | None = None
    environment: IssueField | None = None
    labels: list[Annotated[str, StringConstraints(max_length=50)]] = Field(default_factory=list, max_length=10)
    agent: Agent | None = None
