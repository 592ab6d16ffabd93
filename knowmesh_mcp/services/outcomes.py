"""Outcome reports (protocol section 4; spec trust.md): what happened when an agent ran an answer,
and the evidence (node_stats) it derives, written in one transaction with the report.

The rules themselves are pure (`evidence`); `OutcomeReporting` checks a report, stores it and
derives the node's stats there. `node_answers` and `current_revisions` are what every write of
evidence reads first (failed attempts and sync too).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from knowmesh_mcp.core import next_steps
from knowmesh_mcp.core.environment import Environment, env_from_mapping
from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter, not_found
from knowmesh_mcp.core.evidence import OUTCOMES, node_stats
from knowmesh_mcp.core.identity import PROVEN, Actor, acting
from knowmesh_mcp.core.limits import MAX_NOTE, to_int
from knowmesh_mcp.core.model import canonical_json
from knowmesh_mcp.services.publishing import behavior_hash, require_node_id
from knowmesh_mcp.services.submission import UNCOUNTED, Submission
from knowmesh_mcp.store import DuplicateRow, StatsRow, Store, Writer, utc_now

FEEDBACK_PAGE = 500


class NodeAnswers(NamedTuple):
    """What a write of evidence reads of a node first (`node_answers`)."""

    revision: int  # the current article revision
    document: dict[str, Any]  # the current document
    behaviours: dict[str, dict[str, int]]  # {solution id: {behaviour hash: its revision}}


@dataclass(frozen=True)
class OutcomeReport:
    """An outcome report checked on its own; the write then checks it against the node."""

    outcome: str
    node_id: str
    solution_id: str
    environment: Environment
    reporter: Actor
    evidence: dict[str, Any]
    exit_code: Any  # as sent: stored only when it is a whole number
    reason: str | None
    note: str | None
    revision_given: bool  # else the answer's current revision is the one reported on
    revision: Any
    node_version: Any


class OutcomeReporting:
    """`Mesh.outcomes`: outcome reports and the evidence they derive (protocol section 4)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def report_outcome(
        self, report: Any, *, submission: Submission = UNCOUNTED, actor: Actor | None = None
    ) -> dict[str, Any]:
        """POST /v1/feedback: record what happened when an agent ran an answer. 202 when accepted."""
        checked = checked_report(report, actor)
        node_id = checked.node_id
        async with self.store.write() as tx:
            await submission.charge(tx)
            answers = await node_answers(tx, node_id)
            if checked.solution_id not in answers.behaviours:
                raise not_found("solution", checked.solution_id)
            current = current_revisions(answers.document, answers.behaviours)
            revision = await self._reported_revision(checked, answers.behaviours, current)
            cluster = checked.environment.cluster()
            # The stored rows are the state before this report (the write lock is held).
            before = {_stats_key(r): r for r in (await self.store.stats_of([node_id])).get(node_id, [])}
            try:
                report_id = await tx.insert_row("feedback", _feedback_row(checked, revision, cluster, submission))
                await tx.touch_node(node_id)  # new evidence is a change: the feed and sync see it
            except DuplicateRow:
                raise KnowmeshError(
                    409,
                    "duplicate_report",
                    "this agent already reported on this answer revision in this environment; one agent is one vote",
                ) from None
            after = await self._stats_rows(tx, node_id, current)
            await tx.replace_stats(node_id, after)
        key = (checked.solution_id, revision, cluster)
        # An unproven report is no evidence: its answer may have no stats row at all.
        now_row = next((r for r in after if _stats_key(r) == key), None) or StatsRow(
            checked.solution_id, revision, cluster, 0.0, 0.0, 0, 0.0, "ok", "draft", 0, 0, None
        )
        return _outcome_body(checked, report_id, revision, cluster, answers.revision, before.get(key), now_row)

    async def _reported_revision(
        self, checked: OutcomeReport, known: dict[str, dict[str, int]], current: dict[str, int]
    ) -> int:
        """The answer revision a report is about (the current one unless it names another), and its
        node version checked: both must be ones this node has had."""
        revision = checked.revision if checked.revision_given else current.get(checked.solution_id)
        if revision is None:
            raise bad_parameter(
                "revision", "this answer was removed: give the revision you ran", code="invalid_feedback"
            )
        if (
            isinstance(revision, bool)
            or not isinstance(revision, int)
            or revision not in known[checked.solution_id].values()
        ):
            raise not_found("revision", str(revision))
        version = checked.node_version
        if version is not None and (
            not isinstance(version, str) or await self.store.get_version(checked.node_id, version) is None
        ):
            raise not_found("version", str(version))
        return revision

    async def list_feedback(self, node_id: str, *, after: Any = None, limit: Any = None) -> dict[str, Any]:
        """GET /v1/nodes/{id}/feedback: a node's outcome reports in order, without addresses (sync copies them)."""
        require_node_id(node_id)
        if await self.store.get_node(node_id) is None:
            raise not_found("node", node_id)
        first = _count_param("after", after, 0, 0)
        size = min(_count_param("limit", limit, FEEDBACK_PAGE, 1), FEEDBACK_PAGE)
        rows = await self.store.feedback_after(node_id, first, size + 1)
        page = [{**row, "proven": row["proof"] in PROVEN} for row in rows[:size]]
        return {
            "id": node_id,
            "feedback": page,
            "next_after": page[-1]["id"] if page else first,
            "has_more": len(rows) > size,
        }

    @staticmethod
    async def _stats_rows(tx: Writer, node_id: str, current: dict[str, int]) -> list[StatsRow]:
        return node_stats(await tx.feedback_of(node_id), current, datetime.now(UTC))


