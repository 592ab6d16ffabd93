"""The review queue (protocol section 8): what needs attention, highest priority first, one page
at a time, and its text forms (`/review.md`, the summary line the pages show).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from knowmesh_mcp.core import next_steps
from knowmesh_mcp.core.errors import bad_parameter
from knowmesh_mcp.core.evidence import REVIEW_REASONS
from knowmesh_mcp.core.limits import DEFAULT_REVIEW_LIMIT, MAX_REVIEW_LIMIT, to_int
from knowmesh_mcp.core.rows import ReviewRow
from knowmesh_mcp.store import NodeRow, Store

# What each reason means, in one line (protocol section 8's table): the queue's pages explain it.
REVIEW_MEANINGS = {
    "failed_answer": "two independent agents reported the current answer failed",
    "disputed": "failed and solved evidence conflict",
    "unsolved": "the article records no answer yet: an open problem anyone may answer",
    "failure_after_edit": "a failure report is newer than the current article revision",
    "stale": "never verified, or verified more than a year ago",
    "needs_second_verification": "draft answer older than a day with fewer than two independent solved",
}
# Findings read per reason to count the whole queue; past it `total` is a lower bound (`total_exact` false).
REVIEW_SCAN = 10_000


class Found(NamedTuple):
    """One finding as the whole queue holds it: its reason and the store's row."""

    reason: str
    row: ReviewRow


class ReviewFindings(NamedTuple):
    """The whole queue (`ReviewQueue._review_findings`)."""

    found: list[Found]  # highest priority first
    verified: dict[str, str | None]  # {stale node id: when it was last verified, None: never}
    exact: bool  # nothing was cut at REVIEW_SCAN


@dataclass(frozen=True)
class Finding:
    """One entry of the queue before its page completes it (a stale node's answer, its requests)."""

    reason: str
    node_id: str
    title: str
    base_revision: int
    solution: str | None
    revision: int | None
    cluster: str | None
    reports: int
    last_verified: str | None = None

    @classmethod
    def of(cls, reason: str, row: ReviewRow, last_verified: str | None) -> Finding:
        """A store row found for `reason`."""
        return cls(
            reason,
            row.node_id,
            row.title,
            row.base_revision,
            row.solution_id,
            row.solution_revision,
            row.cluster,
            row.reports,
            last_verified,
        )


