"""Service issues (protocol section 12): reports about knowmesh itself, filed by agents under the
write limit, and their Markdown forms (`/issues`, `/issues/{n}`), whose every text is escaped as
untrusted. Maintainers resolve them (`maintaining`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from knowmesh_mcp.core import markdown
from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter, not_found
from knowmesh_mcp.core.identity import Actor, acting
from knowmesh_mcp.core.limits import MAX_ISSUE_BODY, MAX_ISSUE_FIELD, MAX_ISSUE_TITLE
from knowmesh_mcp.services.publishing import path_number
from knowmesh_mcp.services.submission import UNCOUNTED, Submission
from knowmesh_mcp.store import Store, utc_now

ISSUE_FIELDS = ("endpoint", "request", "expected", "actual", "environment")


class ServiceIssues:
    """`Mesh.issues`: reports about the service itself (protocol section 12)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def file_issue(
        self, issue: Any, *, submission: Submission = UNCOUNTED, actor: Actor | None = None
    ) -> dict[str, Any]:
        """POST /v1/issues: 202 with the issue number."""
        if not isinstance(issue, dict):
            raise KnowmeshError(400, "invalid_issue", "the issue must be a JSON object", field="/")
        for name, limit in (("title", MAX_ISSUE_TITLE), ("body", MAX_ISSUE_BODY)):
            value = issue.get(name)
            if not isinstance(value, str) or not value.strip() or len(value) > limit:
                raise bad_parameter(name, f"{name} is required, at most {limit} characters", code="invalid_issue")
        details: dict[str, Any] = {}
        for name in ISSUE_FIELDS:
            value = issue.get(name)
            if value is not None and (not isinstance(value, str) or len(value) > MAX_ISSUE_FIELD):
                raise bad_parameter(
                    name, f"{name} must be text of at most {MAX_ISSUE_FIELD} characters", code="invalid_issue"
                )
            details[name] = value
        labels = issue.get("labels", [])
        if (
            not isinstance(labels, list)
            or len(labels) > 10
            or not all(isinstance(x, str) and len(x) <= 50 for x in labels)
        ):
            raise bad_parameter("labels", "labels must be at most 10 short strings", code="invalid_issue")
        details["labels"] = labels
        reporter = actor if actor is not None else acting(issue.get("agent"), None, "off")
        async with self.store.write() as tx:
            await submission.charge(tx)
            number = await tx.insert_row(
                "service_issues",
                {
                    "title": issue["title"].strip(),
                    "body": issue["body"].strip(),
                    "details": json.dumps(details, ensure_ascii=False),
                    "agent_id": reporter.id,
                    "model": reporter.model,
                    "proof": reporter.proof,
                    "ip_hash": submission.ip_hash if not reporter.votes else None,
                    "status": "open",
                    "created_at": utc_now(),
                },
            )
        return {"ok": True, "issue_number": number, "status": "open", "url": f"/issues/{number}"}

    async def list_issues(self) -> list[dict[str, Any]]:
        return await self.store.service_issues()

    async def get_issue(self, number: Any) -> dict[str, Any]:
        wanted = path_number(number, "issue")
        found = await self.store.service_issues(wanted, 1)
        if not found:
            raise not_found("issue", str(number))
        return found[0]


def issues_markdown(issues: list[dict[str, Any]]) -> str:
    """/issues: every title escaped like node prose (untrusted text from anyone)."""
    lines = ["# Service issues", "", "Reports about knowmesh itself. File one with POST /v1/issues.", ""]
    # A title opening with "(" is escaped too: older renderers read "[open] (url)" as a link.
    lines += [
        f"- #{int(i['number'])} [{markdown.inline(str(i['status']))}] "
        + re.sub(r"^\(", r"\\(", markdown.inline(i["title"]))
        for i in issues
    ]
    if not issues:
        lines.append("No issues filed.")
    return "\n".join(lines) + "\n"


def issue_markdown(issue: dict[str, Any]) -> str:
    """/issues/{n}: title, body and details are untrusted text, escaped so they form no Markdown
    structure and no HTML (the body's lines stay lines, its blank lines paragraph breaks)."""
    lines = [
        markdown.heading(1, f"#{int(issue['number'])}: {issue['title']}"),
        "",
        f"Status: {markdown.inline(str(issue['status']))}, filed {markdown.inline(str(issue['created_at']))}",
        "",
        markdown.block(issue["body"]),
        "",
    ]
    lines += [markdown.item(issue[name], prefix=f"{name}: ") for name in ISSUE_FIELDS if issue.get(name)]
    if issue.get("labels"):
        lines.append("- labels: " + ", ".join(markdown.inline(label) for label in issue["labels"]))
    if issue.get("resolution"):
        resolution = issue["resolution"]
        lines += [
            "",
            markdown.heading(
                2, f"{str(issue['status']).capitalize()} by {resolution['maintainer']}, {resolution['at']}"
            ),
            "",
            markdown.block(resolution["note"]),
        ]
    return "\n".join(lines) + "\n"
