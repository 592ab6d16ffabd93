"""The read view of an article: answer selection by environment, field selection, `next`.

Pure functions over a stored document; the service feeds them rows from the store.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from . import next_steps
from .environment import Environment, match_rank, scope_matches, solution_scope
from .errors import KnowmeshError, bad_parameter

# ?fields= values of the spec, and the sections each one selects.
FIELD_SECTIONS: dict[str, tuple[str, ...]] = {
    "symptom": ("symptom",),
    "context": ("context",),
    "root_cause": ("root_cause",),
    "solutions": ("solutions",),
    "fix": ("solutions",),
    "verify": ("solutions",),
    "outcomes": ("outcomes",),
    "failed": ("failed_attempts",),
    "boundaries": ("boundaries",),
    "provenance": ("provenance",),
}
INCLUDES = ("alternatives", "archived_failures")
LIST_FIELDS = ("title", "ecosystem", "status", "updated_at", "signature", "path", "html_path")


def parse_list(value: str | list[str] | None, *, name: str, allowed: tuple[str, ...] | dict[str, Any]) -> list[str] | None:
    """A comma-separated parameter checked against its allowed values; None when absent."""
    if value is None:
        return None
    items = value if isinstance(value, list) else value.split(",")
    cleaned = [item.strip().lower() for item in items if item.strip()]
    unknown = [item for item in cleaned if item not in allowed]
    if unknown:
        raise bad_parameter(
            name, f"unknown {name} value(s) {', '.join(map(repr, unknown[:5]))}; allowed: {', '.join(allowed)}"
        )
    return cleaned


def sections_for(fields: list[str] | None) -> set[str] | None:
    if fields is None:
        return None
    return {section for field in fields for section in FIELD_SECTIONS[field]}


def stats_placeholder() -> dict[str, Any]:
    """The node-wide stats row before any evidence exists (filled by the evidence issue)."""
    return {
        "success_score": None,
        "sample_size": 0,
        "solved": 0,
        "failed": 0,
        "low_confidence": True,
        "last_verified": None,
        "stale": True,
    }


@dataclass(frozen=True)
class ReadRequest:
    env: Environment | None = None
    env_text: str | None = None
    solution: str | None = None
    fields: list[str] | None = None
    include: tuple[str, ...] = ()


def _select_solutions(
    document: dict[str, Any], revisions: dict[str, int], request: ReadRequest
) -> list[dict[str, Any]]:
    node_environment = document["signature"].get("environment", [])
    solutions = []
    for solution in document["content"]["solutions"]:
        scope = solution_scope(solution.get("env", []), node_environment)
        solutions.append(({**solution, "revision": revisions.get(solution["id"], 1), "answer_state": "draft"}, scope))
    if request.solution is not None:
        chosen = [s for s, _ in solutions if s["id"] == request.solution]
        if not chosen:
            raise KnowmeshError(
                404, "solution_not_found", f"node {document['id']!r} has no solution {request.solution!r}",
                field="solution", solutions=[s["id"] for s, _ in solutions],
            )
        return chosen
    if request.env is None:
        return [s for s, _ in solutions]
    env = request.env
    matching = [(match_rank(scope, env), s) for s, scope in solutions if scope_matches(scope, env)]
    matching.sort(key=lambda item: item[0], reverse=True)
    return [matching[0][1]] if matching else []


def article_view(
    *,
    document: dict[str, Any],
    version: str,
    status: str,
    revision: int,
    solution_revisions: dict[str, int],
    created_at: str,
    updated_at: str,
    request: ReadRequest,
) -> dict[str, Any]:
    """The JSON read of spec section 2 for one stored document."""
    node_id = document["id"]
    content = document["content"]
    has_answer = bool(content["solutions"])
    solutions = _select_solutions(document, solution_revisions, request)
    usable = bool(solutions)
    sections = sections_for(request.fields)

    view_content: dict[str, Any] = {}
    for key in ("symptom", "context", "root_cause"):
        if sections is None or key in sections:
            view_content[key] = content[key]
    if sections is None or "solutions" in sections:
        view_content["solutions"] = solutions
    elif "provenance" in sections:
        view_content["solutions"] = [
            {"id": s["id"], "revision": s["revision"], "provenance": s.get("provenance")} for s in solutions
        ]
    if "alternatives" in request.include and (sections is None or "solutions" in sections):
        view_content["alternatives"] = content.get("alternatives", [])
    if sections is None or "failed_attempts" in sections:
        withheld = has_answer and "archived_failures" not in request.include and bool(content["failed_attempts"])
        view_content["failed_attempts"] = [] if withheld else content["failed_attempts"]
        view_content["failed_attempts_archived"] = withheld
    if sections is None or "boundaries" in sections:
        view_content["boundaries"] = content.get("boundaries", [])

    body: dict[str, Any] = {
        "id": node_id,
        "ecosystem": document["ecosystem"],
        "title": document["title"],
        "status": status,
        "license": document["license"],
        "version": version,
        "revision": revision,
        "created_at": created_at,
        "updated_at": updated_at,
        "path": f"/v1/nodes/{node_id}",
        "html_path": f"/nodes/{node_id}",
        "trust": "untrusted-data",
        "has_answer": has_answer,
        "answer_state": "draft",
        "no_known_working_solution": has_answer and not usable and request.solution is None,
        "env": request.env.to_dict() if request.env else None,
        "signature": document["signature"],
        "content": view_content,
    }
    if sections is None or "outcomes" in sections:
        body["stats"] = stats_placeholder()
    if not usable and request.solution is None:
        body["next"] = next_steps.unanswered(
            node_id, revision, request.env.to_dict() if request.env else None, has_answer=has_answer
        )
    return body


def list_entry(row_document: dict[str, Any], *, status: str, updated_at: str, fields: list[str] | None) -> dict[str, Any]:
    node_id = row_document["id"]
    full = {
        "title": row_document["title"],
        "ecosystem": row_document["ecosystem"],
        "status": status,
        "updated_at": updated_at,
        "signature": row_document["signature"],
        "path": f"/v1/nodes/{node_id}",
        "html_path": f"/nodes/{node_id}",
    }
    chosen = fields if fields is not None else list(LIST_FIELDS)
    return {"id": node_id, **{key: full[key] for key in LIST_FIELDS if key in chosen}}


# What a bounded read drops first when over budget: least useful for fixing the error now.
BUDGET_CUTS: tuple[tuple[str, ...], ...] = (
    ("content", "alternatives"),
    ("content", "failed_attempts"),
    ("content", "boundaries"),
    ("signature", "aliases"),
    ("stats",),
    ("next", "report_failed_attempt"),
    ("content", "context"),
    ("content", "root_cause"),
)
MIN_BUDGET = 1024


def _size(body: dict[str, Any]) -> int:
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def fit_to_budget(body: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Drop the least useful parts until the JSON fits in `max_bytes`; `truncated` names each cut."""
    body = copy.deepcopy(body)
    cut: list[str] = []
    body["truncated"] = cut
    for path in BUDGET_CUTS:
        if _size(body) <= max_bytes:
            return body
        parent: Any = body
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and parent.get(path[-1]) not in (None, [], ""):
            del parent[path[-1]]
            cut.append("/".join(path))
    solutions = body.get("content", {}).get("solutions", [])
    for index in range(len(solutions) - 1, 0, -1):
        if _size(body) <= max_bytes:
            return body
        cut.append(f"content/solutions/{solutions.pop(index)['id']}")
    if _size(body) > max_bytes:
        _shorten_strings(body, 160)
        cut.append("long text shortened to 160 characters")
    return body


def _shorten_strings(value: Any, limit: int) -> Any:
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = _shorten_strings(item, limit)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = _shorten_strings(item, limit)
    elif isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + "…"
    return value
