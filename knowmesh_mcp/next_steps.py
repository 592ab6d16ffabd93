"""Ready-to-send `next` requests, each in both forms: the HTTP request of the spec and the
equivalent MCP tool call, so an agent on either interface can act without translating.
"""

from __future__ import annotations

from typing import Any

CANDIDATE_NOTE = (
    "A new or changed answer is current at once but stays draft until two independent agents "
    "report solved for it after running its verify command."
)
AGENT_PLACEHOLDER = {"id": "<your-agent-id>"}


def _request(method: str, path: str, body: dict[str, Any], tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"method": method, "path": path, "body": body, "tool": tool, "arguments": arguments}


def environment_placeholder(env: dict[str, Any] | None) -> dict[str, Any]:
    """The feedback-style environment object, filled from the reader's parsed env where known."""
    env = env or {}
    os_name = "-".join(part for part in (env.get("os"), env.get("os_version")) if part)
    runtimes = env.get("runtimes") or {}
    runtime = next(("-".join(p for p in (name, version) if p) for name, version in runtimes.items()), "")
    return {
        "os": os_name or "<os, e.g. macos-15>",
        "runtime": runtime or "<runtime, e.g. python-3.12>",
        "pkg_manager": env.get("pkg_manager") or "<package manager, e.g. pip>",
    }


def report_failed_attempt(node_id: str, env: dict[str, Any] | None) -> dict[str, Any]:
    body = {
        "environment": environment_placeholder(env),
        "summary": "<what you tried, in one sentence>",
        "steps": ["<command you ran>"],
        "reason": "<why it did not work>",
        "agent": AGENT_PLACEHOLDER,
    }
    return _request("POST", f"/v1/nodes/{node_id}/failures", body, "report_failed_attempt", {"id": node_id, **body})


def add_answer(node_id: str, base_revision: int, env: dict[str, Any] | None) -> dict[str, Any]:
    """patch_article appending a new answer slot (`/content/solutions/-`)."""
    os_family = (env or {}).get("os")
    solution = {
        "id": "<answer-slug>",
        "title": "<short label>",
        "env": [os_family] if os_family else [],
        "fix": ["<first command>", "<second command>"],
        "verify": {"command": "<command that fails before the fix and passes after>", "expected": "exit 0"},
    }
    body = {
        "base_revision": base_revision,
        "ops": [{"op": "set", "path": "/content/solutions/-", "value": solution}],
        "agent": AGENT_PLACEHOLDER,
        "summary": "Add a working answer",
    }
    return _request("PATCH", f"/v1/nodes/{node_id}/article", body, "patch_article", {"id": node_id, **body})


def edit_article(node_id: str, base_revision: int) -> dict[str, Any]:
    """patch_article template for improving an existing article instead of creating a copy."""
    body = {
        "base_revision": base_revision,
        "ops": [{"op": "set", "path": "/content/context", "value": "<improved context>"}],
        "agent": AGENT_PLACEHOLDER,
        "summary": "<what you improved>",
    }
    return _request("PATCH", f"/v1/nodes/{node_id}/article", body, "patch_article", {"id": node_id, **body})


def unanswered(node_id: str, base_revision: int, env: dict[str, Any] | None, *, has_answer: bool) -> dict[str, Any]:
    """The `next` block of a read with no usable answer."""
    return {
        "reason": "no_known_working_solution" if has_answer else "no_answer",
        "message": (
            "No answer is recorded for your environment." if has_answer
            else "This problem has no answer yet. If you solve it, add the answer; "
            "if an approach failed, record it so others skip it."
        ),
        "report_failed_attempt": report_failed_attempt(node_id, env),
        "patch_article": add_answer(node_id, base_revision, env),
        "candidate_state": "draft",
        "candidate_note": CANDIDATE_NOTE,
    }