def checked_report(report: Any, actor: Actor | None) -> OutcomeReport:
    """A report's fields checked in the order the spec lists its errors (400 naming the field)."""
    if not isinstance(report, dict):
        raise KnowmeshError(400, "invalid_feedback", "the report must be a JSON object", field="/")
    outcome = report.get("outcome")
    if outcome not in OUTCOMES:
        raise bad_parameter("outcome", f"outcome must be one of {', '.join(OUTCOMES)}", code="invalid_outcome")
    node_id = report.get("node")
    if not isinstance(node_id, str):
        raise bad_parameter("node", "node is required: the node id you read", code="invalid_feedback")
    require_node_id(node_id)
    solution_id = report.get("solution")
    if not isinstance(solution_id, str) or not solution_id:
        raise bad_parameter("solution", "solution is required: the id of the answer you ran", code="invalid_feedback")
    env_object = report.get("env")
    environment = env_from_mapping(env_object if isinstance(env_object, dict) else {})
    reporter = actor if actor is not None else acting(report.get("agent"), None, "off")
    evidence = report.get("evidence")
    evidence_object: dict[str, Any] = evidence if isinstance(evidence, dict) else {}
    exit_code = evidence_object.get("exit_code")
    reason = report.get("reason") if isinstance(report.get("reason"), str) and report["reason"].strip() else None
    _check_outcome_rules(outcome, exit_code, reason, reporter, environment)
    note = report.get("note") if isinstance(report.get("note"), str) else None
    for name, text in (("note", note), ("reason", reason)):
        if text is not None and len(text) > MAX_NOTE:
            raise bad_parameter(name, f"{name} must be at most {MAX_NOTE} characters", code="invalid_feedback")
    return OutcomeReport(
        outcome=outcome,
        node_id=node_id,
        solution_id=solution_id,
        environment=environment,
        reporter=reporter,
        evidence=evidence_object,
        exit_code=exit_code,
        reason=reason,
        note=note,
        revision_given="revision" in report,
        revision=report.get("revision"),
        node_version=report.get("node_version"),
    )


