"""What only `/v1` returns (no MCP tool does; /v1/openapi.json describes them): errors, listings,
changes, failure and feedback lists, dedupe and issue receipts, and the maintainers' answers.
See `knowmesh_mcp.wire.results` for the rules every result model keeps.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from knowmesh_mcp.core.evidence import ReviewReason
from knowmesh_mcp.wire.article_results import NodeSignature, SharedFailure
from knowmesh_mcp.wire.result_parts import (
    TRUST,
    Agent,
    AnswerState,
    Request,
    Result,
    Status,
    Trust,
    optional,
)

# -- HTTP only (no MCP tool returns these; /v1/openapi.json describes them) ----------------


class ErrorDetail(Result):
    code: str = Field(description="Machine-readable reason, e.g. invalid_json, node_not_found, revision_conflict")
    message: str = Field(description="What went wrong and what to do, in plain words")
    field: str = optional("The argument or JSON Pointer at fault")


class ErrorBody(Result):
    """Every error, HTTP and MCP alike. Details the spec names (current_revision,
    changes_since_base, conflicting_answers) sit inside `error`; canonical and next beside it."""

    error: ErrorDetail = Field(description="The error")


class ListedNode(Result):
    id: str = Field(description="Node id")
    path: str = optional("HTTP path")
    html_path: str = optional("HTML page")
    title: str = optional("One line naming the problem")
    ecosystem: str = optional("Ecosystem")
    status: Status = optional("draft, verified or deprecated")
    has_answer: bool = optional("False: an open problem")
    updated_at: str = optional("When it last changed (UTC)")
    signature: NodeSignature = optional("The error signature")


class NodeList(Result):
    """One page of nodes, by id."""

    nodes: list[ListedNode] = Field(description="This page")
    ecosystem: str | None = Field(description="The ecosystem listed, or null for all")
    limit: int = Field(description="Page size")
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null on the last")


class Change(Result):
    """A node written since the cursor (protocol section 9)."""

    id: str = Field(description="Node id")
    change: Literal["created", "updated", "deprecated"] = Field(description="What happened")
    version: str = Field(description="Content hash: re-fetch when it differs from your copy")
    status: Status = Field(description="draft, verified or deprecated")
    title: str = Field(description="Node title")
    updated_at: str = Field(description="When (UTC)")
    path: str = Field(description="HTTP path")
    revision: int = Field(description="Article revision")
    answer_state: AnswerState = Field(description="Best answer state")
    needs_review: bool = Field(description="True when review_reasons is present")
    review_reasons: list[ReviewReason] = optional("Why it needs attention")
    evidence_seq: int = Field(description="The node's last feedback id: grows with new evidence")
    merged_from: list[str] = optional("Nodes a maintainer merged into this one: they answer with it")
    merged_into: str = optional("The node this one was merged into: it answers with that one")


class ChangesPage(Result):
    changes: list[Change] = Field(description="In write order")
    next_cursor: str = Field(description="Pass as since next time (keep it when there are no changes)")
    has_more: bool = Field(description="True: fetch again with next_cursor")
    remaining: int = Field(description="Changes after this page")


class FailureReport(Result):
    """A failed (or dangerous) outcome report, kept after later evidence clears it."""

    id: int = Field(description="Report id")
    solution_id: str = Field(description="The answer reported on")
    solution_revision: int = Field(description="Its revision")
    outcome: Literal["failed", "dangerous"] = Field(description="failed or dangerous")
    cluster: str = Field(description="Environment cluster")
    environment: dict[str, Any] = Field(description="Where it was run")
    reason: str | None = Field(description="What happened")
    note: str | None = Field(description="Note")
    exit_code: int | None = Field(description="Exit code of the verify command")
    created_at: str = Field(description="When (UTC)")
    agent: Agent | None = Field(description="Who reported it, or null")


class FailureList(Result):
    """Every shared failed approach (archived ones too) and every failure report of a node."""

    id: str = Field(description="Node id")
    failures: list[SharedFailure] = Field(description="Failed approaches, oldest first")
    failed_reports: list[FailureReport] = Field(description="Failed outcome reports, oldest first")
    trust: Trust = Field(description=TRUST)


class FeedbackList(Result):
    """A node's outcome reports in order, without addresses."""

    id: str = Field(description="Node id")
    feedback: list[dict[str, Any]] = Field(description="Reports after `after`, oldest first")
    next_after: int = Field(description="Pass as after for the next page")
    has_more: bool = Field(description="True: more reports follow")


