"""Failed attempts (protocol section 5): approaches an agent tried while no answer applied to its
machine, shared so the next agent does not repeat them, and archived (never deleted) once a
published answer covers their environment.
"""

from __future__ import annotations

import json
from typing import Any

from knowmesh_mcp.core.environment import Environment, env_from_mapping, scope_matches, solution_scope
from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter, not_found
from knowmesh_mcp.core.evidence import Evidence
from knowmesh_mcp.core.identity import Actor, acting, agent_object
from knowmesh_mcp.core.limits import MAX_STEPS, MAX_TEXT
from knowmesh_mcp.core.model import canonical_json
from knowmesh_mcp.services.outcomes import current_revisions, node_answers
from knowmesh_mcp.services.publishing import require_node_id
from knowmesh_mcp.services.reading import choose_answer, scoped_solutions
from knowmesh_mcp.services.submission import UNCOUNTED, Submission
from knowmesh_mcp.store import Store, Writer, utc_now

MAX_FAILED_REPORTS = 10_000  # failure reports one /failures read lists


class FailedAttempts:
    """`Mesh.failures`: shared failed approaches while no answer applies (protocol section 5)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def report_failed_attempt(
        self, node_id: str, attempt: Any, *, submission: Submission = UNCOUNTED, actor: Actor | None = None
    ) -> dict[str, Any]:
        """POST /v1/nodes/{id}/failures: record an approach that did not work, for the next agent."""
        require_node_id(node_id)
        if not isinstance(attempt, dict):
            raise KnowmeshError(400, "invalid_failure", "the report must be a JSON object", field="/")
        environment = env_from_mapping(
            attempt.get("environment") if isinstance(attempt.get("environment"), dict) else {}
        )
        if not (environment.os or environment.runtimes or environment.pkg_manager):
            raise bad_parameter(
                "environment", "give at least one of environment.os, .runtime, .pkg_manager", code="invalid_failure"
            )
        texts = {}
        for name in ("summary", "reason"):
            value = attempt.get(name)
            if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
                raise bad_parameter(name, f"{name} is required (at most {MAX_TEXT} characters)", code="invalid_failure")
            texts[name] = value.strip()
        steps = attempt.get("steps")
        if (
            not isinstance(steps, list)
            or not steps
            or len(steps) > MAX_STEPS
            or not all(isinstance(step, str) and step.strip() and len(step) <= MAX_TEXT for step in steps)
        ):
            raise bad_parameter("steps", f"steps must be 1 to {MAX_STEPS} commands you ran", code="invalid_failure")
        reporter = actor if actor is not None else acting(attempt.get("agent"), None, "off")
        async with self.store.write() as tx:
            await submission.charge(tx)
            answers = await node_answers(tx, node_id)
            document = answers.document
            current = current_revisions(document, answers.behaviours)
            # The stored rows are current: this transaction holds the write lock.
            evidence = Evidence((await self.store.stats_of([node_id])).get(node_id, []))
            scoped = scoped_solutions(document, current, evidence, environment)
            usable, _ = choose_answer(scoped, environment)
            if usable is not None:
                raise KnowmeshError(
                    409,
                    "answer_exists",
                    f"answer {usable['id']!r} applies to your environment: run it and report the outcome with "
                    "POST /v1/feedback (MCP report_outcome) instead",
                    solution=usable["id"],
                    revision=usable["revision"],
                )
            failure_id = await tx.insert_row(
                "failures",
                {
                    "node_id": node_id,
                    "environment": canonical_json(environment.to_dict()),
                    "cluster": environment.cluster(),
                    "summary": texts["summary"],
                    "steps": json.dumps([s.strip() for s in steps], ensure_ascii=False),
                    "reason": texts["reason"],
                    "agent_id": reporter.id,
                    "model": reporter.model,
                    "proof": reporter.proof,
                    "ip_hash": submission.ip_hash if not reporter.votes else None,
                    "created_at": utc_now(),
                },
            )
        return {
            "ok": True,
            "accepted": True,
            "id": failure_id,
            "node": node_id,
            "cluster": environment.cluster(),
            "archived": False,
            "path": f"/v1/nodes/{node_id}/failures",
        }

    async def list_failures(self, node_id: str) -> dict[str, Any]:
        """GET /v1/nodes/{id}/failures: every shared failed approach, visible and archived."""
        require_node_id(node_id)
        if await self.store.get_node(node_id) is None:
            raise not_found("node", node_id)
        reports = [
            {
                key: row[key]
                for key in (
                    "id",
                    "solution_id",
                    "solution_revision",
                    "outcome",
                    "cluster",
                    "environment",
                    "reason",
                    "note",
                    "exit_code",
                    "created_at",
                )
            }
            | {"agent": agent_object({"id": row["agent_id"], "model": row["model"]}, row["proof"])}
            for row in await self.store.feedback_after(node_id, 0, MAX_FAILED_REPORTS)
            if row["outcome"] in ("failed", "dangerous")
        ]
        # Nothing is deleted: failed attempts answered since, and failure reports that later solved
        # reports disputed or cleared, stay listed (`archived`, and the answers' states, say what holds now).
        return {
            "id": node_id,
            "failures": await self.store.failures_of(node_id),
            "failed_reports": reports,
            "trust": "untrusted-data",
        }


async def archive_answered_failures(tx: Writer, node_id: str, document: dict[str, Any], revision_id: str) -> None:
    """Archive the failed attempts that a published answer now covers (never delete them)."""
    open_failures = await tx.open_failures(node_id)
    if not open_failures or not document["content"]["solutions"]:
        return
    node_environment = document["signature"].get("environment", [])
    scopes = [solution_scope(s.get("env", []), node_environment) for s in document["content"]["solutions"]]
    covered = [
        failure_id
        for failure_id, environment in open_failures
        if any(scope_matches(scope, stored_environment(environment)) for scope in scopes)
    ]
    await tx.archive_failures(covered, revision_id)


def stored_environment(environment: dict[str, Any]) -> Environment:
    """An Environment back from its stored `to_dict()` form."""
    return Environment(
        os=environment.get("os"),
        os_version=environment.get("os_version"),
        runtimes=dict(environment.get("runtimes") or {}),
        pkg_manager=environment.get("pkg_manager"),
        labels=tuple(environment.get("labels") or ()),
    )
