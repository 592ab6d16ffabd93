"""What the writing tools and `review_queue` return: a created node, a published edit, the
receipts of outcome and failed-attempt reports, the review queue. See `knowmesh_mcp.wire.results`
for the rules every result model keeps.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from knowmesh_mcp.core.evidence import ReviewReason
from knowmesh_mcp.wire.result_parts import (
    TRUST,
    AnswerState,
    FailureState,
    FieldChange,
    NextSteps,
    Outcome,
    Request,
    Result,
    Status,
    Trust,
    optional,
)

# -- writes ------------------------------------------------------------------------------


class SimilarNode(Result):
    id: str = Field(description="Node id")
    title: str = Field(description="Its title")
    ecosystem: str = Field(description="Its ecosystem")
    score: float = Field(description="Textual closeness (advisory, never blocks)")
    path: str = Field(description="HTTP path")
    html_path: str = Field(description="HTML page")


class CreatedNode(Result):
    """The new node: readable and searchable at once, as draft."""

    id: str = Field(description="Node id")
    version: str = Field(description="Content hash (sha256:...)")
    status: Status = Field(description="Always draft for a new node")
    revision: int = Field(description="Article revision (1)")
    trust: Trust = Field(description=TRUST)
    path: str = Field(description="HTTP path of the node")
    html_path: str = Field(description="HTML page")
    similar: list[SimilarNode] = Field(
        description="Up to three textually close nodes: if one is the same problem, improve it instead"
    )


class PublishedEdit(Result):
    """An edit (patch, revision or undo), published at once as a new revision."""

    id: str = Field(description="Node id")
    revision_id: str = Field(description="The new revision's id (undo_edit takes it)")
    revision: int = Field(description="The new article revision")
    parent_revision: int = Field(description="The revision it was made from")
    kind: str = Field(description="edit or undo")
    version: str = Field(description="The new content hash")
    undo_token: str = Field(description="One-time token to undo this edit with undo_edit: keep it private")
    changes: list[FieldChange] = Field(description="Field-level changes")
    solutions: dict[str, int] = Field(description="Each solution id's revision after the edit")
    created_at: str = Field(description="When (UTC)")
    path: str = Field(description="HTTP path of the node")
    candidate_state: Literal["draft"] = Field(description="A new or changed answer starts as draft")
    candidate_note: str = Field(description="How it becomes verified")


class Counts(Result):
    failed_agents: int = Field(description="Distinct agents that reported failed")
    solved_agents: int = Field(description="Distinct agents that reported solved")


class FeedbackReceipt(Result):
    """An accepted outcome report: evidence, never a vote that publishes text."""

    ok: Literal[True] = Field(description="Always true")
    accepted: Literal[True] = Field(description="Always true")
    id: int = Field(description="Report id")
    node: str = Field(description="Node id")
    solution: str = Field(description="Solution id")
    revision: int = Field(description="The solution revision reported on")
    outcome: Outcome = Field(description="solved, failed, env_mismatch or dangerous")
    cluster: str = Field(description="Environment cluster os|runtime_major|pkg_manager")
    failure_state: FailureState = Field(description="The answer's failure state there now")
    answer_state: AnswerState = Field(description="The answer's state there now")
    counts: Counts = Field(description="Distinct agents so far")
    anonymous: bool = Field(description="True without agent.id: stored and shown, never a second vote")
    proven: bool = Field(description="True: a token (or a stdio server's own user) proved who reported")
    counted: bool = Field(
        description="False: kept and shown, never an independent vote (anonymous, or unproven where auth is on)"
    )
    next: NextSteps = optional("Present when this report flipped the answer to known_failed or disputed")


class FailedAttemptReceipt(Result):
    """A recorded failed approach."""

    ok: Literal[True] = Field(description="Always true")
    accepted: Literal[True] = Field(description="Always true")
    id: int = Field(description="Failure report id")
    node: str = Field(description="Node id")
    cluster: str = Field(description="Environment cluster os|runtime_major|pkg_manager")
    archived: bool = Field(description="False: visible until an answer covers the environment")
    path: str = Field(description="HTTP path listing the node's failed approaches")


# -- review ------------------------------------------------------------------------------


class ReviewItem(Result):
    """One answer (or open problem) that needs attention."""

    reason: ReviewReason = Field(description="Why it needs attention")
    id: str = Field(description="Node id")
    title: str = Field(description="Node title")
    path: str = Field(description="HTTP path")
    html_path: str = Field(description="HTML page")
    base_revision: int = Field(description="The article revision to edit from")
    solution: str | None = Field(description="The answer concerned, or null for an open problem")
    revision: int | None = Field(description="That answer's revision, or null")
    environment: str | None = Field(description="The environment cluster concerned, or null")
    reports: int = Field(description="Reports behind the finding")
    next: dict[str, Request] = Field(description="Ready requests that resolve it: report_outcome, patch_article")


class ReviewQueue(Result):
    """Answers that need attention, highest priority first."""

    reasons: list[str] = Field(description="Every reason, highest priority first")
    reason: str | None = Field(description="The one reason kept, or null for all")
    limit: int = Field(description="Items asked for")
    offset: int = Field(description="Where this page starts in the queue")
    total: int = Field(description="Items in the queue (of `reason`, when given)")
    total_exact: bool = Field(description="False when a reason had more findings than are scanned: `total` is a floor")
    counts: dict[str, int] = Field(description="Items per reason, of the whole queue")
    never_verified: int = Field(description="Stale answers nobody has ever reported solved")
    next_offset: int | None = Field(description="The offset of the next page, or null on the last")
    items: list[ReviewItem] = Field(description="Highest priority first")
    trust: Trust = Field(description=TRUST)
