"""The service facade: the one place every interface calls.

An MCP tool, an HTTP route and a CLI command that do the same thing call the same method
here, so they cannot disagree. Methods take plain values, return JSON-ready dicts, and
raise `KnowmeshError` with the spec's status and code.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import getpass
import hashlib
import json
import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from knowmesh_mcp.core import next_steps
from knowmesh_mcp.core.environment import Environment, parse_env
from knowmesh_mcp.core.errors import DatabaseUnusable, KnowmeshError, bad_parameter, not_found
from knowmesh_mcp.core.evidence import Evidence, best_answer_state
from knowmesh_mcp.core.identity import Actor, acting
from knowmesh_mcp.core.limits import (
    DEFAULT_RESULTS as DEFAULT_SEARCH_LIMIT,
)
from knowmesh_mcp.core.limits import (
    MAX_RESULTS as MAX_SEARCH_LIMIT,
)
from knowmesh_mcp.core.limits import (
    json_problem,
    to_int,
)
from knowmesh_mcp.core.model import MAX_ID_LENGTH, SEGMENT_RE, canonical_json
from knowmesh_mcp.core.normalize import NORMALIZER_VERSION, canonical_ecosystem
from knowmesh_mcp.search.query import (
    SEARCH_INDEX_VERSION,
    QueryPlan,
    find,
    similar_nodes,
)
from knowmesh_mcp.search.ranking import LIKELY, Candidate, min_score, rescore, settle
from knowmesh_mcp.services.access import AgentTokens
from knowmesh_mcp.services.editing import ArticleEditing
from knowmesh_mcp.services.health import Health
from knowmesh_mcp.services.importing import CHUNK, InvalidSource, Rejected, index_pages, prepared_documents
from knowmesh_mcp.services.maintaining import (
    Maintaining,
    canonical_ref,
    follow_redirect,
    following_merge,
    read_following_merge,
)
from knowmesh_mcp.services.outcomes import (
    UNCOUNTED,
    Dedupe,
    FailedAttempts,
    OutcomeReporting,
    ReviewQueue,
    ServiceIssues,
    Submission,
)
from knowmesh_mcp.services.publishing import Prepared, prepare_off_loop, require_node_id
from knowmesh_mcp.services.reading import (
    FIELD_SECTIONS,
    INCLUDES,
    LIST_FIELDS,
    ReadRequest,
    ReadResult,
    article_view,
    list_entry,
    parse_list,
    search_result,
)
from knowmesh_mcp.services.syncing import Syncing
from knowmesh_mcp.store import STARTER_CORPUS, NewNode, StatsRow, Store, meta_made_once, open_store, store_dir

MAX_LIST_LIMIT = 100
DEFAULT_LIST_LIMIT = 50
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
IMPORT_BATCH = 1000
LOCAL_AGENT_KEY = "local_agent_id"  # meta: the id a personal mesh's own agent acts under


def llms_txt() -> str:
    """The agent entry point (`llms.txt`), from the wheel or the checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "llms.txt", package.parent / "llms.txt"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    raise FileNotFoundError("llms.txt is missing from the installation")


def encode_cursor(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, *, name: str = "cursor") -> dict[str, Any]:
    try:
        payload = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        raise bad_parameter(name, f"{name} is not one this server issued", code="invalid_cursor") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("after"), str) or json_problem(payload):
        raise bad_parameter(name, f"{name} is not one this server issued", code="invalid_cursor")
    return payload


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    invalid: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "created": len(self.created),
            "unchanged": len(self.unchanged),
            "skipped": self.skipped,
            "invalid": self.invalid,
        }


