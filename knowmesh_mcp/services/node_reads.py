"""Reading nodes: the current article (with one answer for an environment), a pinned version,
the node list and the counts the pages and sitemaps show. The views themselves are pure
(`reading`); this service reads the rows, follows merges and tags each read for caching.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from knowmesh_mcp.core.environment import parse_env
from knowmesh_mcp.core.errors import bad_parameter, not_found
from knowmesh_mcp.core.evidence import Evidence
from knowmesh_mcp.core.model import canonical_json
from knowmesh_mcp.core.normalize import canonical_ecosystem
from knowmesh_mcp.services.cursors import decode_cursor, encode_cursor
from knowmesh_mcp.services.maintaining import follow_redirect, following_merge, read_following_merge
from knowmesh_mcp.services.publishing import require_node_id
from knowmesh_mcp.services.reading import (
    FIELD_SECTIONS,
    INCLUDES,
    LIST_FIELDS,
    ReadRequest,
    ReadResult,
    article_view,
    list_entry,
    parse_list,
)
from knowmesh_mcp.store import Store

MAX_LIST_LIMIT = 100
DEFAULT_LIST_LIMIT = 50


class NodeReads:
    """`Mesh.nodes`: reads of nodes and lists of them."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def read_request(
        self,
        *,
        env: str | None = None,
        solution: str | None = None,
        fields: str | list[str] | None = None,
        include: str | list[str] | None = None,
    ) -> ReadRequest:
        """Check and parse read parameters (shared by node, pinned-version and article reads)."""
        if solution is not None and not solution.strip():
            raise bad_parameter("solution", "solution must be a solution id")
        return ReadRequest(
            env=parse_env(env) if env and env.strip() else None,
            env_text=env,
            solution=solution.strip() if solution else None,
            fields=parse_list(fields, name="fields", allowed=FIELD_SECTIONS),
            include=tuple(parse_list(include, name="include", allowed=INCLUDES) or ()),
        )

    async def read_node(self, node_id: str, request: ReadRequest | None = None) -> ReadResult:
        """GET /v1/nodes/{id}: the current article, with one answer when `env` is given."""
        require_node_id(node_id)
        request = request or ReadRequest()
        found = await self.store.get_node_for_read(node_id)
        if found is None:
            raise not_found("node", node_id)
        row, stats, failure_count = found
        await follow_redirect(self.store, node_id, row.status)
        failures = await self.store.failures_of(node_id) if failure_count else []
        body = article_view(
            document=row.document,
            version=row.version,
            status=row.status,
            revision=row.revision,
            solution_revisions=row.solution_revisions,
            created_at=row.created_at,
            updated_at=row.updated_at,
            request=request,
            evidence=Evidence(stats),
            failures=failures,
        )
        return ReadResult(body=body, etag=_etag(row.version, row.revision, row.status, request, stats))

    async def read_view(
        self,
        node_id: str,
        *,
        env: str | None = None,
        solution: str | None = None,
        fields: str | None = None,
        include: str | None = None,
    ) -> dict[str, Any]:
        """The JSON read of a node (what MCP `read_article` returns before its size bound); a merged
        node's read is its canonical node's, with `merged_from` (an agent has no 301 to follow)."""
        request = self.read_request(env=env, solution=solution, fields=fields, include=include)

        async def read(wanted: str) -> dict[str, Any]:
            return (await self.read_node(wanted, request)).body

        return await read_following_merge(read, node_id)

    async def read_markdown(self, node_id: str) -> str:
        """The Markdown article (the MCP resource); a merged node's is its canonical node's."""
        return (await following_merge(self.read_node, node_id)).markdown()

    async def read_version(self, node_id: str, version: str, request: ReadRequest | None = None) -> ReadResult:
        """GET /v1/nodes/{id}/versions/{version}: an immutable snapshot, cacheable forever."""
        require_node_id(node_id)
        request = request or ReadRequest()
        row = await self.store.get_node(node_id)
        if row is None:
            raise not_found("node", node_id)
        found = await self.store.get_version(node_id, version)
        if found is None:
            raise not_found("version", version)
        document, solution_revisions, created_at = found
        revision = await self.store.revision_of_version(node_id, version)
        body = article_view(
            document=document,
            version=version,
            status=row.status,
            revision=revision,
            solution_revisions=solution_revisions,
            created_at=row.created_at,
            updated_at=created_at,
            request=request,
        )
        body["current_version"] = row.version
        return ReadResult(
            body=body,
            etag=_etag(version, revision, row.status, request),
            cache_control="public, max-age=31536000, immutable",
        )

    async def list_nodes(
        self,
        *,
        ecosystem: str | None = None,
        fields: str | list[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """GET /v1/nodes: current, non-deprecated articles in id order, with an opaque cursor."""
        if limit is None:
            limit = DEFAULT_LIST_LIMIT
        if limit < 1:
            raise bad_parameter("limit", "limit must be a positive integer")
        limit = min(limit, MAX_LIST_LIMIT)  # the spec caps it: clamped, not refused
        chosen = parse_list(fields, name="fields", allowed=LIST_FIELDS)
        ecosystem = canonical_ecosystem(ecosystem) if ecosystem and ecosystem.strip() else None
        after = None
        if cursor:
            payload = decode_cursor(cursor)
            if payload.get("ecosystem") != ecosystem:
                raise bad_parameter(
                    "cursor", "this cursor was made for another ecosystem filter", code="invalid_cursor"
                )
            after = payload["after"]
        rows = await self.store.list_nodes(ecosystem=ecosystem, after_id=after, limit=limit + 1)
        page = rows[:limit]
        next_cursor = encode_cursor({"after": page[-1].id, "ecosystem": ecosystem}) if len(rows) > limit else None
        return {
            "nodes": [
                list_entry(r.document, status=r.status, has_answer=r.has_answer, updated_at=r.updated_at, fields=chosen)
                for r in page
            ],
            "ecosystem": ecosystem,
            "limit": limit,
            "next_cursor": next_cursor,
        }

    async def ecosystem_counts(self) -> list[dict[str, Any]]:
        """Published (non-deprecated) nodes per ecosystem: how many, and how many are open problems."""
        return [
            {"ecosystem": ecosystem, "nodes": total, "open": unsolved}
            for ecosystem, total, unsolved in await self.store.ecosystem_counts()
        ]

    async def answered_nodes(self, *, offset: int, limit: int) -> list[dict[str, str]]:
        """Answered, published nodes in id order (`id`, `updated_at`): what search engines may index."""
        return [
            {"id": node_id, "updated_at": updated_at}
            for node_id, updated_at in await self.store.answered_nodes(offset, limit)
        ]


def _etag(version: str, revision: int, status: str, request: ReadRequest, stats: Iterable[Any] = ()) -> str:
    # Evidence changes a read without a new revision, so it is part of the tag.
    evidence = [[r.solution_id, r.solution_revision, r.cluster, r.sample_size, r.failure_state] for r in stats]
    shape = canonical_json(
        [version, revision, status, request.env_text, request.solution, request.fields, request.include, evidence]
    )
    return '"' + hashlib.sha256(shape.encode("utf-8")).hexdigest()[:32] + '"'