class DedupeTaskReceipt(Result):
    ok: Literal[True] = Field(description="Always true")
    task_id: int = Field(description="The task number")
    created: bool = Field(description="False: the pair was already queued")
    path: str = Field(description="Where open tasks are listed")
    vote: Request | dict[str, Any] = Field(description="The request that votes on it")


class DedupeVoteResult(Result):
    ok: Literal[True] = Field(description="Always true")
    task_id: int = Field(description="The task number")
    status: str = Field(description="open, flagged (for an administrator) or closed")
    canonical_id: str | None = Field(description="The node the same-votes keep, or null")
    votes: dict[str, int] = Field(description="Votes so far: same, different")
    counted: bool = optional("False: this vote is kept but does not count (unproven, where auth is on)")


class IssueReceipt(Result):
    ok: Literal[True] = Field(description="Always true")
    issue_number: int = Field(description="The issue's number")
    status: Literal["open"] = Field(description="Open until the maintainer closes or discards it")
    url: str = Field(description="Where people read it")


# -- maintainers -------------------------------------------------------------------------


class NodeRef(Result):
    id: str = Field(description="Node id")
    path: str = Field(description="Its JSON read")
    html_path: str = Field(description="Its page")


class StatusChanged(Result):
    ok: Literal[True] = Field(description="Always true")
    node: str = Field(description="Node id")
    status: Status = Field(description="The node's status now")
    previous: Status = Field(description="Its status before")
    changed: bool = Field(description="False: it already had this status (nothing recorded)")
    action_id: int = optional("The audit log entry")
    maintainer: Agent = optional("Who did it")


class MergeConfirmed(Result):
    ok: Literal[True] = Field(description="Always true")
    task_id: int = Field(description="The dedupe task")
    merged: str = Field(description="The node merged away: deprecated, its URLs answer 301")
    canonical: NodeRef = Field(description="The node kept")
    action_id: int = Field(description="The audit log entry")
    maintainer: Agent = Field(description="Who did it")


class IssueResolved(Result):
    ok: Literal[True] = Field(description="Always true")
    issue_number: int = Field(description="The issue")
    status: Literal["closed", "discarded"] = Field(description="closed (fixed) or discarded (not accepted)")
    resolution: dict[str, Any] = Field(description="note, maintainer, at")
    action_id: int = Field(description="The audit log entry")


class MaintainerAction(Result):
    id: int = Field(description="Entry number")
    action: Literal["set_status", "merge", "close_issue", "discard_issue"] = Field(description="What was done")
    target: str = Field(description="The node id, or the issue number")
    note: str | None = Field(description="The maintainer's note")
    maintainer: Agent = Field(description="Who did it (always proven)")
    proof: Literal["token", "local"] = Field(description="token: over HTTP; local: the admin command on the database")
    created_at: str = Field(description="When (UTC)")


class AuditLog(Result):
    """Every maintainer action, oldest first; each also carries its detail (from/to, canonical, task_id)."""

    actions: list[MaintainerAction] = Field(description="Entries after `after`")
    next_after: int = Field(description="Pass as after for the next page")
    has_more: bool = Field(description="True: more entries follow")


class DedupeQueue(Result):
    tasks: list[dict[str, Any]] = Field(description="Pairs with their votes so far")
    trust: Trust = Field(description=TRUST)


class HealthReport(Result):
    """What a user needs to know about a mesh; `ok` false names each problem."""

    ok: bool = Field(description="False: see problems")
    problems: list[str] = Field(description="One reason per problem, with what to do")
    database: str = Field(description="The database: a file path, or a PostgreSQL URL without its password")
    backend: Literal["sqlite", "postgresql"] = Field(description="Which store holds the mesh")
    schema_version: int = Field(description="The last migration applied")
    latest_schema_version: int = Field(description="The last migration this code has")
    nodes: int = Field(description="Nodes stored")
    search_index_version: str | None = Field(description="The analyser version the search index was built with")
    auth: Literal["off", "optional", "required"] | None = Field(description="The serving auth mode (null: not serving)")
    tokens: dict[str, int] = Field(description="Live tokens per role: agent, maintainer")
    syncs: list[dict[str, str]] = Field(description="Each remote synced from (remote, synced_at)")
