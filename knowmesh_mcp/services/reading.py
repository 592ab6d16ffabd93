"""The read view of an article: answer selection by environment, field selection, `next`.

Pure functions over a stored document; the service feeds them rows from the store.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from knowmesh_mcp.core import next_steps
from knowmesh_mcp.core.environment import (
    Environment,
    Scope,
    match_rank,
    parse_constraint,
    parse_env,
    scope_matches,
    solution_scope,
)
from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter
from knowmesh_mcp.core.evidence import Evidence, best_answer_state, stats_view
from knowmesh_mcp.core.markdown import render_article

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
    "article": (),  # no read section: the whole document to edit (editable_document)
}
INCLUDES = ("alternatives", "archived_failures")
LIST_FIELDS = ("title", "ecosystem", "status", "has_answer", "updated_at", "signature", "path", "html_path")


def parse_list(
    value: str | list[str] | None, *, name: str, allowed: tuple[str, ...] | dict[str, Any]
) -> list[str] | None:
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


@dataclass(frozen=True)
class ReadRequest:
    env: Environment | None = None
    env_text: str | None = None
    solution: str | None = None
    fields: list[str] | None = None
    include: tuple[str, ...] = ()


def scoped_solutions(
    document: dict[str, Any],
    revisions: dict[str, int],
    evidence: Evidence | None = None,
    env: Environment | None = None,
) -> list[tuple[dict[str, Any], Scope]]:
    """Each solution as served (with its revision and evidence state) beside its answer scope."""
    node_environment = document["signature"].get("environment", [])
    evidence = evidence or Evidence()
    cluster = env.cluster() if env else None
    scoped = []
    for solution in document["content"]["solutions"]:
        revision = revisions.get(solution["id"], 1)
        served = {
            **solution,
            "revision": revision,
            "answer_state": evidence.solution_state(solution["id"], revision, cluster),
        }
        row = evidence.stats(solution["id"], revision, cluster)
        if row is not None:
            served["evidence"] = {
                "failure_state": row.failure_state,
                "solved_agents": row.solved_agents,
                "failed_agents": row.failed_agents,
                "cluster": row.cluster or "all",
            }
        scoped.append((served, solution_scope(solution.get("env", []), node_environment)))
    return scoped


def known_failed(solution: dict[str, Any], env: Environment | None) -> bool:
    """Known-failed in the reader's own cluster: then its steps are not served for that machine."""
    return (
        env is not None
        and solution.get("evidence", {}).get("cluster") == env.cluster()
        and solution["evidence"]["failure_state"] == "known_failed"
    )


def failed_entry(solution: dict[str, Any]) -> dict[str, Any]:
    evidence = solution["evidence"]
    return {
        "solution": solution["id"],
        "revision": solution["revision"],
        "environment": evidence["cluster"],
        "state": evidence["failure_state"],
        "failed_agents": evidence["failed_agents"],
        "solved_agents": evidence["solved_agents"],
    }


