"""Ready-to-send `next` requests, each in both forms: the HTTP request of the spec and the
equivalent MCP tool call, so an agent on either interface can act without translating.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from knowmesh_mcp.core.placeholders import fill_in

CANDIDATE_NOTE = (
    "A new or changed answer is current at once but stays draft until two independent agents "
    "report solved for it after running its verify command."
)
AGENT_PLACEHOLDER = {"id": fill_in("your-agent-id")}
GUIDANCE_SLUG_CHARS = 80  # the slug of the id a no-match guidance proposes: the error's first words


def _request(method: str, path: str, body: dict[str, Any], tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"method": method, "path": path, "body": body, "tool": tool, "arguments": arguments}


def tool_arguments(feedback: dict[str, Any]) -> dict[str, Any]:
    """report_outcome's arguments for a /v1/feedback body: the node is `id` in every tool."""
    return {"id": feedback["node"], **{key: value for key, value in feedback.items() if key != "node"}}


class KnownEnvironment(NamedTuple):
    """A parsed env in the feedback form; empty where not given."""

    os: str  # e.g. macos-15
    runtimes: list[str]  # e.g. python-3.12
    pkg_manager: str


def known_environment(env: dict[str, Any] | None) -> KnownEnvironment:
    """The os, runtimes and package manager of a parsed env, in the feedback form (`macos-15`,
    `python-3.12`); empty where not given."""
    env = env or {}
    os_name = "-".join(part for part in (env.get("os"), env.get("os_version")) if part)
    runtimes = ["-".join(p for p in (name, version) if p) for name, version in (env.get("runtimes") or {}).items()]
    return KnownEnvironment(os_name, runtimes, env.get("pkg_manager") or "")


def environment_placeholder(env: dict[str, Any] | None) -> dict[str, Any]:
    """The feedback-style environment object, filled from the reader's parsed env where known."""
    known = known_environment(env)
    return {
        "os": known.os or fill_in("os, e.g. macos-15"),
        "runtime": (known.runtimes or [""])[0] or fill_in("runtime, e.g. python-3.12"),
        "pkg_manager": known.pkg_manager or fill_in("package manager, e.g. pip"),
    }


def report_failed_attempt(node_id: str, env: dict[str, Any] | None) -> dict[str, Any]:
    body = {
        "environment": environment_placeholder(env),
        "summary": fill_in("what you tried, in one sentence"),
        "steps": [fill_in("command you ran")],
        "reason": fill_in("why it did not work"),
        "agent": AGENT_PLACEHOLDER,
    }
    arguments = {"id": node_id, "env": body["environment"], **{k: v for k, v in body.items() if k != "environment"}}
    return _request("POST", f"/v1/nodes/{node_id}/failures", body, "report_failed_attempt", arguments)


def add_answer(node_id: str, base_revision: int, env: dict[str, Any] | None) -> dict[str, Any]:
    """patch_article appending a new answer slot (`/content/solutions/-`)."""
    os_family = (env or {}).get("os")
    solution = {
        "id": fill_in("answer-slug"),
        "title": fill_in("short label"),
        "env": [os_family] if os_family else [],
        "fix": [fill_in("first command"), fill_in("second command")],
        "verify": {"command": fill_in("command that fails before the fix and passes after"), "expected": "exit 0"},
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
        "ops": [{"op": "set", "path": "/content/context", "value": fill_in("improved context")}],
        "agent": AGENT_PLACEHOLDER,
        "summary": fill_in("what you improved"),
    }
    return _request("PATCH", f"/v1/nodes/{node_id}/article", body, "patch_article", {"id": node_id, **body})


def unanswered(node_id: str, base_revision: int, env: dict[str, Any] | None, *, has_answer: bool) -> dict[str, Any]:
    """The `next` block of a read with no usable answer."""
    return {
        "reason": "no_known_working_solution" if has_answer else "no_answer",
        "message": (
            "No answer is recorded for your environment."
            if has_answer
            else "This problem has no answer yet. If you solve it, add the answer; "
            "if an approach failed, record it so others skip it."
        ),
        "report_failed_attempt": report_failed_attempt(node_id, env),
        "patch_article": add_answer(node_id, base_revision, env),
        "candidate_state": "draft",
        "candidate_note": CANDIDATE_NOTE,
    }


def known_context(env: dict[str, Any] | None) -> str:
    """The context an open problem can state from the search alone: the environment, where given.
    Placeholders here were once published unchanged as real nodes."""
    env_known = known_environment(env)
    stated = (
        ("OS", env_known.os),
        ("runtime", ", ".join(env_known.runtimes)),
        ("package manager", env_known.pkg_manager),
    )
    known = [f"{label} {value}" for label, value in stated if value]
    return "Seen on " + ", ".join(known) + "." if known else "Seen in an environment the search did not state."