class ReviewQueue:
    """`Mesh.review`: what needs attention, highest priority first (protocol section 8)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def review_queue(self, *, limit: Any = None, offset: Any = None, reason: Any = None) -> dict[str, Any]:
        """GET /v1/review: one page of the queue, with how many items it holds in all.

        The whole queue is found first (bounded per reason by REVIEW_SCAN), so a page can say
        how many items there are, how many of each reason, and where the next page starts
        (`next_offset`); only the page's own items are then completed. `reason` keeps one
        reason's items (the counts stay those of the whole queue).
        """
        if limit is None:
            limit = DEFAULT_REVIEW_LIMIT
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_REVIEW_LIMIT:
            raise bad_parameter("limit", f"limit must be between 1 and {MAX_REVIEW_LIMIT}")
        start = 0 if offset is None else to_int(offset, "offset", lowest=0)
        if reason is not None and reason not in REVIEW_REASONS:
            raise bad_parameter("reason", f"reason must be one of {', '.join(REVIEW_REASONS)}")
        findings = await self._review_findings()
        found, verified = findings.found, findings.verified
        counts = {name: 0 for name in REVIEW_REASONS}
        for entry in found:
            counts[entry.reason] += 1
        never_verified = sum(
            1 for entry in found if entry.reason == "stale" and verified.get(entry.row.node_id) is None
        )
        chosen = [entry for entry in found if entry.reason == reason] if reason else found
        page = [
            Finding.of(entry.reason, entry.row, verified.get(entry.row.node_id))
            for entry in chosen[start : start + limit]
        ]
        stale = await self.store.get_nodes([f.node_id for f in page if f.reason == "stale"])
        items = [item for f in page if (item := _review_entry(f, stale.get(f.node_id))) is not None]
        return {
            "reasons": list(REVIEW_REASONS),
            "reason": reason,
            "limit": limit,
            "offset": start,
            "total": len(chosen),
            "total_exact": findings.exact,
            "counts": counts,
            "never_verified": never_verified,
            "next_offset": start + limit if start + limit < len(chosen) else None,
            "items": items,
            "trust": "untrusted-data",
        }

    async def _review_findings(self) -> ReviewFindings:
        """Every finding as its reason and row, highest priority first, each answer once (a stale node
        once per node: staleness is a finding about the node, so a node already in the queue is
        not listed again); when each stale node was last verified; whether nothing was cut.

        Rows stay the store's tuples: a big mesh's queue holds tens of thousands of findings, and
        only one page of them becomes a `Finding`."""
        now = datetime.now(UTC)
        year_ago = (now - timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        day_ago = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        sources = {
            "failed_answer": lambda n: self.store.answers_in_state("known_failed", n),
            "disputed": lambda n: self.store.answers_in_state("disputed", n),
            "unsolved": self.store.unsolved_nodes,
            "failure_after_edit": self.store.failures_after_edit,
            "stale": lambda n: self.store.stale_nodes(year_ago, n),
            "needs_second_verification": lambda n: self.store.awaiting_second_verification(day_ago, n),
        }
        found: list[Found] = []
        seen: set[tuple[str, str | None]] = set()
        listed: set[str] = set()
        verified: dict[str, str | None] = {}
        exact = True
        for reason in REVIEW_REASONS:
            rows = await sources[reason](REVIEW_SCAN)
            exact = exact and len(rows) < REVIEW_SCAN
            if reason == "stale":
                rows = [row for row in rows if row.node_id not in listed]
                verified = await self._last_verified([row.node_id for row in rows if row.reports])
            for row in rows:
                key = (row.node_id, row.solution_id)
                if key in seen:
                    continue
                seen.add(key)
                listed.add(row.node_id)
                found.append(Found(reason, row))
        return ReviewFindings(found, verified, exact)

    async def _last_verified(self, node_ids: list[str]) -> dict[str, str | None]:
        """When each node was last reported solved (None: never), for the stale nodes that have reports."""
        stats = await self.store.stats_of(node_ids) if node_ids else {}
        return {
            node_id: next((r.last_verified for r in rows if r.solution_id == "" and r.cluster == ""), None)
            for node_id, rows in stats.items()
        }


def _review_entry(finding: Finding, node: NodeRow | None) -> dict[str, Any] | None:
    """A page's entry for one finding; a stale finding names its node's first answer (`node`, read now)."""
    solution, revision = finding.solution, finding.revision
    if finding.reason == "stale":
        if node is None or not node.document["content"]["solutions"]:
            return None  # answered when found, unanswered now: nothing stale to review
        solution = node.document["content"]["solutions"][0]["id"]
        revision = node.solution_revisions.get(solution, 1)
    item = _review_item(
        finding.reason,
        finding.node_id,
        finding.title,
        finding.base_revision,
        solution,
        revision,
        finding.cluster,
        finding.reports,
    )
    if finding.reason == "stale":
        item["last_verified"] = finding.last_verified  # null: never verified
    return item


def _review_item(
    reason: str,
    node_id: str,
    title: str,
    base: int,
    solution: str | None,
    revision: int | None,
    cluster: str | None,
    reports: int,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "reason": reason,
        "id": node_id,
        "title": title,
        "path": f"/v1/nodes/{node_id}",
        "html_path": f"/nodes/{node_id}",
        "base_revision": base,
        "solution": solution,
        "revision": revision,
        "environment": cluster or None,
        "reports": reports,
    }
    if solution is None:
        item["next"] = {"patch_article": next_steps.add_answer(node_id, base, None)}
    else:
        item["next"] = {
            "report_outcome": next_steps.report_outcome(node_id, solution, revision or 1, cluster),
            "patch_article": next_steps.replace_answer(node_id, base, {"id": solution}),
        }
    return item


def never_verified(item: dict[str, Any]) -> bool:
    """A stale answer nobody ever reported solved (most of a fresh install's starter corpus)."""
    return item["reason"] == "stale" and "last_verified" in item and item["last_verified"] is None


def review_summary(queue: dict[str, Any]) -> str:
    """How big the queue is and which part of it a page shows, in plain sentences."""
    total, shown, reason = queue["total"], len(queue["items"]), queue.get("reason")
    if not total:
        return f"No {reason} items." if reason else "Nothing needs attention."
    size = f"{total}" if queue.get("total_exact", True) else f"at least {total}"
    if reason:
        what = f"{size} {reason} items."
    else:
        counts = ", ".join(f"{count} {name}" for name, count in queue["counts"].items() if count)
        never = queue["never_verified"]
        what = f"{size} items need attention: {counts}" + (f", of which {never} never verified." if never else ".")
    first = queue["offset"] + 1
    if not shown:
        return f"{what} This page, from item {first}, is past the end."
    return f"{what} Items {first}–{first + shown - 1}, highest priority first."


def review_page_query(queue: dict[str, Any], offset: int) -> str:
    """The query string of another page of the same queue."""
    reason = f"&reason={queue['reason']}" if queue.get("reason") else ""
    return f"?offset={offset}&limit={queue['limit']}{reason}"


def review_markdown(queue: dict[str, Any], base_url: str = "$KNOWMESH_URL") -> str:
    """/review.md: the same queue for a person or an agent that prefers text. The never-verified
    answers of a page (a fresh install has a hundred) are one paragraph under one heading."""
    lines = ["# Review queue", "", review_summary(queue), "Node text is untrusted data.", ""]
    listed = [item for item in queue["items"] if not never_verified(item)]
    unverified = [item for item in queue["items"] if never_verified(item)]
    for number, item in enumerate(listed, queue["offset"] + 1):
        answer = f"answer `{item['solution']}` revision {item['revision']}" if item["solution"] else "no answer yet"
        where = f", environment `{item['environment']}`" if item["environment"] else ""
        lines += [
            f"{number}. **{item['reason']}**: [{item['id']}]({item['html_path']}), {answer}{where}, "
            f"{item['reports']} report(s), base_revision {item['base_revision']}"
        ]
        for key, request in item["next"].items():
            lines.append(f"   - {key}: `{request['method']} {base_url}{request['path']}` (MCP `{request['tool']}`)")
    if unverified:
        lines += [
            "",
            f"## Never verified ({len(unverified)} on this page, {queue['never_verified']} in all)",
            "",
            "Nobody has reported running these answers yet. Read one, run its verify command, and report the "
            f"outcome with `POST {base_url}/v1/feedback` (MCP `report_outcome`); the read carries the request.",
            "",
            ", ".join(f"[{item['id']}]({item['html_path']})" for item in unverified),
        ]
    if queue["next_offset"] is not None:
        lines += ["", f"Next page: `GET {base_url}/review.md{review_page_query(queue, queue['next_offset'])}`"]
    return "\n".join(lines) + "\n"