def choose_answer(
    solutions: list[tuple[dict[str, Any], Scope]], env: Environment
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the one usable answer for env, the applicable answers that are known to fail there)."""
    applicable = [(s, scope) for s, scope in solutions if scope_matches(scope, env)]
    blocked = [s for s, _ in applicable if known_failed(s, env)]
    usable = [(s, scope) for s, scope in applicable if not known_failed(s, env)]
    return best_for_env(usable, env), blocked


def best_for_env(solutions: list[tuple[dict[str, Any], Scope]], env: Environment) -> dict[str, Any] | None:
    """The one answer for a machine: the best-ranked matching scope, earlier slots winning ties."""
    best = None
    for position, (solution, scope) in enumerate(solutions):
        if scope_matches(scope, env):
            key = (match_rank(scope, env), -position)
            if best is None or key > best[0]:
                best = (key, solution)
    return best[1] if best else None


def environment_match(
    document: dict[str, Any], solutions: list[tuple[dict[str, Any], Scope]], env: Environment
) -> float | None:
    """Share (0..1) of the node's comparable environment constraints that `env` satisfies.

    Comparable: the node's OS families (from its signature environment, or every answer's
    scope when all of them name one) when env names an OS; each runtime constraint whose
    runtime env names with a version; package managers when env names one; labels only when
    supplied. None when nothing is comparable.
    """
    declared = document["signature"].get("environment", [])
    os_families = {parse_env(tag).os for tag in declared if parse_env(tag).os and parse_constraint(tag) is None}
    if solutions and all(scope.os_families for _, scope in solutions):
        os_families |= {family for _, scope in solutions for family in scope.os_families}
    checks: list[bool] = []
    if env.os and os_families:
        checks.append(env.os in os_families)
    for tag in declared:
        constraint = parse_constraint(tag)
        if constraint is not None:
            name, spec = constraint
            allowed = spec.allows(env.runtimes.get(name)) if name in env.runtimes else None
            if allowed is not None:
                checks.append(allowed)
            continue
        parsed = parse_env(tag)
        if parsed.pkg_manager and env.pkg_manager and not parsed.os and not parsed.runtimes:
            checks.append(parsed.pkg_manager == env.pkg_manager)
        elif parsed.labels and not parsed.os and set(parsed.labels) & set(env.labels):
            checks.append(True)
    return round(sum(checks) / len(checks), 3) if checks else None


def _select_solutions(
    document: dict[str, Any], revisions: dict[str, int], request: ReadRequest, evidence: Evidence
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(solutions to serve, answers withheld as known-failed for the reader's environment)."""
    solutions = scoped_solutions(document, revisions, evidence, request.env)
    if request.solution is not None:
        chosen = [s for s, _ in solutions if s["id"] == request.solution]
        if not chosen:
            raise KnowmeshError(
                404,
                "solution_not_found",
                f"node {document['id']!r} has no solution {request.solution!r}",
                field="solution",
                solutions=[s["id"] for s, _ in solutions],
            )
        return chosen, []
    if request.env is None:
        return [s for s, _ in solutions], []
    answer, blocked = choose_answer(solutions, request.env)
    return ([answer] if answer else []), blocked


