"""Outcome evidence: failure states, answer states and success scores, derived from reports.

Pure functions over outcome reports; the store keeps the reports and the derived node_stats
rows. The rules are DESIGN.md's: a replay in time order per solution revision and environment
cluster, counting distinct agent ids; anonymous reports are recorded but are never a second
vote; `env_mismatch` never counts as a failure; `dangerous` is a failure of weight 3.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from knowmesh_mcp.core.rows import OutcomeReport, StatsRow

# Why a node is in the review queue, in the order the queue lists them.
ReviewReason = Literal[
    "failed_answer", "disputed", "unsolved", "failure_after_edit", "stale", "needs_second_verification"
]
REVIEW_REASONS: tuple[str, ...] = get_args(ReviewReason)

OUTCOMES = ("solved", "failed", "env_mismatch", "dangerous")
FAILING = frozenset({"failed", "dangerous"})
OUTCOME_WEIGHT = {"solved": 1.0, "failed": 1.0, "dangerous": 3.0}
PRIOR_SOLVED, PRIOR_FAILED = 2.0, 1.0
HALF_LIFE_DAYS = 180.0
STALE_AFTER_DAYS = 365.0
LOW_CONFIDENCE_BELOW = 3
Z = 1.96
# Answer states from best to worst: the node-wide value is the best of its answers.
ANSWER_STATES = ("verified", "draft", "disputed", "failed")


@dataclass(frozen=True)
class Report:
    outcome: str
    agent_id: str | None
    created_at: str  # ISO 8601 UTC, as the store writes it


@dataclass(frozen=True)
class Replay:
    failure_state: str  # ok | reported_failed | known_failed | disputed | cleared
    answer_state: str  # verified | draft | disputed | failed
    failed_agents: int  # distinct agents behind the current failure phase
    solved_agents: int  # distinct agents who ever reported solved


def _votes(named: set[str], anonymous: bool) -> int:
    """Distinct voters: named agents, or one anonymous voter when nobody named voted yet."""
    return len(named) if named else int(anonymous)


def _order(report: Report) -> tuple[str, int, str]:
    # Reports of the same instant are ordered by content, never by arrival, so the result of a
    # replay cannot depend on the order in which simultaneous reports were stored.
    return report.created_at, OUTCOMES.index(report.outcome), report.agent_id or ""


def replay(reports: Iterable[Report]) -> Replay:
    """The failure and answer state of one solution revision in one cluster."""
    state = "ok"
    failers: set[str] = set()
    failed_anonymously = False
    solvers: set[str] = set()  # since the answer became known-failed
    solved_ever: set[str] = set()
    for report in sorted(reports, key=_order):
        agent = report.agent_id
        if report.outcome == "solved":
            if agent:
                solved_ever.add(agent)
            if state == "known_failed":
                state, solvers = "disputed", ({agent} if agent else set())
            elif state == "disputed" and agent and agent not in solvers and solvers:
                state, failers, failed_anonymously = "cleared", set(), False
            elif state == "disputed" and agent and not solvers:
                solvers = {agent}
        elif report.outcome in FAILING:
            if state in ("ok", "cleared"):
                state, failers, failed_anonymously = "reported_failed", set(), False
            if agent:
                failers.add(agent)
            else:
                failed_anonymously = True
            if state == "disputed":
                state, solvers = "known_failed", set()
            elif state == "reported_failed" and len(failers) >= 2:
                state = "known_failed"
    if state == "known_failed":
        answer = "failed"
    elif state == "disputed":
        answer = "disputed"
    elif state in ("ok", "cleared") and len(solved_ever) >= 2:
        answer = "verified"
    else:
        answer = "draft"
    failed = _votes(failers, failed_anonymously) if state != "ok" and state != "cleared" else 0
    return Replay(failure_state=state, answer_state=answer, failed_agents=failed, solved_agents=len(solved_ever))


def wilson_lower_bound(successes: float, total: float, z: float = Z) -> float:
    if total <= 0:
        return 0.0
    p = successes / total
    denominator = 1 + z * z / total
    centre = p + z * z / (2 * total)
    margin = z * math.sqrt((p * (1 - p) + z * z / (4 * total)) / total)
    return max(0.0, (centre - margin) / denominator)


@dataclass(frozen=True)
class Score:
    solved: float
    failed: float
    sample_size: int
    success_score: float
    last_verified: str | None
    low_confidence: bool
    stale: bool


def _age_days(created_at: str, now: datetime) -> float:
    moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    return max(0.0, (now - moment).total_seconds() / 86400)


def score(reports: Iterable[Report], now: datetime) -> Score:
    """Wilson lower bound over decayed, weighted counts, with a prior of 2 solved and 1 failed."""
    solved = failed = 0.0
    samples = 0
    last_verified: str | None = None
    for report in reports:
        if report.outcome == "env_mismatch":
            continue
        weight = OUTCOME_WEIGHT[report.outcome] * 0.5 ** (_age_days(report.created_at, now) / HALF_LIFE_DAYS)
        samples += 1
        if report.outcome == "solved":
            solved += weight
            last_verified = max(last_verified or report.created_at, report.created_at)
        else:
            failed += weight
    value = wilson_lower_bound(solved + PRIOR_SOLVED, solved + failed + PRIOR_SOLVED + PRIOR_FAILED)
    stale = last_verified is None or _age_days(last_verified, now) > STALE_AFTER_DAYS
    return Score(
        round(solved, 4),
        round(failed, 4),
        samples,
        round(value, 4),
        last_verified,
        samples < LOW_CONFIDENCE_BELOW,
        stale,
    )


def best_answer_state(states: Iterable[str]) -> str:
    ranked = sorted(states, key=ANSWER_STATES.index)
    return ranked[0] if ranked else "draft"


def node_stats(
    reports: Iterable[OutcomeReport],
    current_revisions: dict[str, int],
    now: datetime,
) -> list[StatsRow]:
    """Every node_stats row of one node from its reports.

    Rows per solution revision and cluster, a global row per solution revision (cluster ''),
    and the node-wide aggregate over the current answers (solution '' and revision 0), per
    cluster and global.
    """
    groups: dict[tuple[str, int, str], list[Report]] = {}
    for reported in reports:
        report = Report(reported.outcome, reported.agent_id, reported.created_at)
        solution_id, revision, cluster = reported.solution_id, reported.solution_revision, reported.cluster
        keys = [(solution_id, revision, cluster), (solution_id, revision, "")]
        if current_revisions.get(solution_id) == revision:
            keys += [("", 0, cluster), ("", 0, "")]
        for key in keys:
            groups.setdefault(key, []).append(report)
    rows = []
    for (solution_id, revision, cluster), group in sorted(groups.items()):
        states = replay(group)
        figures = score(group, now)
        rows.append(
            StatsRow(
                solution_id=solution_id,
                solution_revision=revision,
                cluster=cluster,
                solved=figures.solved,
                failed=figures.failed,
                sample_size=figures.sample_size,
                success_score=figures.success_score,
                failure_state=states.failure_state,
                answer_state=states.answer_state,
                solved_agents=states.solved_agents,
                failed_agents=states.failed_agents,
                last_verified=figures.last_verified,
            )
        )
    return rows


class Evidence:
    """The node_stats rows of one node, looked up the way reads need them."""

    def __init__(self, rows: Iterable[StatsRow] = ()):
        self.rows = {(r.solution_id, r.solution_revision, r.cluster): r for r in rows}

    def in_cluster(self, solution_id: str, revision: int, cluster: str) -> StatsRow | None:
        return self.rows.get((solution_id, revision, cluster))

    def solution_state(self, solution_id: str, revision: int, cluster: str | None) -> str:
        """answer_state of one answer: in the reader's cluster, else the best over all clusters."""
        if cluster is not None:
            row = self.in_cluster(solution_id, revision, cluster)
            return row.answer_state if row else "draft"
        states = [r.answer_state for (s, v, c), r in self.rows.items() if s == solution_id and v == revision and c]
        return best_answer_state(states)

    def stats(self, solution_id: str, revision: int, cluster: str | None) -> StatsRow | None:
        """The row for a cluster, falling back to the global row when the cluster has none."""
        if cluster:
            row = self.in_cluster(solution_id, revision, cluster)
            if row is not None:
                return row
        return self.in_cluster(solution_id, revision, "")


def stats_view(row: StatsRow | None, now: datetime) -> dict[str, object]:
    """The `stats` block of a read: the prior alone when nothing was reported."""
    if row is None:
        prior = wilson_lower_bound(PRIOR_SOLVED, PRIOR_SOLVED + PRIOR_FAILED)
        return {
            "success_score": round(prior, 4),
            "sample_size": 0,
            "solved": 0.0,
            "failed": 0.0,
            "low_confidence": True,
            "last_verified": None,
            "stale": True,
        }
    stale = row.last_verified is None or _age_days(row.last_verified, now) > STALE_AFTER_DAYS
    return {
        "success_score": row.success_score,
        "sample_size": row.sample_size,
        "solved": row.solved,
        "failed": row.failed,
        "low_confidence": row.sample_size < LOW_CONFIDENCE_BELOW,
        "last_verified": row.last_verified,
        "stale": stale,
    }