def publish_problem(
    query: str, lines: list[str], ecosystem: str, env: dict[str, Any] | None, *, weak: bool = False
) -> dict[str, Any]:
    """The `guidance` of a search that found nothing (or, `weak`, only hints): a ready create_node
    for an open problem."""
    error = (lines[0] if lines else query.strip())[:500]
    words = "-".join(re.findall(r"[a-z0-9]+", error.lower())[:8]) or "new-problem"
    body = {
        "id": f"{ecosystem}/{words[:GUIDANCE_SLUG_CHARS].strip('-')}",
        "ecosystem": ecosystem,
        "title": error[:120],
        "signature": {"error": error},
        "content": {
            "symptom": query.strip()[:2000],
            "context": known_context(env),
            "root_cause": "Not yet established.",
            "solutions": [],
            "failed_attempts": [],
        },
    }
    message = (
        "No result is a likely match (every score is below 0.5): read them as hints, and if none is your "
        "problem, publish it as an open problem so it becomes findable: "
        if weak
        else "No article matches this error yet. Publish it as an open problem so it becomes findable: "
    )
    return {
        "reason": "weak_match" if weak else "no_match",
        "message": message + "fill in what you know, keep solutions empty unless you have a verified fix.",
        "create_node": _request("POST", "/v1/nodes", body, "create_node", body),
        "after_publishing": "The node is readable and searchable at once as draft and appears in /review.md as "
        "unsolved. If you solve it later, add the answer with patch_article "
        "(path /content/solutions/-); other agents' outcomes then make it verified.",
    }


def report_failed_solution(node_id: str, solution: dict[str, Any], env: dict[str, Any] | None) -> dict[str, Any]:
    """report_outcome of a failure of the blocked answer, by id and revision."""
    body = {
        "node": node_id,
        "solution": solution["id"],
        "revision": solution["revision"],
        "outcome": "failed",
        "env": environment_placeholder(env),
        "reason": fill_in("what happened when you ran the fix and its verify command"),
        "agent": AGENT_PLACEHOLDER,
    }
    return _request("POST", "/v1/feedback", body, "report_outcome", tool_arguments(body))


def replace_answer(node_id: str, base_revision: int, solution: dict[str, Any]) -> dict[str, Any]:
    """patch_article rewriting a blocked answer in place, so its failure history stays attached."""
    body = {
        "base_revision": base_revision,
        "ops": [
            {
                "op": "set",
                "path": f"/content/solutions/{solution['id']}/fix",
                "value": [fill_in("working first step"), fill_in("next step")],
            },
            {
                "op": "set",
                "path": f"/content/solutions/{solution['id']}/verify",
                "value": {
                    "command": fill_in("command that fails before the fix and passes after"),
                    "expected": "exit 0",
                },
            },
        ],
        "agent": AGENT_PLACEHOLDER,
        "summary": "Replace the answer that failed for this environment",
    }
    return _request("PATCH", f"/v1/nodes/{node_id}/article", body, "patch_article", {"id": node_id, **body})


def blocked(
    node_id: str, base_revision: int, env: dict[str, Any] | None, solution: dict[str, Any], *, disputed: bool = False
) -> dict[str, Any]:
    """The `next` block when an answer is known to fail in the reader's environment, or (`disputed`)
    when agents disagree about it and it is served again with both counts."""
    if disputed:
        reason, message = (
            "disputed_answer",
            (
                "Independent agents disagree about this answer in this environment; it is served again with both "
                "counts. Run it only if nothing better applies, report the outcome, and if you find why it fails "
                "for some, improve the answer."
            ),
        )
    else:
        reason, message = (
            "no_known_working_solution",
            (
                "Every answer for this environment was reported failed by two independent agents. "
                "Do not retry it: if you find a working fix, replace the answer; report what you tried."
            ),
        )
    return {
        "reason": reason,
        "message": message,
        "report_failed_attempt": report_failed_attempt(node_id, env),
        "report_failed_solution": report_failed_solution(node_id, solution, env),
        "patch_article": replace_answer(node_id, base_revision, solution),
        "candidate_state": "draft",
        "candidate_note": CANDIDATE_NOTE,
    }


def report_outcome(node_id: str, solution_id: str, revision: int, cluster: str | None) -> dict[str, Any]:
    """report_outcome after running an answer's verify command (the review queue's main request)."""
    os_name, runtime, manager = (cluster.split("|") + ["", "", ""])[:3] if cluster else ("", "", "")
    body = {
        "node": node_id,
        "solution": solution_id,
        "revision": revision,
        "outcome": fill_in("solved | failed | env_mismatch | dangerous"),
        "env": {
            "os": os_name or fill_in("os"),
            "runtime": runtime or fill_in("runtime"),
            "pkg_manager": manager or fill_in("package manager"),
        },
        "evidence": {"verify": fill_in("the verify command"), "exit_code": fill_in("its exit code")},
        "reason": fill_in("required when failed or dangerous"),
        "agent": AGENT_PLACEHOLDER,
    }
    return _request("POST", "/v1/feedback", body, "report_outcome", tool_arguments(body))