def editable_document(
    document: dict[str, Any], *, status: str, version: str, solution_revisions: dict[str, int]
) -> dict[str, Any]:
    """The node document as an edit takes it (revise_article's `article`): the stored document,
    its status and version, each solution with its revision."""
    solutions = [{**s, "revision": solution_revisions.get(s["id"], 1)} for s in document["content"]["solutions"]]
    return {
        **document,
        "status": status,
        "version": version,
        "content": {**document["content"], "solutions": solutions},
    }


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
    evidence: Evidence | None = None,
    now: datetime | None = None,
    failures: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON read of spec section 2 for one stored document."""
    node_id = document["id"]
    evidence = evidence or Evidence()
    now = now or datetime.now(UTC)
    has_answer = bool(document["content"]["solutions"])
    solutions, blocked = _select_solutions(document, solution_revisions, request, evidence)
    usable = bool(solutions)
    sections = sections_for(request.fields)
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
        "answer_state": best_answer_state(
            [s["answer_state"] for s in solutions] or [b["answer_state"] for b in blocked]
        ),
        "no_known_working_solution": has_answer and not usable and request.solution is None,
        "failed_solutions": [failed_entry(b) for b in blocked],
        "env": request.env.to_dict() if request.env else None,
        "signature": document["signature"],
        "content": _view_content(document["content"], solutions, sections, request.include),
    }
    if request.fields and "article" in request.fields:
        body["article"] = editable_document(
            document, status=status, version=version, solution_revisions=solution_revisions
        )
    shared = _failures_view(failures or [], request, usable)
    if shared is not None:
        body["failures"] = shared
    cluster = request.env.cluster() if request.env else None
    if sections is None or "outcomes" in sections:
        body["stats"] = stats_view(evidence.stats("", 0, cluster), now)
    if not usable and request.solution is None:
        body["next"] = unusable_next(node_id, revision, request.env, blocked, has_answer=has_answer)
    return body


def _view_content(
    content: dict[str, Any], solutions: list[dict[str, Any]], sections: set[str] | None, include: tuple[str, ...]
) -> dict[str, Any]:
    """The article's sections a read asked for (all without `fields`), with the served solutions;
    the failed attempts of an answered node are withheld unless `include=archived_failures`."""
    view: dict[str, Any] = {}
    for key in ("symptom", "context", "root_cause"):
        if sections is None or key in sections:
            view[key] = content[key]
    if sections is None or "solutions" in sections:
        view["solutions"] = solutions
    elif "provenance" in sections:
        view["solutions"] = [
            {"id": s["id"], "revision": s["revision"], "provenance": s.get("provenance")} for s in solutions
        ]
    if "alternatives" in include and (sections is None or "solutions" in sections):
        view["alternatives"] = content.get("alternatives", [])
    if sections is None or "failed_attempts" in sections:
        withheld = (
            bool(content["solutions"]) and "archived_failures" not in include and bool(content["failed_attempts"])
        )
        view["failed_attempts"] = [] if withheld else content["failed_attempts"]
        view["failed_attempts_archived"] = withheld
    if sections is None or "boundaries" in sections:
        view["boundaries"] = content.get("boundaries", [])
    return view


def unusable_next(
    node_id: str, revision: int, env: Environment | None, blocked: list[dict[str, Any]], *, has_answer: bool
) -> dict[str, Any]:
    """`next` of a read or a search result with no usable answer: report the blocked one's failure,
    else publish an answer (or a failed attempt)."""
    env_view = env.to_dict() if env else None
    if blocked:
        return next_steps.blocked(node_id, revision, env_view, blocked[0])
    return next_steps.unanswered(node_id, revision, env_view, has_answer=has_answer)


def _failures_view(failures: list[dict[str, Any]], request: ReadRequest, usable: bool) -> list[dict[str, Any]] | None:
    """Shared failed approaches: the reader's environment's unarchived ones while no answer is
    usable; archived ones too (marked) on `include=archived_failures`."""
    env = request.env
    same_os = [f for f in failures if env is None or env.os is None or f["environment"].get("os") in (None, env.os)]
    listed = [f for f in same_os if not f["archived"]] if not usable else []
    if "archived_failures" in request.include:
        listed += [f for f in failures if f["archived"]]
    if usable and "archived_failures" not in request.include:
        return None
    return listed


def list_entry(
    row_document: dict[str, Any], *, status: str, has_answer: bool, updated_at: str, fields: list[str] | None
) -> dict[str, Any]:
    node_id = row_document["id"]
    full = {
        "title": row_document["title"],
        "ecosystem": row_document["ecosystem"],
        "status": status,
        "has_answer": has_answer,
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


def _size(body: dict[str, Any]) -> int:
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _whole(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The body with nothing cut, and its size: when it fits (the common case) nothing is copied."""
    whole = {**body, "truncated": []}
    return whole, _size(whole)