class Service(
    ArticleEditing,
    OutcomeReporting,
    FailedAttempts,
    ReviewQueue,
    Dedupe,
    ServiceIssues,
    Syncing,
    AgentTokens,
    Maintaining,
    Health,
):
    """Knowmesh over one store."""

    def __init__(self, store: Store):
        self.store = store

    @classmethod
    async def open(
        cls, db_path: str | Path, *, seed: bool | None = True, progress: Callable[[int, int], None] | None = None
    ) -> Service:
        """Open (creating and migrating if needed) a database; a new one gets the starter corpus
        (`seed` False: never, the mesh stays empty; None: not now, it stays pending).

        `progress(done, total)` follows a rebuild of the search index, which an upgrade of the
        search code starts here (minutes on a big mesh)."""
        store = await open_store(db_path)
        service = cls(store)
        try:
            if store.read_only:  # a file this process may only read: serve it as it is
                await service._refuse_a_stale_read_only_index()
                return service
            await service._reindex_if_analysis_changed(progress)
            if seed is not None:
                await service._load_starter_corpus_if_pending(seed)
        except BaseException:
            await store.close()
            raise
        return service

    async def close(self) -> None:
        await self.store.close()

    async def _load_starter_corpus_if_pending(self, wanted: bool) -> None:
        """A new mesh's starter corpus is pending (`STARTER_CORPUS`) until loaded. Each process that
        opens it meanwhile loads it too, as an import (what another already wrote is unchanged, and
        its transaction waits for theirs): so none serves a search before the corpus is there, and
        the next open finishes a load that died half-way. With `wanted` False (`--empty`) nothing
        is loaded and the mesh stays empty for good."""
        if await self.store.get_meta(STARTER_CORPUS) != "pending":
            return
        if wanted:
            await self.import_documents(load_documents([store_dir() / "starter"]), summary="Starter corpus")
        async with self.store.write() as tx:
            await tx.set_meta(STARTER_CORPUS, "loaded" if wanted else "declined")

    async def _refuse_a_stale_read_only_index(self) -> None:
        """A read-only mesh whose search index another version built cannot be rebuilt here, and
        searching it would answer by rules this code no longer has: one line saying what to do.
        (Its starter corpus, if still pending, stays so: the mesh is served as it is.)"""
        if not await self._analysis_is_current():
            raise DatabaseUnusable(
                self.store.path,
                f"{self.store.path} is read-only and its search index was built by "
                "another version: open it once where it may be written, to rebuild it",
            )

    async def _analysis_is_current(self) -> bool:
        """Were the stored signature hashes and search index made by this code's analysis?"""
        return (await self.store.get_meta("normalizer_version"), await self.store.get_meta("search_index_version")) == (
            str(NORMALIZER_VERSION),
            str(SEARCH_INDEX_VERSION),
        )

    async def _reindex_if_analysis_changed(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Signature hashes and the search index are derived: rebuild them when their code changed."""
        if await self._analysis_is_current():
            return
        documents = [(document["id"], document) async for document, _, _ in self.store.iter_current_documents()]
        pages = [(False, documents[start : start + CHUNK]) for start in range(0, len(documents), CHUNK)]
        done = 0
        async with self.store.bulk_import(), self.store.write() as tx:  # a whole index rewritten: as an import
            # a big mesh's pages are indexed in a process pool while this process writes those indexed
            async for _, rows in index_pages(pages, len(documents)):
                await tx.set_signature_hashes((digest, node_id) for node_id, digest, _ in rows)
                await tx.write_search_rows([(node_id, row) for node_id, _, row in rows])
                done += len(rows)
                if progress is not None:
                    progress(done, len(documents))
            await tx.set_meta("normalizer_version", str(NORMALIZER_VERSION))
            await tx.set_meta("search_index_version", str(SEARCH_INDEX_VERSION))

    async def local_agent_id(self) -> str:
        """The local agent of a stdio server: KNOWMESH_AGENT_ID, else an id this database makes once
        (`<OS user>-<8 hex>`). The OS user alone is `root` or `ubuntu` on many machines: a team's
        report synced in under that id made the local user's own report a 409 duplicate_report."""
        if os.environ.get("KNOWMESH_AGENT_ID"):
            return os.environ["KNOWMESH_AGENT_ID"]
        return await meta_made_once(self.store, LOCAL_AGENT_KEY, lambda: f"{getpass.getuser()}-{secrets.token_hex(4)}")

    async def local_actor(self, agent: Any) -> Actor:
        """Who a stdio call acts as on a personal mesh: the id it names, else the local agent."""
        return acting(agent, None, "off", local_id=await self.local_agent_id())

    # -- create ------------------------------------------------------------------------

    async def create_node(
        self,
        raw: Any,
        *,
        agent: dict[str, Any] | None = None,
        actor: Actor | None = None,
        submission: Submission = UNCOUNTED,
    ) -> dict[str, Any]:
        """POST /v1/nodes: publish a new problem (with or without an answer). Status is forced to draft."""
        author = actor if actor is not None else acting(agent, None, "off")  # optional on create, never malformed
        if isinstance(raw, dict):
            raw = {**raw, "status": "draft", "license": "CC0-1.0"}
            raw.pop("version", None)
        prepared = await prepare_off_loop(raw)
        document = prepared.document
        # Read before the write: once the node is stored, nothing that can fail stands before the 201.
        similar = await similar_nodes(self.store, prepared.body)
        async with self.store.write() as tx:
            await submission.charge(tx)
            if await tx.versions_of([document.id]):
                raise KnowmeshError(
                    409,
                    "node_exists",
                    f"{document.id!r} already exists: improve that article with PATCH /v1/nodes/{document.id}/article",
                    top_level={
                        "canonical": canonical_ref(document.id),
                        "next": {
                            "edit_article": next_steps.edit_article(document.id, await tx.current_revision(document.id))
                        },
                    },
                )
            duplicate = await tx.duplicate_of(prepared.signature_hash, prepared.quoted_values)
            if duplicate is not None:
                raise KnowmeshError(
                    409,
                    "duplicate_node",
                    f"the same error (normalized signature and quoted values) is already {duplicate!r}: improve that article",
                    top_level={
                        "canonical": canonical_ref(duplicate),
                        "next": {
                            "edit_article": next_steps.edit_article(duplicate, await tx.current_revision(duplicate))
                        },
                    },
                )
            await tx.insert_nodes(
                [
                    prepared.new_node(
                        kind="create",
                        summary="Create node",
                        proof=author.proof,
                        agent={"id": author.id, "model": author.model} if author.id else None,
                    )
                ]
            )
        return {
            "id": document.id,
            "version": prepared.version,
            "status": document.status,
            "revision": 1,
            "trust": "untrusted-data",
            "path": f"/v1/nodes/{document.id}",
            "html_path": f"/nodes/{document.id}",
            "similar": similar,
        }

    # -- read --------------------------------------------------------------------------

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

    # -- search ------------------------------------------------------------------------

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
        results = []
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

    # -- changes (sync) ----------------------------------------------------------------

    async def changes(self, *, since: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """GET /v1/changes: nodes written after a cursor, in write order (protocol section 9)."""
        limit = MAX_LIST_LIMIT if limit is None else limit
        if limit < 1:
            raise bad_parameter("limit", "limit must be a positive integer")
        limit = min(limit, 1000)
        after = 0
        if since:
            after = to_int(
                decode_cursor(since, name="since")["after"],
                "since",
                code="invalid_cursor",
                what="a cursor this server issued",
            )
        rows = await self.store.changes_after(after, limit + 1)
        page = rows[:limit]
        # No changes: the cursor comes back unchanged, so a sync loop can simply keep it.
        last = page[-1][0] if page else after
        return {
            "changes": [_change_entry(row) for row in page],
            "next_cursor": encode_cursor({"after": str(last)}),
            "has_more": len(rows) > limit,
            "remaining": await self.store.count_changes_after(last) if len(rows) > limit else 0,  # for progress bars
        }

    # -- import / export ---------------------------------------------------------------

    async def import_documents(
        self,
        documents: Iterable[tuple[str, Any]],
        *,
        dry_run: bool = False,
        kind: str = "create",
        summary: str = "Imported",
    ) -> ImportReport:
        """Create every valid document whose id is absent; report the rest with reasons.

        A local, trusted bulk path: the document's status is kept (export → import is
        lossless), and no rate limit applies. Writes in batches, each one transaction; a big
        import's documents are prepared by worker processes meanwhile (`importing`).
        """
        report = ImportReport(dry_run=dry_run)
        async with nullcontext() if dry_run else self.store.bulk_import():
            batch: list[tuple[str, Prepared]] = []
            seen_ids: set[str] = set()
            async for source, prepared in prepared_documents(documents):
                if isinstance(prepared, Rejected):
                    report.invalid.append({"source": source, "id": prepared.id, "error": prepared.error})
                    continue
                if prepared.document.id in seen_ids:
                    report.skipped.append(
                        {"source": source, "id": prepared.document.id, "reason": "duplicate id earlier in this import"}
                    )
                    continue
                seen_ids.add(prepared.document.id)
                batch.append((source, prepared))
                if len(batch) >= IMPORT_BATCH:
                    await self._import_batch(batch, report, kind=kind, summary=summary)
                    batch = []
            await self._import_batch(batch, report, kind=kind, summary=summary)
        return report

    async def _import_batch(
        self, batch: list[tuple[str, Prepared]], report: ImportReport, *, kind: str, summary: str
    ) -> None:
        if not batch:
            return
        async with self.store.write() as tx:
            existing = await tx.versions_of([p.document.id for _, p in batch])
            fresh: list[NewNode] = []
            claimed: dict[
                tuple[str, tuple[str, ...]], str
            ] = {}  # (signature hash, quoted values) -> the first id in this batch
            duplicates = await tx.duplicates_of((p.signature_hash, p.quoted_values) for _, p in batch)
            for source, prepared in batch:
                node_id = prepared.document.id
                if node_id in existing:
                    if existing[node_id] == prepared.version:
                        report.unchanged.append(node_id)
                    else:
                        report.skipped.append(
                            {
                                "source": source,
                                "id": node_id,
                                "reason": "id exists with different content (edit the article instead)",
                            }
                        )
                    continue
                key = (prepared.signature_hash, tuple(prepared.quoted_values))
                owner = duplicates.get(key) or claimed.get(key)
                if owner is not None:
                    report.skipped.append(
                        {"source": source, "id": node_id, "reason": f"duplicate of {owner} (same normalized error)"}
                    )
                    continue
                claimed.setdefault(key, node_id)
                fresh.append(prepared.new_node(kind=kind, agent=None, summary=summary))
                report.created.append(node_id)
            if not report.dry_run:
                await tx.insert_nodes(fresh)

    async def export_documents(self) -> AsyncIterator[dict[str, Any]]:
        """Every current document with its status and version, in id order (what import reads back)."""
        async for document, status, version in self.store.iter_current_documents():
            yield {**document, "status": status, "version": version}


def _change_entry(row: Any) -> dict[str, Any]:
    (
        _,
        node_id,
        version,
        status,
        title,
        created_at,
        updated_at,
        revision,
        has_answer,
        stats_json,
        evidence_seq,
        merged,
        canonical,
    ) = row
    stats = [StatsRow(*values) for values in json.loads(stats_json)]
    states = {r.failure_state for r in stats}
    reasons = [
        reason
        for reason, hit in (
            ("failed_answer", "known_failed" in states),
            ("disputed", "disputed" in states),
            ("unsolved", not has_answer),
        )
        if hit
    ]
    change = "deprecated" if status == "deprecated" else "created" if revision == 1 else "updated"
    entry: dict[str, Any] = {
        "id": node_id,
        "change": change,
        "version": version,
        "status": status,
        "title": title,
        "updated_at": updated_at,
        "path": f"/v1/nodes/{node_id}",
        "revision": revision,
        "answer_state": best_answer_state([r.answer_state for r in stats]) if stats else "draft",
        "needs_review": bool(reasons),
        "evidence_seq": evidence_seq,  # the node's last feedback id: sync pulls new evidence when it grows
    }
    if reasons:
        entry["review_reasons"] = reasons
    if merged:
        entry["merged_from"] = merged  # a sync makes each of them answer with this node
    if canonical:
        entry["merged_into"] = canonical  # ... and this one with its canonical node, whichever comes later
    return entry


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


def _etag(version: str, revision: int, status: str, request: ReadRequest, stats: Iterable[Any] = ()) -> str:
    # Evidence changes a read without a new revision, so it is part of the tag.
    evidence = [[r.solution_id, r.solution_revision, r.cluster, r.sample_size, r.failure_state] for r in stats]
    shape = canonical_json(
        [version, revision, status, request.env_text, request.solution, request.fields, request.include, evidence]
    )
    return '"' + hashlib.sha256(shape.encode("utf-8")).hexdigest()[:32] + '"'


def load_documents(paths: Iterable[str | Path]) -> list[tuple[str, Any]]:
    """(source, raw document) pairs from JSON documents, JSON arrays and JSONL files; folders recursively.

    A file that cannot be parsed yields one entry whose document is an `InvalidSource`.
    """
    found: list[tuple[str, Any]] = []
    for path in map(Path, paths):
        files = (
            sorted(p for p in path.rglob("*") if p.suffix in {".json", ".jsonl"} and p.is_file())
            if path.is_dir()
            else [path]
        )
        for file in files:
            found.extend(_parse_file(file))
    return found


def _parse_file(file: Path) -> list[tuple[str, Any]]:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return [(str(file), InvalidSource(str(error)))]
    if file.suffix == ".jsonl":
        items = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append((f"{file}:{number}", json.loads(line)))
                except json.JSONDecodeError as error:
                    items.append((f"{file}:{number}", InvalidSource(f"invalid JSON: {error}")))
        return items
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return [(str(file), InvalidSource(f"invalid JSON: {error}"))]
    if isinstance(value, list):
        return [(f"{file}[{index}]", item) for index, item in enumerate(value)]
    return [(str(file), value)]
