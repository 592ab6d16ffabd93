"""The change feed (`GET /v1/changes`, protocol section 9): nodes written after a cursor, in write
order, each entry saying what a sync needs to decide what to fetch (revision, evidence, merges).
"""

from __future__ import annotations

import json
from typing import Any

from knowmesh_mcp.core.errors import bad_parameter
from knowmesh_mcp.core.evidence import best_answer_state
from knowmesh_mcp.core.limits import to_int
from knowmesh_mcp.services.cursors import decode_cursor, encode_cursor
from knowmesh_mcp.store import StatsRow, Store

MAX_FEED_PAGE = 1000
DEFAULT_FEED_PAGE = 100


class ChangeFeed:
    """`Mesh.feed`: the change feed."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def changes(self, *, since: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """GET /v1/changes: nodes written after a cursor, in write order (protocol section 9)."""
        limit = DEFAULT_FEED_PAGE if limit is None else limit
        if limit < 1:
            raise bad_parameter("limit", "limit must be a positive integer")
        limit = min(limit, MAX_FEED_PAGE)
        after = 0
        if since:
            after = to_int(
                decode_cursor(since, name="since")["after"],
                "since",
                code="invalid_cursor",
                what="a cursor this server issued",
            )
        rows = await self.store.changes_after(after, limit + 1)
        page = rows[:limit]
        # No changes: the cursor comes back unchanged, so a sync loop can simply keep it.
        last = page[-1][0] if page else after
        return {
            "changes": [_change_entry(row) for row in page],
            "next_cursor": encode_cursor({"after": str(last)}),
            "has_more": len(rows) > limit,
            "remaining": await self.store.count_changes_after(last) if len(rows) > limit else 0,  # for progress bars
        }


def _change_entry(row: Any) -> dict[str, Any]:
    (
        _,
        node_id,
        version,
        status,
        title,
        created_at,
        updated_at,
        revision,
        has_answer,
        stats_json,
        evidence_seq,
        merged,
        canonical,
    ) = row
    stats = [StatsRow(*values) for values in json.loads(stats_json)]
    states = {r.failure_state for r in stats}
    reasons = [
        reason
        for reason, hit in (
            ("failed_answer", "known_failed" in states),
            ("disputed", "disputed" in states),
            ("unsolved", not has_answer),
        )
        if hit
    ]
    change = "deprecated" if status == "deprecated" else "created" if revision == 1 else "updated"
    entry: dict[str, Any] = {
        "id": node_id,
        "change": change,
        "version": version,
        "status": status,
        "title": title,
        "updated_at": updated_at,
        "path": f"/v1/nodes/{node_id}",
        "revision": revision,
        "answer_state": best_answer_state([r.answer_state for r in stats]) if stats else "draft",
        "needs_review": bool(reasons),
        "evidence_seq": evidence_seq,  # the node's last feedback id: sync pulls new evidence when it grows
    }
    if reasons:
        entry["review_reasons"] = reasons
    if merged:
        entry["merged_from"] = merged  # a sync makes each of them answer with this node
    if canonical:
        entry["merged_into"] = canonical  # ... and this one with its canonical node, whichever comes later
    return entry
