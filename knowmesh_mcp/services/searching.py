"""Search (`GET /v1/search`): a raw error or a description in, the nodes for it out, best first,
each with its one answer for the caller's environment. Finding and scoring candidates is the
search layer's (`search.query`, `search.ranking`); this service reads their rows, rescores them
for the environment, orders them by the asked ecosystem, and adds the guidance to publish the
problem when nothing answers it well.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from knowmesh_mcp.core import next_steps
from knowmesh_mcp.core.environment import Environment, parse_env
from knowmesh_mcp.core.errors import bad_parameter
from knowmesh_mcp.core.evidence import Evidence
from knowmesh_mcp.core.limits import DEFAULT_RESULTS as DEFAULT_SEARCH_LIMIT
from knowmesh_mcp.core.limits import MAX_RESULTS as MAX_SEARCH_LIMIT
from knowmesh_mcp.core.model import MAX_ID_LENGTH, SEGMENT_RE
from knowmesh_mcp.core.normalize import canonical_ecosystem
from knowmesh_mcp.search.query import QueryPlan, find
from knowmesh_mcp.search.ranking import LIKELY, Candidate, min_score, rescore, settle
from knowmesh_mcp.services.reading import search_result
from knowmesh_mcp.store import Store

LONG_QUERY = 65_536  # characters of a query read in a worker thread
MAX_ECOSYSTEM_IN_ID = MAX_ID_LENGTH - 1 - next_steps.GUIDANCE_SLUG_CHARS  # the guidance's id: ecosystem, '/', slug
# Words in a query or environment that name an ecosystem, for the guidance of an empty search.
ECOSYSTEM_HINTS = (
    ("python", ("traceback", "python", "pip", "modulenotfounderror", "importerror", "venv", "pytest")),
    ("rust", ("cargo", "rustc", "error[e", "borrow")),
    ("go", ("go:", "goroutine", "go.mod", "golang", "go build")),
    ("typescript", ("tsc", "error ts", "typescript")),
    ("node", ("npm", "node", "yarn", "pnpm", "require(", "err_")),
    ("postgres", ("psql", "postgres", "relation", "pg_")),
    ("docker", ("docker", "container", "dockerfile")),
    ("git", ("git ", "fatal:", "git@")),
    ("shell", ("bash", "zsh", "/bin/sh", "command not found")),
)


class Searching:
    """`Mesh.searching`: search and the ranked candidates behind it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def search(
        self,
        q: str | None,
        *,
        env: str | None = None,
        ecosystem: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """GET /v1/search: the nodes for a raw error or a description, best first, one answer each."""
        if q is None or not q.strip():
            raise bad_parameter(
                "q", "q is required: pass the raw error text or a short description", code="missing_query"
            )
        if limit is None:
            limit = DEFAULT_SEARCH_LIMIT
        if limit < 1:
            raise bad_parameter("limit", "limit must be a positive integer")
        limit = min(limit, MAX_SEARCH_LIMIT)  # in-process callers; the wire (`wire.SearchQuery`) refuses more
        machine = parse_env(env) if env and env.strip() else None
        wanted = canonical_ecosystem(ecosystem) if ecosystem and ecosystem.strip() else None
        # Reading a long paste is CPU work (35 ms for 1 MiB): off the event loop, so others' requests go on.
        plan = QueryPlan.of(q) if len(q) < LONG_QUERY else await asyncio.to_thread(QueryPlan.of, q)
        ranked = await self.rank_candidates(plan, machine, wanted, limit=limit)
        if ranked:
            second = ranked[1] if len(ranked) > 1 else None
            settle(
                ranked[0][0],
                second and second[0],
                tier_decides=bool(
                    second and wanted is not None and ranked[0][1]["ecosystem"] == wanted != second[1]["ecosystem"]
                ),
            )
        results: list[dict[str, Any]] = []
        ceiling = 1.0
        for candidate, result in ranked[:limit]:
            if wanted is not None and result["ecosystem"] != wanted and results and results[-1]["ecosystem"] == wanted:
                ceiling = min(ceiling, results[-1]["score"] - 0.0001)  # the ecosystem tier: strictly below
            ceiling = min(ceiling, candidate.confidence)  # scores never increase down the list
            result["score"] = round(max(ceiling, 0.0), 4)
            results.append(result)
        envelope: dict[str, Any] = {
            "query": plan.echo,
            **({"query_length": plan.length} if plan.length > len(plan.echo) else {}),
            "env": machine.to_dict() if machine else None,
            "ecosystem": wanted,
            "limit": limit,
            "results": results,
            "trust": "untrusted-data",
        }
        if not results or results[0]["score"] < LIKELY:
            envelope["guidance"] = next_steps.publish_problem(
                plan.echo,
                plan.lines,
                _publishing_ecosystem(wanted, plan.echo, machine),
                machine.to_dict() if machine else None,
                weak=bool(results),
            )
        return envelope

    async def rank_candidates(
        self, plan: QueryPlan, machine: Environment | None, wanted: str | None, *, limit: int | None, floor: bool = True
    ) -> list[tuple[Candidate, dict[str, Any]]]:
        """The candidates a search shows first (all of them with `limit` None), with their result
        entries, in final order: the best `limit`, and beyond them those the caller's environment
        and the ecosystem tier (nodes of the asked ecosystem first) may still reorder.

        Without an environment or an ecosystem the ranking's order is final (a neutral environment
        leaves every score as it is), so only the first `limit` are read, and those tied with the
        last. Else the first 2 * `limit` (at least 10): an answer that fits the environment can
        move a node up. Without `floor`, candidates below `min_score` are kept (the ranking is
        fitted on all).
        """
        candidates = await find(self.store, plan)
        if limit is None:
            return await self._entries(candidates, plan, machine, wanted, floor)
        if machine is not None or wanted is not None:
            return await self._entries(candidates[: max(2 * limit, 10)], plan, machine, wanted, floor)
        ranked: list[tuple[Candidate, dict[str, Any]]] = []
        start = 0
        while len(ranked) < limit and start < len(candidates):  # again only past deprecated nodes
            end = min(start + limit - len(ranked), len(candidates))
            while end < len(candidates) and candidates[end].rank_value == candidates[end - 1].rank_value:
                end += 1  # ties are ordered by id below, so every tied one is read
            ranked += await self._entries(candidates[start:end], plan, machine, wanted, floor)
            if floor and not candidates[end - 1].exact and candidates[end - 1].score < min_score():
                break  # the rest score lower still (exact matches come first)
            start = end
        ranked.sort(key=lambda entry: (entry[0].rank_value, entry[1]["id"]))
        return ranked

    async def _entries(
        self, shown: list[Candidate], plan: QueryPlan, machine: Environment | None, wanted: str | None, floor: bool
    ) -> list[tuple[Candidate, dict[str, Any]]]:
        """Result entries of `shown` rescored for the environment, in the spec's order; deprecated nodes
        and (with `floor`) hints below `min_score` left out."""
        rows = {
            row.pk: (row, stats) for row, stats in await self.store.get_nodes_with_stats_by_pk([c.pk for c in shown])
        }
        now = datetime.now(UTC)
        ranked = []
        for candidate in shown:
            row, stats = rows.get(candidate.pk, (None, []))
            if row is None or row.status == "deprecated":
                continue  # deprecated (and merged) nodes stay readable but are never found
            result = search_result(
                row_document=row.document,
                version=row.version,
                status=row.status,
                revision=row.revision,
                solution_revisions=row.solution_revisions,
                env=machine,
                tier=candidate.match,
                document_size=row.document_size,
                evidence=Evidence(stats),
                now=now,
            )
            if rescore(candidate, plan.is_output, result["env_score"]) < min_score() and floor and not candidate.exact:
                continue  # a hint weaker than any right answer the ranking was fitted on
            mismatch = wanted is not None and row.ecosystem != wanted
            ranked.append((mismatch, candidate.rank_value, row.id, candidate, result))
        ranked.sort(key=lambda item: item[:3])
        return [(candidate, result) for *_, candidate, result in ranked]


def _publishing_ecosystem(wanted: str | None, query: str, env: Environment | None) -> str:
    """The ecosystem a ready `create_node` body names: the asked one, else one the query's words or the
    environment's runtime suggest, else "general". Search takes any ecosystem (it only orders by it),
    but a node's must start its id, so a name that cannot (`not an ecosystem!!`, `foo/bar`) is passed over."""
    lowered = query.lower()
    suggested = [ecosystem for ecosystem, hints in ECOSYSTEM_HINTS if any(hint in lowered for hint in hints)]
    runtimes = [canonical_ecosystem(runtime) for runtime in env.runtimes] if env is not None else []
    for ecosystem in (wanted, *suggested, *runtimes):
        if ecosystem and len(ecosystem) <= MAX_ECOSYSTEM_IN_ID and SEGMENT_RE.match(ecosystem):
            return ecosystem
    return "general"
