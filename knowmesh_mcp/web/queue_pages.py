"""Work waiting for people and agents, as pages: the review queue (`/review`) and the service
issues (`/issues`, `/issues/{n}` when a browser asks for HTML).

Data for `review.html`, `issues.html` and `issue.html`. The review page says how big the whole
queue is before it lists one page of it, explains each reason in a line, and folds the answers
nobody ever verified (a fresh install's starter corpus is almost all of them) into one paragraph
under one heading, so the items that need a person are not buried. Issue titles and bodies are
anyone's text: the templates escape them, bodies kept as lines.
"""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.services.issues import ISSUE_FIELDS
from knowmesh_mcp.services.review import REVIEW_MEANINGS, never_verified, review_page_query, review_summary
from knowmesh_mcp.web.shell import TEMPLATES, PageLink

ISSUE_STATES = {
    "open": "Not resolved yet",
    "closed": "Fixed: a maintainer closed it",
    "discarded": "Not accepted: a maintainer discarded it",
}
TEMPLATES.globals["ISSUE_STATES"] = ISSUE_STATES


# -- the review queue --------------------------------------------------------------------------


def review(queue: dict[str, Any]) -> dict[str, Any]:
    """One page of the queue: the items that need a person grouped by reason (in the queue's
    order), the never-verified answers folded, and links to the pages around it."""
    listed = [item for item in queue["items"] if not never_verified(item)]
    groups: dict[str, list[dict[str, Any]]] = {}
    for item in listed:
        groups.setdefault(item["reason"], []).append(item)
    pages: list[PageLink] = []
    if queue["offset"] > 0:
        pages.append(
            PageLink(
                "/review" + review_page_query(queue, max(0, queue["offset"] - queue["limit"])), "prev", "Previous page"
            )
        )
    if queue["next_offset"] is not None:
        pages.append(PageLink("/review" + review_page_query(queue, queue["next_offset"]), "next", "Next page"))
    return {
        "queue": queue,
        "queue_title": f"Review queue: {queue['reason']}" if queue.get("reason") else "Review queue",
        "summary": review_summary(queue),
        "groups": [{"reason": r, "items": i} for r, i in groups.items()],
        "unverified": [item for item in queue["items"] if never_verified(item)],
        "pages": pages,
        "meanings": REVIEW_MEANINGS,
    }


# -- service issues ----------------------------------------------------------------------------


def issues(listed: list[dict[str, Any]]) -> dict[str, Any]:
    return {"issues": listed, "open_count": sum(1 for issue in listed if issue.get("status") == "open")}


def issue(one: dict[str, Any]) -> dict[str, Any]:
    return {
        "issue": one,
        "details": [(name, one[name]) for name in ISSUE_FIELDS if one.get(name)],
        "resolution": one.get("resolution"),
    }
