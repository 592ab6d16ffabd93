"""What every write shares: the 400 of an invalid document, the one-answer-per-scope rule,
behaviour hashes, checks of a node id, a number from a URL path, an author and a summary, and a
validated document prepared for the store (computed outside the write transaction).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from knowmesh_mcp.core.environment import describe_scope, scopes_overlap, solution_scope
from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter, not_found
from knowmesh_mcp.core.identity import Actor, acting
from knowmesh_mcp.core.limits import MAX_CONFLICTS, to_int
from knowmesh_mcp.core.model import InvalidNode, NodeDocument, check_node_id, validate_node
from knowmesh_mcp.core.normalize import quoted_values, signature_hash
from knowmesh_mcp.core.placeholders import placeholder_problems
from knowmesh_mcp.search.query import index_row
from knowmesh_mcp.store import NewNode, SearchRow

MAX_SUMMARY = 500


def invalid_node_error(error: InvalidNode) -> KnowmeshError:
    problems = [p.model_dump() for p in error.problems]
    first = problems[0]
    return KnowmeshError(
        400,
        "invalid_node",
        f"{first['field']}: {first['message']}"
        + (f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""),
        field=first["field"],
        problems=problems,
    )


def require_node_id(node_id: str) -> str:
    problems = check_node_id(node_id)
    if problems:
        raise KnowmeshError(400, "invalid_id", problems[0].message, field="id", id=str(node_id)[:200])
    return node_id


def path_number(value: Any, what: str) -> int:
    """A number taken from a URL path (a dedupe task's, an issue's): anything that is not one of
    ours (or past 64 bits) is a 404 naming `what`."""
    try:
        return to_int(value, what, lowest=1)
    except KnowmeshError:
        raise not_found(what, str(value)[:40]) from None


def behavior_hash(solution: dict[str, Any]) -> str:
    """What a solution does: its fix steps and verify block. Metadata edits leave it unchanged."""
    verify = solution["verify"]
    behavior = "\x1e".join([*solution["fix"], "\x1d", verify["command"], verify.get("expected") or ""])
    return hashlib.sha256(behavior.encode("utf-8")).hexdigest()


def check_overlaps(document: NodeDocument) -> None:
    """At most one answer per environment scope: 409 overlapping_answer otherwise."""
    node_environment = document.signature.environment
    scoped = [(s.id, solution_scope(s.env, node_environment)) for s in document.content.solutions]
    conflicts: list[dict[str, list[Any]]] = []
    for i, (first_id, first) in enumerate(scoped):
        for second_id, second in scoped[i + 1 :]:
            if scopes_overlap(first, second):
                conflicts.append(
                    {
                        "solutions": [first_id, second_id],
                        "scopes": [describe_scope(first), describe_scope(second)],
                    }
                )
                if len(conflicts) == MAX_CONFLICTS:
                    break
        if len(conflicts) == MAX_CONFLICTS:
            break  # the first few say what to fix; the count of answers is bounded anyway
    if conflicts:
        pair = conflicts[0]["solutions"]
        raise KnowmeshError(
            409,
            "overlapping_answer",
            f"solutions {pair[0]!r} and {pair[1]!r} could both apply on one machine; one answer per "
            "environment: merge them, or give them disjoint OS families or runtime version ranges",
            conflicting_answers=conflicts,
        )


def author_of(agent: Any, actor: Actor | None) -> Actor:
    """The author of an edit or a vote: the adapter's actor, else the body's agent as claimed (a
    personal mesh). It needs an id: the author of record and, later, the voter."""
    author = actor if actor is not None else acting(agent, None, "off")
    if author.id is None:
        raise bad_parameter(
            "agent", 'agent.id is required: a stable id for you, e.g. {"id": "agent-a1"}', code="missing_agent"
        )
    return author


def check_summary(summary: Any) -> str:
    if not isinstance(summary, str) or not summary.strip():
        raise bad_parameter(
            "summary", "summary is required: one line saying what the edit changes", code="missing_summary"
        )
    if len(summary) > MAX_SUMMARY:
        raise bad_parameter("summary", f"summary must be at most {MAX_SUMMARY} characters")
    return summary.strip()


def prepare(raw: Any) -> Prepared:
    """Validate a raw document (400 invalid_node, 409 overlapping_answer) and compute its write.

    What an agent publishes or edits must not hold our guidance's fill-ins (`placeholders`); import
    and sync take documents as they are, so an older mesh still round-trips."""
    try:
        document = validate_node(raw)
    except InvalidNode as error:
        unwalkable = any(
            p.rule in {"type", "json_bound", "max_size"} for p in error.problems
        )  # too deep or big to walk
        raise invalid_node_error(
            InvalidNode(error.problems + ([] if unwalkable else placeholder_problems(raw)))
        ) from None
    problems = placeholder_problems(raw)
    if problems:
        raise invalid_node_error(InvalidNode(problems))
    check_overlaps(document)
    return Prepared.of(document)


async def prepare_off_loop(raw: Any) -> Prepared:
    """`prepare` in a worker thread: validating, normalizing and indexing a document of up to
    200,000 characters is CPU work that must not stall every other request."""
    return await asyncio.to_thread(prepare, raw)


@dataclass
class Prepared:
    """A validated document with everything its insert needs, computed outside the transaction."""

    document: NodeDocument
    body: dict[str, Any]
    body_json: str
    version: str
    signature_hash: str
    quoted_values: list[str]
    index: SearchRow | None = None  # the search-index rows, when computed ahead (an import's worker process)

    @classmethod
    def of(cls, document: NodeDocument) -> Prepared:
        body, body_json, version = document.snapshot()
        return cls(
            document=document,
            body=body,
            body_json=body_json,
            version=version,
            signature_hash=signature_hash(document.signature.error),
            quoted_values=quoted_values(document.signature.error),
        )

    def new_node(self, *, kind: str, agent: dict[str, Any] | None, summary: str, proof: str = "claimed") -> NewNode:
        solutions = self.body["content"]["solutions"]
        return NewNode(
            id=self.document.id,
            ecosystem=self.document.ecosystem,
            status=self.document.status,
            title=self.document.title,
            version=self.version,
            document_json=self.body_json,
            solution_revisions={s["id"]: 1 for s in solutions},
            solution_hashes={s["id"]: behavior_hash(s) for s in solutions},
            has_answer=bool(solutions),
            signature_hash=self.signature_hash,
            quoted_values=self.quoted_values,
            index=self.index if self.index is not None else index_row(self.body),
            revision_id="rev_" + secrets.token_hex(12),
            kind=kind,
            agent_id=(agent or {}).get("id"),
            model=(agent or {}).get("model"),
            summary=summary,
            changes_json=json.dumps([{"op": "create", "path": "", "value": None}]),
            agent_proof=proof,
        )