def _check_outcome_rules(
    outcome: str, exit_code: Any, reason: str | None, reporter: Actor, environment: Environment
) -> None:
    """What each outcome requires: proof for solved, a reason for a failure, an agent and an
    environment for a failure vote."""
    if outcome == "solved" and (isinstance(exit_code, bool) or exit_code != 0):
        raise bad_parameter(
            "evidence.exit_code",
            "solved requires evidence.exit_code = 0: run the verify command first",
            code="invalid_feedback",
        )
    if outcome in ("failed", "dangerous") and reason is None:
        raise bad_parameter("reason", f"{outcome} requires reason: what happened", code="invalid_feedback")
    if outcome == "failed" and reporter.id is None:
        raise bad_parameter(
            "agent.id", "failed requires agent.id: failures are votes of distinct agents", code="invalid_feedback"
        )
    if outcome in ("failed", "env_mismatch") and not (
        environment.os or environment.runtimes or environment.pkg_manager
    ):
        raise bad_parameter("env", "give at least one of env.os, env.runtime, env.pkg_manager", code="invalid_feedback")


def _feedback_row(checked: OutcomeReport, revision: int, cluster: str, submission: Submission) -> dict[str, Any]:
    """The stored row of a report: the address's keyed hash only for an unproven reporter."""
    reporter, exit_code = checked.reporter, checked.exit_code
    return {
        "node_id": checked.node_id,
        "node_version": checked.node_version,
        "solution_id": checked.solution_id,
        "solution_revision": revision,
        "outcome": checked.outcome,
        "cluster": cluster,
        "environment": canonical_json(checked.environment.to_dict()),
        "agent_id": reporter.id,
        "model": reporter.model,
        "ip_hash": submission.ip_hash if not reporter.votes else None,
        "proof": reporter.proof,
        "reason": checked.reason,
        "note": checked.note,
        "evidence_hash": hashlib.sha256(canonical_json(checked.evidence).encode()).hexdigest()
        if checked.evidence
        else None,
        "exit_code": exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        "created_at": utc_now(),
    }


def _outcome_body(
    checked: OutcomeReport,
    report_id: int,
    revision: int,
    cluster: str,
    current_revision: int,
    old: StatsRow | None,
    now_row: StatsRow,
) -> dict[str, Any]:
    """The 202 body: the answer's state after the report, and `next` when this report blocked it."""
    body: dict[str, Any] = {
        "ok": True,
        "accepted": True,
        "id": report_id,
        "node": checked.node_id,
        "solution": checked.solution_id,
        "revision": revision,
        "outcome": checked.outcome,
        "cluster": cluster,
        "failure_state": now_row.failure_state,
        "answer_state": now_row.answer_state,
        "counts": {"failed_agents": now_row.failed_agents, "solved_agents": now_row.solved_agents},
        "anonymous": checked.reporter.id is None,
        "proven": checked.reporter.proven,
        "counted": checked.reporter.votes,  # false: kept and shown, never an independent vote
    }
    flipped = now_row.failure_state in ("known_failed", "disputed") and (
        old is None or old.failure_state != now_row.failure_state
    )
    if flipped:
        body["next"] = next_steps.blocked(
            checked.node_id,
            current_revision,
            checked.environment.to_dict(),
            {"id": checked.solution_id, "revision": revision},
            disputed=now_row.failure_state == "disputed",
        )
    return body


def _count_param(name: str, value: Any, default: int, lowest: int) -> int:
    if value is None or value == "":
        return default
    return to_int(value, name, lowest=lowest)


def _stats_key(row: StatsRow) -> tuple[str, int, str]:
    return row.solution_id, row.solution_revision, row.cluster


async def node_answers(tx: Writer, node_id: str) -> NodeAnswers:
    """The current revision and document of a node and every behaviour of every answer, or 404."""
    state = await tx.node_for_edit(node_id)
    if state is None:
        raise not_found("node", node_id)
    return NodeAnswers(state.revision, state.document, await tx.solution_behaviours(node_id))


def current_revisions(document: dict[str, Any], known: dict[str, dict[str, int]]) -> dict[str, int]:
    """{solution id: the revision of its current behaviour}."""
    return {s["id"]: known.get(s["id"], {}).get(behavior_hash(s), 1) for s in document["content"]["solutions"]}
