"""What `search` returns: the envelope, each result with its one best answer, and the guidance
when nothing is likely. See `knowmesh_mcp.wire.results` for the rules every result model keeps.
"""

from __future__ import annotations

from pydantic import Field

from knowmesh_mcp.wire.result_parts import (
    TRUST,
    AnswerState,
    Environment,
    FailedSolution,
    NextSteps,
    Request,
    Result,
    Solution,
    Status,
    Trust,
    optional,
)

# -- search ------------------------------------------------------------------------------


class ResultSignature(Result):
    error: str = Field(description="The node's raw error line")
    template: str | None = Field(description="Its normalized pattern, or null")


class SearchResult(Result):
    """One matching node and its one best answer for your environment."""

    id: str = Field(description="Node id, {ecosystem}/{slug}: read it with read_article")
    title: str = Field(description="One line naming the problem")
    score: float = Field(
        description="0..1, calibrated: at least 0.5 means likely the right node; never increases down the list"
    )
    match: str = Field(description="How it matched, e.g. signature, alias, template, text")
    path: str = Field(description="HTTP path of the node's JSON read")
    ecosystem: str = optional("The node's ecosystem")
    status: Status = optional("draft, verified or deprecated")
    version: str = optional("Content hash of the node (sha256:...)")
    revision: int = optional("Article revision: base_revision for an edit")
    html_path: str = optional("The node's HTML page")
    env_match: float | None = optional(
        "Share (0..1) of the node's comparable environment constraints your env satisfies; null when none is comparable"
    )
    env_score: float | None = optional("How well the node fits your env (0..1); null without env")
    signature: ResultSignature = optional("The node's error signature")
    symptom: str = optional("What the problem looks like")
    solution: Solution | None = optional("The one best answer for your environment, or null when none applies")
    has_answer: bool = optional("False: the article has no answer at all (not just none for your environment)")
    no_known_working_solution: bool = optional("True: answers exist but none usable for your environment")
    failed_solutions: list[FailedSolution] = optional(
        "Applicable answers known to fail in your environment: do not retry them"
    )
    answer_state: AnswerState = optional("State of the recommended answer (or of the blocked ones)")
    sample_size: int = optional("Outcome reports counted")
    low_confidence: bool = optional("Too few reports to trust the score")
    last_verified: str | None = optional("When an agent last reported solved, or null")
    stale: bool = optional("Never verified, or last verified more than a year ago")
    tokens_estimate: int = optional("About how many tokens a full read costs")
    trust: Trust = optional(TRUST)
    next: NextSteps = optional("What to do when no answer applies")


class Guidance(Result):
    """A search that found nothing likely: publish the problem as open instead of giving up."""

    reason: str = Field(description="no_match (no result) or weak_match (only results below 0.5)")
    message: str = Field(description="What to do, in plain words")
    create_node: Request = Field(description="A ready create_node call with solutions: []; fill in what you know")
    after_publishing: str = Field(description="What happens once it is published")


class SearchEnvelope(Result):
    """The nodes for a raw error or a description, best first, one answer each."""

    query: str = Field(description="The query as read (long input shortened)")
    query_length: int = optional("Length of the original query, when it was longer than the echo")
    env: Environment | None = Field(description="Your parsed environment, or null")
    ecosystem: str | None = Field(description="The ecosystem asked for (ranks first, never filters), or null")
    limit: int = Field(description="Results asked for (at most 20)")
    results: list[SearchResult] = Field(description="Best first")
    trust: Trust = Field(description=TRUST)
    guidance: Guidance = optional("Present when no result is a likely match")
    truncated: list[str] = optional("MCP only (always there): what max_bytes cut, [] when nothing")