def fit_to_budget(body: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Drop the least useful parts until the JSON fits in `max_bytes`; `truncated` names each cut.

    A hard bound: when even the answer with shortened text does not fit, the read shrinks to the
    node's identity and says how many bytes the smallest useful answer needs.
    """
    whole, size = _whole(body)
    if size <= max_bytes:
        return whole
    if "article" in body:  # whole or not at all: a revision made from a cut article would delete text
        return _identity_only(body, size, "the article (never cut)")
    body = copy.deepcopy(body)
    cut: list[str] = []
    body["truncated"] = cut
    for path in BUDGET_CUTS:
        if size <= max_bytes:
            return body
        parent: Any = body
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and parent.get(path[-1]) not in (None, [], ""):
            del parent[path[-1]]
            cut.append("/".join(path))
            size = _size(body)
    solutions = body.get("content", {}).get("solutions", [])
    for index in range(len(solutions) - 1, 0, -1):
        if _size(body) <= max_bytes:
            return body
        cut.append(f"content/solutions/{solutions.pop(index)['id']}")
    if _shorten_until_it_fits(body, max_bytes, cut):
        return body
    return _identity_only(body, _size(body), "the answer")


def _identity_only(body: dict[str, Any], needed: int, what: str) -> dict[str, Any]:
    """The last resort of a bound: the node's identity, and the max_bytes `what` needs."""
    small = {key: body[key] for key in IDENTITY_FIELDS if key in body}
    small["truncated"] = [f"everything but the node's identity: {what} needs max_bytes >= {needed}"]
    small["needed_bytes"] = needed
    return small


# What a bounded search drops first, from every result, before dropping whole results.
RESULT_CUTS: tuple[str, ...] = ("next", "symptom", "signature", "failed_solutions")
# What identifies a node: never shortened, and all that is left of a read that cannot fit.
IDENTITY_FIELDS: tuple[str, ...] = ("id", "version", "revision", "has_answer", "path", "trust")
IDENTIFIER_KEYS = frozenset(
    {"id", "version", "path", "html_path", "revision_id", "node", "tool", "method", "current_version", "trust", "match"}
)


def fit_search_to_budget(envelope: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Bound a search envelope: trim each result's extras, then drop results from the end.

    The envelope passed in is never changed. A third of searches need a cut at the default 8 KB,
    and the cuts only drop keys of results and results, so they work on copies of those top
    levels; only shortening text, the rare last steps, needs a deep copy (which cost 0.1 ms)."""
    whole, size = _whole(envelope)
    if size <= max_bytes:
        return whole
    cut: list[str] = []
    envelope = {**envelope, "results": [dict(result) for result in envelope.get("results", [])], "truncated": cut}
    results = envelope["results"]
    for key in RESULT_CUTS:
        if size <= max_bytes:
            return envelope
        if any(key in result for result in results):
            for result in results:
                result.pop(key, None)
            cut.append(f"results/*/{key}")
            size = _size(envelope)
    total = len(results)
    if len(results) > 1 and size > max_bytes:
        cut.append("")
        while len(results) > 1 and _size(envelope) > max_bytes:
            results.pop()
            cut[-1] = f"results after #{len(results)} ({total - len(results)} more)"
    if _size(envelope) <= max_bytes:
        return envelope
    envelope = copy.deepcopy(envelope)  # text is shortened in place below
    results, cut = envelope["results"], envelope["truncated"]
    envelope.pop("guidance", None)
    if _shorten_until_it_fits(envelope, max_bytes, cut):
        return envelope
    for result in results:  # the last resort: where to read the answer, not the answer itself
        for key in [k for k in result if k not in {"id", "title", "score", "match", "path"}]:
            del result[key]
    cut.append("results/*: all but id, title, score, match and path (read the answer with read_article)")
    return envelope


def fit_review_to_budget(queue: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Bound a page of the review queue as a search is bounded: whole items are dropped from the
    end (the page then ends sooner: `next_offset` is where the first dropped item is), then the
    last item's ready calls; `truncated` says what was cut. The queue passed in is never changed."""
    whole, size = _whole(queue)
    if size <= max_bytes:
        return whole
    cut: list[str] = []
    items = list(queue.get("items", []))
    queue = {**queue, "items": items, "truncated": cut}
    total = len(items)
    if len(items) > 1:
        cut.append("")
        while len(items) > 1 and _size(queue) > max_bytes:
            items.pop()
            cut[-1] = f"items after #{len(items)} ({total - len(items)} more: ask again from next_offset)"
        queue["next_offset"] = queue.get("offset", 0) + len(items)
    for index, item in enumerate(items):
        if _size(queue) <= max_bytes:
            break
        if "next" in item:
            items[index] = {key: value for key, value in item.items() if key != "next"}
            cut.append(f"items/{index}/next (read the node with read_article)")
    return queue


def _shorten_until_it_fits(body: dict[str, Any], max_bytes: int, cut: list[str]) -> bool:
    """Shorten long text (never identifiers), step by step; True once the JSON fits."""
    for limit in (160, 80):
        if _size(body) <= max_bytes:
            return True
        _shorten_strings(body, limit)
        cut[:] = [c for c in cut if not c.startswith("long text shortened")] + [
            f"long text shortened to {limit} characters"
        ]
    return _size(body) <= max_bytes


def _shorten_strings(value: Any, limit: int, key: str | None = None) -> Any:
    if isinstance(value, dict):
        for name, item in value.items():
            value[name] = _shorten_strings(item, limit, name)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = _shorten_strings(item, limit, key)
    elif isinstance(value, str) and len(value) > limit and key not in IDENTIFIER_KEYS:
        return value[: limit - 1] + "…"
    return value


def search_result(
    *,
    row_document: dict[str, Any],
    version: str,
    status: str,
    revision: int,
    solution_revisions: dict[str, int],
    env: Environment | None,
    tier: str,
    document_size: int,
    evidence: Evidence,
    now: datetime,
) -> dict[str, Any]:
    """One search result: the node's identity, how it matched, and its one best answer.

    A known-failed answer is never recommended: it is listed in `failed_solutions` instead.
    """
    node_id = row_document["id"]
    solutions = scoped_solutions(row_document, solution_revisions, evidence, env)
    has_answer = bool(solutions)
    blocked: list[dict[str, Any]] = []
    if env is None:
        solution = solutions[0][0] if solutions else None
        env_match = env_score = None
    else:
        solution, blocked = choose_answer(solutions, env)
        env_match = environment_match(row_document, solutions, env)
        env_score = round(0.5 * (solution is not None) + 0.5 * (0.5 if env_match is None else env_match), 3)
    stats = stats_view(evidence.stats("", 0, env.cluster() if env else None), now)
    result: dict[str, Any] = {
        "id": node_id,
        "title": row_document["title"],
        "ecosystem": row_document["ecosystem"],
        "status": status,
        "version": version,
        "revision": revision,
        "path": f"/v1/nodes/{node_id}",
        "html_path": f"/nodes/{node_id}",
        "match": tier,
        "score": 0.0,  # set by the caller once the order is final
        "env_match": env_match,
        "env_score": env_score,
        "signature": {
            "error": row_document["signature"]["error"],
            "template": row_document["signature"].get("template"),
        },
        "symptom": row_document["content"]["symptom"],
        "solution": solution,
        "has_answer": has_answer,
        "no_known_working_solution": has_answer and solution is None,
        "failed_solutions": [failed_entry(b) for b in blocked],
        "answer_state": solution["answer_state"]
        if solution
        else best_answer_state([b["answer_state"] for b in blocked]),
        "sample_size": stats["sample_size"],
        "low_confidence": stats["low_confidence"],
        "last_verified": stats["last_verified"],
        "stale": stats["stale"],
        "tokens_estimate": document_size // 4,  # about four bytes a token
        "trust": "untrusted-data",
    }
    if solution is None:
        result["next"] = unusable_next(node_id, revision, env, blocked, has_answer=has_answer)
    return result


@dataclass
class ReadResult:
    """A read view plus what the transports send beside it (ETag, cache and trust headers)."""

    body: dict[str, Any]
    etag: str
    cache_control: str = "public, max-age=300"

    def headers(self) -> dict[str, str]:
        headers = {
            "ETag": self.etag,
            "Cache-Control": self.cache_control,
            "X-Knowmesh-Content-Trust": "untrusted-data",
            "X-Knowmesh-Article-Revision": str(self.body["revision"]),
            "X-Knowmesh-Node-Version": self.body["version"],
            "X-Knowmesh-Has-Answer": "true" if self.body["has_answer"] else "false",
        }
        if self.body.get("stats", {}).get("stale", True):
            headers["X-Knowmesh-Stale"] = "true"
        return headers

    def markdown(self) -> str:
        return render_article(self.body)
