"""Each answer's evidence in words: "worked for 3 agents on macos · python 3 · pip, failed for 1".

A read serves one evidence row per answer (the reader's cluster, else all clusters together),
which is right for an agent with an environment but tells a person little. The words here
are derived per environment cluster from the node's outcome reports by the very function
that derives the stored node_stats (`evidence.node_stats`), over the same reports (unproven
ones left out, as the store leaves them out), so the words cannot disagree with the states
the API serves. Pure: reports in, sentences out (plain text; the caller escapes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from knowmesh_mcp.core.evidence import node_stats
from knowmesh_mcp.core.rows import OutcomeReport, StatsRow

STATE_WORDS = {"verified": "verified there", "failed": "known to fail there", "disputed": "disputed there"}


@dataclass(frozen=True)
class AnswerEvidence:
    """What the reports say about one answer revision."""

    lines: list[str]  # one sentence per environment cluster, most evidence first
    earlier: int  # reports on earlier revisions of the answer (they do not count for this one)
    uncounted: int  # reports on this revision that are no vote (unproven on a mesh with auth on)


def where(cluster: str) -> str:
    """`macos|python-3|pip` as `macos · python 3 · pip`; an empty part is left out."""
    parts = [part.replace("-", " ") for part in cluster.split("|") if part]
    return " · ".join(parts) if parts else "an unnamed environment"


def agents(count: int) -> str:
    return f"{count} agent" + ("" if count == 1 else "s")


def sentence(row: StatsRow) -> str:
    solved, failed = row.solved_agents, row.failed_agents
    place = where(row.cluster)
    if solved and failed:
        text = f"worked for {agents(solved)} on {place}, failed for {failed}"
    elif solved:
        text = f"worked for {agents(solved)} on {place}"
    elif failed:
        text = f"failed for {agents(failed)} on {place}"
    else:
        text = f"reports from {place} that count neither way (the environment did not match, or a failure was cleared)"
    state = STATE_WORDS.get(row.answer_state)
    return f"{text} ({state})" if state else text


def answers_evidence(
    reports: Iterable[dict[str, Any]], revisions: dict[str, int], now: datetime | None = None
) -> dict[str, AnswerEvidence]:
    """{answer id: its evidence} for the answers of `revisions` ({id: current revision}), from
    the node's feedback rows as `Mesh.outcomes.list_feedback` returns them."""
    counted: list[OutcomeReport] = []
    earlier = dict.fromkeys(revisions, 0)
    uncounted = dict.fromkeys(revisions, 0)
    for report in reports:
        solution, revision = report.get("solution_id"), report.get("solution_revision")
        if solution not in revisions:
            continue
        if revision != revisions[solution]:
            earlier[solution] += 1
        elif report.get("proof") == "unproven":
            uncounted[solution] += 1
        else:
            counted.append(
                OutcomeReport(
                    solution,
                    revision,
                    report["cluster"],
                    report["outcome"],
                    report.get("agent_id"),
                    report["created_at"],
                )
            )
    rows = node_stats(counted, revisions, now or datetime.now(UTC))
    found: dict[str, AnswerEvidence] = {}
    for solution, revision in revisions.items():
        mine = [
            row for row in rows if row.solution_id == solution and row.solution_revision == revision and row.cluster
        ]
        mine.sort(key=lambda row: (-(row.solved_agents + row.failed_agents), row.cluster))
        found[solution] = AnswerEvidence([sentence(row) for row in mine], earlier[solution], uncounted[solution])
    return found
