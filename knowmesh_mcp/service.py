"""The service facade: the one place every interface calls.

An MCP tool, an HTTP route and a CLI command that do the same thing call the same method
here, so they cannot disagree. Methods take plain values, return JSON-ready dicts, and
raise `KnowmeshError` with the spec's status and code.
"""

from __future__ import annotations

import base64
import binascii
import sqlite3
from datetime import UTC, datetime, timedelta
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import next_steps
from .environment import (
    Environment,
    describe_scope,
    env_from_mapping,
    parse_env,
    scope_matches,
    scopes_overlap,
    solution_scope,
)
from .evidence import OUTCOMES, Evidence, node_stats
from .errors import KnowmeshError, bad_parameter, not_found
from .markdown import render_article
from .model import (
    InvalidNode,
    NodeDocument,
    canonical_json,
    check_node_id,
    document_version,
    validate_node,
)
from .normalize import NORMALIZER_VERSION, canonical_ecosystem, quoted_values, signature_hash
from .reading import (
    FIELD_SECTIONS,
    INCLUDES,
    LIST_FIELDS,
    ReadRequest,
    article_view,
    choose_answer,
    list_entry,
    scoped_solutions,
    parse_list,
    search_result,
)
from .search import SEARCH_INDEX_VERSION, TIERS, QueryPlan, find, index_row, similar_nodes
from .articles import apply_ops, field_changes, revert_changes
from .store import Edit, NewNode, RevisionRow, StatsRow, Store, Writer, store_dir, utc_now

MAX_LIST_LIMIT = 100
DEFAULT_LIST_LIMIT = 50
DEFAULT_SEARCH_LIMIT = 5
MAX_SEARCH_LIMIT = 20
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


def llms_txt() -> str:
    """The agent entry point (`llms.txt`), from the wheel or the checkout."""
    here = Path(__file__).parent
    for candidate in (here / "llms.txt", here.parent / "llms.txt"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    raise FileNotFoundError("llms.txt is missing from the installation")


def invalid_node_error(error: InvalidNode) -> KnowmeshError:
    problems = [p.model_dump() for p in error.problems]
    first = problems[0]
    return KnowmeshError(
        400, "invalid_node", f"{first['field']}: {first['message']}" + (
            f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        ),
        field=first["field"], problems=problems,
    )


def require_node_id(node_id: str) -> str:
    problems = check_node_id(node_id)
    if problems:
        raise KnowmeshError(400, "invalid_id", problems[0].message, field="id", id=node_id[:200])
    return node_id


def behavior_hash(solution: dict[str, Any]) -> str:
    """What a solution does: its fix steps and verify block. Metadata edits leave it unchanged."""
    verify = solution["verify"]
    behavior = "\x1e".join([*solution["fix"], "\x1d", verify["command"], verify.get("expected") or ""])
    return hashlib.sha256(behavior.encode("utf-8")).hexdigest()


def check_overlaps(document: NodeDocument) -> None:
    """At most one answer per environment scope: 409 overlapping_answer otherwise."""
    node_environment = document.signature.environment
    scoped = [(s.id, solution_scope(s.env, node_environment)) for s in document.content.solutions]
    conflicts = []
    for i, (first_id, first) in enumerate(scoped):
        for second_id, second in scoped[i + 1 :]:
            if scopes_overlap(first, second):
                conflicts.append({
                    "solutions": [first_id, second_id],
                    "scopes": [describe_scope(first), describe_scope(second)],
                })
    if conflicts:
        pair = conflicts[0]["solutions"]
        raise KnowmeshError(
            409, "overlapping_answer",
            f"solutions {pair[0]!r} and {pair[1]!r} could both apply on one machine; one answer per "
            "environment: merge them, or give them disjoint OS families or runtime version ranges",
            conflicting_answers=conflicts,
        )


def encode_cursor(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, Any]:
    try:
        payload = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise bad_parameter("cursor", "cursor is not one this server issued", code="invalid_cursor") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("after"), str):
        raise bad_parameter("cursor", "cursor is not one this server issued", code="invalid_cursor")
    return payload


@dataclass
class Prepared:
    """A validated document with everything its insert needs, computed outside the transaction."""

    document: NodeDocument
    body: dict[str, Any]
    body_json: str
    version: str
    signature_hash: str
    quoted_values: list[str]

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

    def new_node(self, *, kind: str, agent: dict[str, Any] | None, summary: str) -> NewNode:
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
            index=index_row(self.body),
            revision_id="rev_" + secrets.token_hex(12),
            kind=kind,
            agent_id=(agent or {}).get("id"),
            model=(agent or {}).get("model"),
            summary=summary,
            changes_json=json.dumps([{"op": "create", "path": "", "value": None}]),
        )


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


# -- article edits (spec: "Article revision API"; protocol sections 6 and 7) -------------------

ARTICLE_CACHE_CONTROL = "public, no-cache, must-revalidate"
MAX_SUMMARY = 500
MAX_AGENT_ID = 200


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_agent(agent: Any) -> dict[str, str]:
    """`agent.id` is required on edits: it is the author of record and, later, the voter."""
    if not isinstance(agent, dict) or not isinstance(agent.get("id"), str) or not agent["id"].strip():
        raise bad_parameter("agent", "agent.id is required: a stable id for you, e.g. {\"id\": \"agent-a1\"}",
                            code="missing_agent")
    if len(agent["id"]) > MAX_AGENT_ID or (agent.get("model") is not None and not isinstance(agent.get("model"), str)):
        raise bad_parameter("agent", f"agent.id must be at most {MAX_AGENT_ID} characters and agent.model a string")
    return {"id": agent["id"].strip(), **({"model": agent["model"]} if agent.get("model") else {})}


def check_summary(summary: Any) -> str:
    if not isinstance(summary, str) or not summary.strip():
        raise bad_parameter("summary", "summary is required: one line saying what the edit changes", code="missing_summary")
    if len(summary) > MAX_SUMMARY:
        raise bad_parameter("summary", f"summary must be at most {MAX_SUMMARY} characters")
    return summary.strip()


def check_base_revision(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad_parameter("base_revision", "base_revision is required: the revision number you read (an integer >= 1)",
                            code="missing_base_revision")
    return value


def revision_entry(row: RevisionRow) -> dict[str, Any]:
    return {
        "revision": row.revision,
        "revision_id": row.revision_id,
        "parent_revision": row.parent_revision,
        "kind": row.kind,
        "agent": {"id": row.agent_id, "model": row.model} if row.agent_id else None,
        "summary": row.summary,
        "content_hash": row.version,
        "changes": row.changes,
        "reverts_revision_id": row.reverts_revision_id,
        "created_at": row.created_at,
    }


class ArticleEditing:
    """Mixed into Service: current articles, edits, conflicts, undo and history."""

    store: Store

    async def read_article(self, node_id: str) -> ReadResult:
        """GET /v1/nodes/{id}/article: the document to edit, with the revision to send as base."""
        require_node_id(node_id)
        row = await self.store.get_node(node_id)
        if row is None:
            raise not_found("node", node_id)
        article = {**row.document, "status": row.status, "version": row.version}
        article["content"] = {
            **article["content"],
            "solutions": [{**s, "revision": row.solution_revisions.get(s["id"], 1)} for s in article["content"]["solutions"]],
        }
        body = {
            "id": node_id, "revision": row.revision, "version": row.version, "status": row.status,
            "has_answer": row.has_answer, "updated_at": row.updated_at, "trust": "untrusted-data", "article": article,
        }
        etag = '"' + hashlib.sha256(f"article|{row.version}|{row.revision}|{row.status}".encode()).hexdigest()[:32] + '"'
        return ReadResult(body=body, etag=etag, cache_control=ARTICLE_CACHE_CONTROL)

    async def patch_article(self, node_id: str, *, base_revision: Any, ops: Any, agent: Any, summary: Any) -> dict[str, Any]:
        """PATCH /v1/nodes/{id}/article: JSON Pointer set/remove ops, published at once."""
        require_node_id(node_id)
        base, author, text = check_base_revision(base_revision), check_agent(agent), check_summary(summary)
        if not isinstance(ops, list) or not ops:
            raise bad_parameter("ops", "ops must be a non-empty list of {op, path, value} operations", code="invalid_op")
        async with self.store.write() as tx:
            current_revision, current, status = await self._editable(tx, node_id, base)
            edited = apply_ops(current, ops)
            return await self._publish(tx, node_id, current, edited, status, current_revision, author, text, "edit")

    async def revise_article(self, node_id: str, *, base_revision: Any, article: Any, agent: Any, summary: Any) -> dict[str, Any]:
        """POST /v1/nodes/{id}/article/revisions: the whole document, published at once."""
        require_node_id(node_id)
        base, author, text = check_base_revision(base_revision), check_agent(agent), check_summary(summary)
        if not isinstance(article, dict):
            raise KnowmeshError(400, "invalid_node", "article must be the complete node document (a JSON object)", field="/")
        async with self.store.write() as tx:
            current_revision, current, status = await self._editable(tx, node_id, base)
            for field_name in ("id", "ecosystem", "license"):
                if field_name in article and article[field_name] != current[field_name]:
                    raise KnowmeshError(400, "immutable_field", f"{field_name} cannot change in a revision", field=f"/{field_name}")
            edited = {key: value for key, value in article.items() if key not in {"status", "version"}}
            edited = {**edited, "id": current["id"], "ecosystem": current["ecosystem"], "license": current["license"]}
            return await self._publish(tx, node_id, current, edited, status, current_revision, author, text, "edit")

    async def undo_edit(self, revision_id: Any, *, undo_token: Any, agent: Any, summary: Any) -> dict[str, Any]:
        """POST /v1/article-revisions/{id}/undo: append the reverse of one edit, with its one-time token."""
        if not isinstance(revision_id, str) or not revision_id.strip():
            raise bad_parameter("revision_id", "revision_id is required")
        author, text = check_agent(agent), check_summary(summary)
        if not isinstance(undo_token, str) or not undo_token:
            raise KnowmeshError(401, "missing_undo_token", "send the edit's undo token: Authorization: Bearer <undo_token>")
        async with self.store.write() as tx:
            target = await tx.revision(revision_id)
            stored = await tx.undo_token(revision_id) if target else None
            if target is None:
                raise not_found("revision", revision_id)
            if stored is None:
                raise KnowmeshError(403, "undo_not_allowed", "this revision has no undo token (a creation or import)")
            if not hmac.compare_digest(token_hash(undo_token), stored[0]):
                raise KnowmeshError(403, "invalid_undo_token", "the undo token does not belong to this revision")
            if stored[1] is not None:
                raise KnowmeshError(403, "undo_token_used", "this undo token was already used; undo tokens work once")
            current_revision, current, status = await self._editable(tx, target.node_id, None)
            reverted, conflicts = revert_changes(current, target.changes)
            if conflicts:
                raise KnowmeshError(
                    409, "undo_conflict", "later edits changed fields this undo would overwrite; edit them instead",
                    fields=conflicts, current_revision=current_revision,
                )
            await tx.spend_undo_token(revision_id)
            return await self._publish(tx, target.node_id, current, reverted, status, current_revision, author,
                                       text, "undo", reverts=revision_id)

    async def article_history(
        self, node_id: str, *, from_revision: Any = None, to_revision: Any = None
    ) -> dict[str, Any]:
        """GET /v1/nodes/{id}/article/revisions: every revision, or the field-level diff between two."""
        require_node_id(node_id)
        row = await self.store.get_node(node_id)
        if row is None:
            raise not_found("node", node_id)
        if from_revision is None and to_revision is None:
            revisions = await self.store.revisions(node_id)
            return {"id": node_id, "current_revision": row.revision, "revisions": [revision_entry(r) for r in revisions]}
        first = _revision_param("from_revision", 1 if from_revision is None else from_revision, row.revision)
        last = _revision_param("to_revision", row.revision if to_revision is None else to_revision, row.revision)
        before, after = await self.store.document_at(node_id, first), await self.store.document_at(node_id, last)
        assert before is not None and after is not None
        return {"id": node_id, "current_revision": row.revision, "from_revision": first, "to_revision": last,
                "changes": field_changes(before, after)}

    async def _editable(self, tx: Writer, node_id: str, base: int | None) -> tuple[int, dict[str, Any], str]:
        state = await tx.node_for_edit(node_id)
        if state is None:
            raise not_found("node", node_id)
        current_revision, current, status = state
        if base is not None and base != current_revision:
            since = await tx.revisions_after(node_id, base) if base < current_revision else []
            raise KnowmeshError(
                409, "revision_conflict",
                f"the article is at revision {current_revision}, not {base}: reread it, integrate the changes, resubmit",
                current_revision=current_revision,
                changes_since_base=[revision_entry(r) for r in since],
            )
        return current_revision, current, status

    async def _publish(
        self, tx: Writer, node_id: str, current: dict[str, Any], edited: dict[str, Any], status: str,
        current_revision: int, agent: dict[str, str], summary: str, kind: str, *, reverts: str | None = None,
    ) -> dict[str, Any]:
        """Validate the complete edited document like a new one and make it current, in the caller's transaction."""
        try:
            document = validate_node({**edited, "status": status})
        except InvalidNode as error:
            raise invalid_node_error(error) from None
        check_overlaps(document)
        prepared = Prepared.of(document)
        changes = field_changes(current, prepared.body)
        if not changes:
            raise KnowmeshError(400, "no_change", "the edit leaves the article exactly as it is")
        known = await tx.solution_behaviours(node_id)
        revisions: dict[str, int] = {}
        new_rows: list[tuple[str, int, str]] = []
        for solution in prepared.body["content"]["solutions"]:
            digest = behavior_hash(solution)
            seen = known.get(solution["id"], {})
            if digest in seen:  # same behaviour as before (or reverted to it): same revision
                revisions[solution["id"]] = seen[digest]
            else:
                revisions[solution["id"]] = max(seen.values(), default=0) + 1
                new_rows.append((solution["id"], revisions[solution["id"]], digest))
        token = secrets.token_urlsafe(24)  # 192 bits; only its hash is stored
        revision = current_revision + 1
        edit = Edit(
            node_id=node_id, title=document.title, version=prepared.version, document_json=prepared.body_json,
            solution_revisions=revisions, new_solution_revisions=new_rows,
            has_answer=bool(prepared.body["content"]["solutions"]), signature_hash=prepared.signature_hash,
            quoted_values=prepared.quoted_values, index=index_row(prepared.body), revision_id="rev_" + secrets.token_hex(12),
            revision=revision, kind=kind, agent_id=agent["id"], model=agent.get("model"), summary=summary,
            changes_json=json.dumps(changes, ensure_ascii=False), undo_token_hash=token_hash(token),
            reverts_revision_id=reverts,
        )
        created_at = await tx.apply_edit(edit)
        await archive_answered_failures(tx, node_id, prepared.body, edit.revision_id)
        # Evidence stays with each solution revision; the node-wide rows follow the current answers.
        await tx.replace_stats(node_id, node_stats(await tx.feedback_of(node_id), revisions, datetime.now(UTC)))
        return {
            "id": node_id, "revision_id": edit.revision_id, "revision": revision, "parent_revision": current_revision,
            "kind": kind, "version": prepared.version, "undo_token": token, "changes": changes,
            "solutions": revisions, "created_at": created_at, "path": f"/v1/nodes/{node_id}",
            "candidate_state": "draft", "candidate_note": next_steps.CANDIDATE_NOTE,
        }


def _revision_param(name: str, value: Any, current: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise bad_parameter(name, f"{name} must be a revision number") from None
    if not 1 <= number <= current:
        raise bad_parameter(name, f"{name} must be between 1 and {current}", code="revision_not_found")
    return number


class OutcomeReporting:
    """Mixed into Service: outcome reports and the evidence they derive (protocol section 4)."""

    store: Store

    async def ip_hash(self, address: str | None) -> str | None:
        """A keyed hash of a client address (secret made once per database); never the address."""
        if not address:
            return None
        secret = await self.store.get_meta("ip_hash_secret")
        if secret is None:
            async with self.store.write() as tx:
                await tx.connection.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('ip_hash_secret', ?)", (secrets.token_hex(32),)
                )
            secret = await self.store.get_meta("ip_hash_secret")
        assert secret is not None
        return hmac.new(secret.encode(), address.encode(), hashlib.sha256).hexdigest()

    async def check_submission(self, subject: str | None, limit: int) -> None:
        """Rate limit of the spec: `limit` accepted submissions per hour per subject (0: off)."""
        if limit > 0 and subject and await self.store.writes_in(subject, _hour()) >= limit:
            raise KnowmeshError(429, "rate_limited", f"at most {limit} submissions per hour per agent or address; "
                                "try again next hour", limit=limit)

    async def record_submission(self, subject: str | None) -> None:
        """Count an accepted submission; refused input never uses up the allowance."""
        if subject:
            async with self.store.write() as tx:
                await tx.count_write(subject, _hour())

    async def report_outcome(self, report: Any, *, ip_hash: str | None = None) -> dict[str, Any]:
        """POST /v1/feedback: record what happened when an agent ran an answer. 202 when accepted."""
        if not isinstance(report, dict):
            raise KnowmeshError(400, "invalid_feedback", "the report must be a JSON object", field="/")
        outcome = report.get("outcome")
        if outcome not in OUTCOMES:
            raise bad_parameter("outcome", f"outcome must be one of {', '.join(OUTCOMES)}", code="invalid_outcome")
        node_id = report.get("node")
        if not isinstance(node_id, str):
            raise bad_parameter("node", "node is required: the node id you read", code="invalid_feedback")
        require_node_id(node_id)
        solution_id = report.get("solution")
        if not isinstance(solution_id, str) or not solution_id:
            raise bad_parameter("solution", "solution is required: the id of the answer you ran", code="invalid_feedback")
        env_object = report.get("env") if isinstance(report.get("env"), dict) else {}
        environment = env_from_mapping(env_object)
        agent = report.get("agent")
        agent_id = agent.get("id") if isinstance(agent, dict) and isinstance(agent.get("id"), str) and agent["id"].strip() else None
        model = agent.get("model") if isinstance(agent, dict) and isinstance(agent.get("model"), str) else None
        evidence_object = report.get("evidence") if isinstance(report.get("evidence"), dict) else {}
        exit_code = evidence_object.get("exit_code")
        reason = report.get("reason") if isinstance(report.get("reason"), str) and report["reason"].strip() else None
        if outcome == "solved" and (isinstance(exit_code, bool) or exit_code != 0):
            raise bad_parameter("evidence.exit_code", "solved requires evidence.exit_code = 0: run the verify command first",
                                code="invalid_feedback")
        if outcome in ("failed", "dangerous") and reason is None:
            raise bad_parameter("reason", f"{outcome} requires reason: what happened", code="invalid_feedback")
        if outcome == "failed" and agent_id is None:
            raise bad_parameter("agent.id", "failed requires agent.id: failures are votes of distinct agents",
                                code="invalid_feedback")
        if outcome in ("failed", "env_mismatch") and not (environment.os or environment.runtimes or environment.pkg_manager):
            raise bad_parameter("env", "give at least one of env.os, env.runtime, env.pkg_manager", code="invalid_feedback")
        note = report.get("note") if isinstance(report.get("note"), str) else None
        async with self.store.write() as tx:
            state = await tx.node_for_edit(node_id)
            if state is None:
                raise not_found("node", node_id)
            current_revision, document, _ = state
            known = await tx.solution_behaviours(node_id)
            if solution_id not in known:
                raise not_found("solution", solution_id)
            current = _current_revisions(document, known)
            revision = report.get("revision", current.get(solution_id))
            if revision is None:
                raise bad_parameter("revision", "this answer was removed: give the revision you ran", code="invalid_feedback")
            if isinstance(revision, bool) or not isinstance(revision, int) or revision not in known[solution_id].values():
                raise not_found("revision", str(revision))
            version = report.get("node_version")
            if version is not None and (not isinstance(version, str) or await self.store.get_version(node_id, version) is None):
                raise not_found("version", str(version))
            cluster = environment.cluster()
            key = (solution_id, revision, cluster)
            before = {_stats_key(r): r for r in await self._stats_rows(tx, node_id, current)}
            row = {
                "node_id": node_id, "node_version": version, "solution_id": solution_id, "solution_revision": revision,
                "outcome": outcome, "cluster": cluster, "environment": canonical_json(environment.to_dict()),
                "agent_id": agent_id, "model": model, "ip_hash": ip_hash if agent_id is None else None,
                "reason": reason, "note": note,
                "evidence_hash": hashlib.sha256(canonical_json(evidence_object).encode()).hexdigest() if evidence_object else None,
                "exit_code": exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
                "created_at": utc_now(),
            }
            try:
                report_id = await tx.insert_feedback(row)
            except sqlite3.IntegrityError:
                raise KnowmeshError(409, "duplicate_report", "this agent already reported on this answer revision in "
                                    "this environment; one agent is one vote") from None
            after = await self._stats_rows(tx, node_id, current)
            await tx.replace_stats(node_id, after)
        old = before.get(key)
        now_row = next(r for r in after if _stats_key(r) == key)
        body: dict[str, Any] = {
            "ok": True, "accepted": True, "id": report_id, "node": node_id, "solution": solution_id,
            "revision": revision, "outcome": outcome, "cluster": cluster,
            "failure_state": now_row.failure_state, "answer_state": now_row.answer_state,
            "counts": {"failed_agents": now_row.failed_agents, "solved_agents": now_row.solved_agents},
            "anonymous": agent_id is None,
        }
        flipped = now_row.failure_state in ("known_failed", "disputed") and (old is None or old.failure_state != now_row.failure_state)
        if flipped:
            blocked_solution = {"id": solution_id, "revision": revision}
            body["next"] = next_steps.blocked(node_id, current_revision, environment.to_dict(), blocked_solution)
        return body

    @staticmethod
    async def _stats_rows(tx: Writer, node_id: str, current: dict[str, int]) -> list[StatsRow]:
        return node_stats(await tx.feedback_of(node_id), current, datetime.now(UTC))


def _hour() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H")


def submitter(agent: Any, ip_hash: str | None) -> str | None:
    """Who a submission counts against: its agent.id, else the keyed hash of its address."""
    if isinstance(agent, dict) and isinstance(agent.get("id"), str) and agent["id"].strip():
        return "agent:" + agent["id"].strip()
    return f"ip:{ip_hash}" if ip_hash else None


def _stats_key(row: StatsRow) -> tuple[str, int, str]:
    return row.solution_id, row.solution_revision, row.cluster


def _current_revisions(document: dict[str, Any], known: dict[str, dict[str, int]]) -> dict[str, int]:
    """{solution id: the revision of its current behaviour}."""
    return {s["id"]: known.get(s["id"], {}).get(behavior_hash(s), 1) for s in document["content"]["solutions"]}


MAX_STEPS = 50
MAX_TEXT = 4000


class FailedAttempts:
    """Mixed into Service: shared failed approaches while no answer applies (protocol section 5)."""

    store: Store

    async def report_failed_attempt(self, node_id: str, attempt: Any, *, ip_hash: str | None = None) -> dict[str, Any]:
        """POST /v1/nodes/{id}/failures: record an approach that did not work, for the next agent."""
        require_node_id(node_id)
        if not isinstance(attempt, dict):
            raise KnowmeshError(400, "invalid_failure", "the report must be a JSON object", field="/")
        environment = env_from_mapping(attempt.get("environment") if isinstance(attempt.get("environment"), dict) else {})
        if not (environment.os or environment.runtimes or environment.pkg_manager):
            raise bad_parameter("environment", "give at least one of environment.os, .runtime, .pkg_manager",
                                code="invalid_failure")
        texts = {}
        for name in ("summary", "reason"):
            value = attempt.get(name)
            if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
                raise bad_parameter(name, f"{name} is required (at most {MAX_TEXT} characters)", code="invalid_failure")
            texts[name] = value.strip()
        steps = attempt.get("steps")
        if (not isinstance(steps, list) or not steps or len(steps) > MAX_STEPS
                or not all(isinstance(step, str) and step.strip() and len(step) <= MAX_TEXT for step in steps)):
            raise bad_parameter("steps", f"steps must be 1 to {MAX_STEPS} commands you ran", code="invalid_failure")
        agent = attempt.get("agent") if isinstance(attempt.get("agent"), dict) else {}
        agent_id = agent.get("id") if isinstance(agent.get("id"), str) and agent["id"].strip() else None
        async with self.store.write() as tx:
            state = await tx.node_for_edit(node_id)
            if state is None:
                raise not_found("node", node_id)
            _, document, _ = state
            known = await tx.solution_behaviours(node_id)
            current = _current_revisions(document, known)
            evidence = Evidence(await self._stats_rows(tx, node_id, current))  # type: ignore[attr-defined]
            scoped = scoped_solutions(document, current, evidence, environment)
            usable, _ = choose_answer(scoped, environment)
            if usable is not None:
                raise KnowmeshError(
                    409, "answer_exists",
                    f"answer {usable['id']!r} applies to your environment: run it and report the outcome with "
                    "POST /v1/feedback (MCP report_outcome) instead",
                    solution=usable["id"], revision=usable["revision"],
                )
            failure_id = await tx.insert_failure({
                "node_id": node_id, "environment": canonical_json(environment.to_dict()), "cluster": environment.cluster(),
                "summary": texts["summary"], "steps": json.dumps([s.strip() for s in steps], ensure_ascii=False),
                "reason": texts["reason"], "agent_id": agent_id,
                "model": agent.get("model") if isinstance(agent.get("model"), str) else None,
                "ip_hash": ip_hash if agent_id is None else None, "created_at": utc_now(),
            })
        return {"ok": True, "accepted": True, "id": failure_id, "node": node_id, "cluster": environment.cluster(),
                "archived": False, "path": f"/v1/nodes/{node_id}/failures"}

    async def list_failures(self, node_id: str) -> dict[str, Any]:
        """GET /v1/nodes/{id}/failures: every shared failed approach, visible and archived."""
        require_node_id(node_id)
        if await self.store.get_node(node_id) is None:
            raise not_found("node", node_id)
        return {"id": node_id, "failures": await self.store.failures_of(node_id), "trust": "untrusted-data"}


async def archive_answered_failures(tx: Writer, node_id: str, document: dict[str, Any], revision_id: str) -> None:
    """Archive the failed attempts that a published answer now covers (never delete them)."""
    open_failures = await tx.open_failures(node_id)
    if not open_failures or not document["content"]["solutions"]:
        return
    node_environment = document["signature"].get("environment", [])
    scopes = [solution_scope(s.get("env", []), node_environment) for s in document["content"]["solutions"]]
    covered = [failure_id for failure_id, environment in open_failures
               if any(scope_matches(scope, stored_environment(environment)) for scope in scopes)]
    await tx.archive_failures(covered, revision_id)


def stored_environment(environment: dict[str, Any]) -> Environment:
    """An Environment back from its stored `to_dict()` form."""
    return Environment(os=environment.get("os"), os_version=environment.get("os_version"),
                       runtimes=dict(environment.get("runtimes") or {}), pkg_manager=environment.get("pkg_manager"),
                       labels=tuple(environment.get("labels") or ()))


REVIEW_REASONS = ("failed_answer", "disputed", "unsolved", "failure_after_edit", "stale", "needs_second_verification")
MAX_REVIEW_LIMIT = 200


class ReviewQueue:
    """Mixed into Service: what needs attention, highest priority first (protocol section 8)."""

    store: Store

    async def review_queue(self, *, limit: Any = None) -> dict[str, Any]:
        if limit is None:
            limit = 50
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_REVIEW_LIMIT:
            raise bad_parameter("limit", f"limit must be between 1 and {MAX_REVIEW_LIMIT}")
        now = datetime.now(UTC)
        year_ago = (now - timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        day_ago = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        sources = {
            "failed_answer": lambda n: self.store.answers_in_state("known_failed", n),
            "disputed": lambda n: self.store.answers_in_state("disputed", n),
            "unsolved": self.store.unsolved_nodes,
            "failure_after_edit": self.store.failures_after_edit,
            "stale": lambda n: self.store.stale_nodes(year_ago, n),
            "needs_second_verification": lambda n: self.store.awaiting_second_verification(day_ago, n),
        }
        items: list[dict[str, Any]] = []
        seen: set[tuple[str, str | None]] = set()
        for reason in REVIEW_REASONS:
            if len(items) >= limit:
                break
            for node_id, title, base, solution, revision, cluster, reports in await sources[reason](limit):
                if (node_id, solution) in seen or len(items) >= limit:
                    continue
                if reason == "stale":  # a node-level finding: name its first answer
                    row = await self.store.get_node(node_id)
                    if row is None or not row.document["content"]["solutions"]:
                        continue
                    solution = row.document["content"]["solutions"][0]["id"]
                    revision = row.solution_revisions.get(solution, 1)
                seen.add((node_id, solution))
                items.append(_review_item(reason, node_id, title, base, solution, revision, cluster, reports))
        return {"reasons": list(REVIEW_REASONS), "limit": limit, "items": items, "trust": "untrusted-data"}


def _review_item(reason: str, node_id: str, title: str, base: int, solution: str | None, revision: int | None,
                 cluster: str | None, reports: int) -> dict[str, Any]:
    item: dict[str, Any] = {
        "reason": reason, "id": node_id, "title": title, "path": f"/v1/nodes/{node_id}", "html_path": f"/nodes/{node_id}",
        "base_revision": base, "solution": solution, "revision": revision, "environment": cluster or None,
        "reports": reports,
    }
    if solution is None:
        item["next"] = {"patch_article": next_steps.add_answer(node_id, base, None)}
    else:
        item["next"] = {
            "report_outcome": next_steps.report_outcome(node_id, solution, revision or 1, cluster),
            "patch_article": next_steps.replace_answer(node_id, base, {"id": solution}),
        }
    return item


def review_markdown(queue: dict[str, Any], base_url: str = "$KNOWMESH_URL") -> str:
    """/review.md: the same queue for a person or an agent that prefers text."""
    lines = ["# Review queue", "", "Answers that need attention, highest priority first. Node text is untrusted data.", ""]
    if not queue["items"]:
        lines.append("Nothing needs attention.")
    for number, item in enumerate(queue["items"], 1):
        answer = f"answer `{item['solution']}` revision {item['revision']}" if item["solution"] else "no answer yet"
        where = f", environment `{item['environment']}`" if item["environment"] else ""
        lines += [f"{number}. **{item['reason']}**: [{item['id']}]({item['html_path']}), {answer}{where}, "
                  f"{item['reports']} report(s), base_revision {item['base_revision']}"]
        for key, request in item["next"].items():
            lines.append(f"   - {key}: `{request['method']} {base_url}{request['path']}` (MCP `{request['tool']}`)")
    return "\n".join(lines) + "\n"


class Dedupe:
    """Mixed into Service: suspected duplicates settled by distinct agents' votes, never auto-merged."""

    store: Store

    async def open_dedupe_task(self, body: Any) -> dict[str, Any]:
        """POST /v1/dedupe/tasks: queue a pair (`node`, `candidate`) that may be one problem."""
        if not isinstance(body, dict):
            raise KnowmeshError(400, "invalid_dedupe", "the request must be a JSON object", field="/")
        first, second = body.get("node"), body.get("candidate")
        for name, value in (("node", first), ("candidate", second)):
            if not isinstance(value, str):
                raise bad_parameter(name, f"{name} is required: a node id", code="invalid_dedupe")
            require_node_id(value)
        if first == second:
            raise bad_parameter("candidate", "a node cannot duplicate itself", code="invalid_dedupe")
        agent = body.get("agent") if isinstance(body.get("agent"), dict) else {}
        async with self.store.write() as tx:
            for value in (first, second):
                if not await tx.versions_of([value]):
                    raise not_found("node", value)
            existing = await tx.dedupe_task_for(first, second)
            task_id = existing or await tx.insert_dedupe_task(
                first, second, body.get("reason") if isinstance(body.get("reason"), str) else None,
                agent.get("id") if isinstance(agent.get("id"), str) else None,
            )
        return {"ok": True, "task_id": task_id, "created": existing is None, "path": "/dedupe.md",
                "vote": {"method": "POST", "path": f"/v1/dedupe/tasks/{task_id}/votes",
                         "body": {"vote": "<same | different>", "canonical_id": f"<{first} or {second}, when same>",
                                  "agent": {"id": "<your-agent-id>"}}}}

    async def vote_dedupe(self, task_id: Any, body: Any) -> dict[str, Any]:
        """Two `same` votes on one canonical id flag the pair for an administrator; two `different` close it."""
        if not isinstance(body, dict) or body.get("vote") not in ("same", "different"):
            raise bad_parameter("vote", "vote must be same or different", code="invalid_dedupe")
        agent = check_agent(body.get("agent"))
        try:
            number = int(task_id)
        except (TypeError, ValueError):
            raise not_found("dedupe_task", str(task_id)) from None
        async with self.store.write() as tx:
            task = await tx.dedupe_task(number)
            if task is None:
                raise not_found("dedupe_task", str(task_id))
            first, second, current_status = task
            canonical = body.get("canonical_id")
            if body["vote"] == "same" and canonical not in (first, second):
                raise bad_parameter("canonical_id", "a same vote names the node to keep: one of the pair",
                                    code="invalid_dedupe")
            if current_status != "open":
                raise KnowmeshError(409, "dedupe_settled", f"this task is already {current_status}")
            try:
                await tx.add_dedupe_vote(number, agent["id"], body["vote"], canonical if body["vote"] == "same" else None)
            except sqlite3.IntegrityError:
                raise KnowmeshError(409, "duplicate_vote", "one vote per agent") from None
            votes = await tx.dedupe_votes(number)
            same = {}
            for _, vote, target in votes:
                if vote == "same":
                    same[target] = same.get(target, 0) + 1
            different = sum(1 for _, vote, _ in votes if vote == "different")
            status, settled_on = "open", None
            agreed = [target for target, count in same.items() if count >= 2]
            if agreed:
                status, settled_on = "flagged", agreed[0]
            elif different >= 2:
                status = "closed"
            if status != "open":
                await tx.set_dedupe_status(number, status, settled_on)
        return {"ok": True, "task_id": number, "status": status, "canonical_id": settled_on,
                "votes": {"same": sum(same.values()), "different": different}}

    async def dedupe_queue(self, *, limit: int = 50) -> dict[str, Any]:
        return {"tasks": await self.store.dedupe_tasks("open", limit), "trust": "untrusted-data"}


def dedupe_markdown(queue: dict[str, Any], base_url: str = "$KNOWMESH_URL") -> str:
    lines = ["# Duplicate candidates", "",
             "Two distinct agents voting `same` on one canonical id flag a pair for an administrator; two `different`",
             "votes close it. Nothing is merged automatically.", ""]
    if not queue["tasks"]:
        lines.append("No open tasks.")
    for task in queue["tasks"]:
        lines += [f"- task {task['task_id']}: `{task['node']}` vs `{task['candidate']}` "
                  f"(same {task['votes']['same']}, different {task['votes']['different']})",
                  f"  `POST {base_url}/v1/dedupe/tasks/{task['task_id']}/votes` with "
                  '`{"vote": "same", "canonical_id": "<id to keep>", "agent": {"id": "<you>"}}` or `{"vote": "different", ...}`']
    return "\n".join(lines) + "\n"


class Service(ArticleEditing, OutcomeReporting, FailedAttempts, ReviewQueue, Dedupe):
    """Knowmesh over one store."""

    def __init__(self, store: Store):
        self.store = store

    @classmethod
    async def open(cls, db_path: str | Path, *, seed: bool = True) -> Service:
        """Open (creating and migrating if needed) a database; a new one gets the starter corpus."""
        store = await Store.open(db_path)
        service = cls(store)
        try:
            await service._reindex_if_analysis_changed()
            if store.created and seed:
                documents = load_documents([store_dir() / "starter"])
                await service.import_documents(documents, summary="Starter corpus")
        except BaseException:
            await store.close()
            raise
        return service

    async def close(self) -> None:
        await self.store.close()

    async def _reindex_if_analysis_changed(self) -> None:
        """Signature hashes and the search index are derived: rebuild them when their code changed."""
        normalizer = await self.store.get_meta("normalizer_version")
        index = await self.store.get_meta("search_index_version")
        if normalizer == str(NORMALIZER_VERSION) and index == str(SEARCH_INDEX_VERSION):
            return
        documents = [(document["id"], document) async for document, _, _ in self.store.iter_current_documents()]
        async with self.store.write() as tx:
            await tx.set_signature_hashes((signature_hash(d["signature"]["error"]), node_id) for node_id, d in documents)
            await tx.write_search_rows([(node_id, index_row(d)) for node_id, d in documents])
            await tx.set_meta("normalizer_version", str(NORMALIZER_VERSION))
            await tx.set_meta("search_index_version", str(SEARCH_INDEX_VERSION))

    async def local_agent_id(self) -> str:
        """KNOWMESH_AGENT_ID, else an id made once per database (stable across restarts)."""
        if os.environ.get("KNOWMESH_AGENT_ID"):
            return os.environ["KNOWMESH_AGENT_ID"]
        existing = await self.store.get_meta("local_agent_id")
        if existing:
            return existing
        made = "local-" + secrets.token_hex(8)
        async with self.store.write() as tx:
            await tx.set_meta("local_agent_id", made)
        return await self.store.get_meta("local_agent_id") or made

    # -- create ------------------------------------------------------------------------

    async def create_node(self, raw: Any, *, agent: dict[str, Any] | None = None) -> dict[str, Any]:
        """POST /v1/nodes: publish a new problem (with or without an answer). Status is forced to draft."""
        if isinstance(raw, dict):
            raw = {**raw, "status": "draft", "license": "CC0-1.0"}
            raw.pop("version", None)
        try:
            document = validate_node(raw)
        except InvalidNode as error:
            raise invalid_node_error(error) from None
        check_overlaps(document)
        prepared = Prepared.of(document)
        async with self.store.write() as tx:
            if await tx.versions_of([document.id]):
                raise KnowmeshError(
                    409, "node_exists",
                    f"{document.id!r} already exists: improve that article with PATCH /v1/nodes/{document.id}/article",
                    top_level={"canonical": self._canonical(document.id),
                               "next": {"edit_article": next_steps.edit_article(document.id, await tx.current_revision(document.id))}},
                )
            duplicate = await tx.duplicate_of(prepared.signature_hash, prepared.quoted_values)
            if duplicate is not None:
                raise KnowmeshError(
                    409, "duplicate_node",
                    f"the same error (normalized signature and quoted values) is already {duplicate!r}: improve that article",
                    top_level={"canonical": self._canonical(duplicate),
                               "next": {"edit_article": next_steps.edit_article(duplicate, await tx.current_revision(duplicate))}},
                )
            await tx.insert_nodes([prepared.new_node(kind="create", agent=agent, summary="Create node")])
        similar = await similar_nodes(self.store, prepared.body)
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

    @staticmethod
    def _canonical(node_id: str) -> dict[str, str]:
        return {"id": node_id, "path": f"/v1/nodes/{node_id}", "html_path": f"/nodes/{node_id}"}

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
        row = await self.store.get_node(node_id)
        if row is None:
            raise not_found("node", node_id)
        stats = (await self.store.stats_of([node_id])).get(node_id, [])
        failures = await self.store.failures_of(node_id)
        body = article_view(
            document=row.document, version=row.version, status=row.status, revision=row.revision,
            solution_revisions=row.solution_revisions, created_at=row.created_at,
            updated_at=row.updated_at, request=request, evidence=Evidence(stats), failures=failures,
        )
        return ReadResult(body=body, etag=_etag(row.version, row.revision, row.status, request, stats))

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
            document=document, version=version, status=row.status, revision=revision,
            solution_revisions=solution_revisions,
            created_at=row.created_at, updated_at=created_at, request=request,
        )
        body["current_version"] = row.version
        return ReadResult(
            body=body, etag=_etag(version, revision, row.status, request),
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
        next_cursor = (
            encode_cursor({"after": page[-1].id, "ecosystem": ecosystem}) if len(rows) > limit else None
        )
        return {
            "nodes": [list_entry(r.document, status=r.status, updated_at=r.updated_at, fields=chosen) for r in page],
            "ecosystem": ecosystem,
            "limit": limit,
            "next_cursor": next_cursor,
        }

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
            raise bad_parameter("q", "q is required: pass the raw error text or a short description", code="missing_query")
        if limit is None:
            limit = DEFAULT_SEARCH_LIMIT
        if limit < 1:
            raise bad_parameter("limit", "limit must be a positive integer")
        limit = min(limit, MAX_SEARCH_LIMIT)
        machine = parse_env(env) if env and env.strip() else None
        wanted = canonical_ecosystem(ecosystem) if ecosystem and ecosystem.strip() else None
        plan = QueryPlan.of(q)
        hits = await find(self.store, plan, enough=limit, ecosystem=wanted)
        # Candidates beyond the page are read too: the ecosystem and environment can reorder them.
        rows = {row.pk: row for row in await self.store.get_nodes_by_pk([h.pk for h in hits[: max(3 * limit, 15)]])}
        evidence = await self.store.stats_of([row.id for row in rows.values()])
        now = datetime.now(UTC)
        ranked = []
        for hit in hits:
            row = rows.get(hit.pk)
            if row is None:
                continue
            result = search_result(
                row_document=row.document, version=row.version, status=row.status, revision=row.revision,
                solution_revisions=row.solution_revisions, env=machine, tier=hit.tier,
                document_size=row.document_size, evidence=Evidence(evidence.get(row.id, [])), now=now,
            )
            score = hit.score
            if result["env_score"] is not None:  # a small nudge inside the tier, never across tiers
                score -= 0.04 * (1 - result["env_score"])
            mismatch = wanted is not None and row.ecosystem != wanted
            ranked.append((mismatch, TIERS.index(hit.tier), -score, row.id, result))
        ranked.sort(key=lambda item: item[:4])
        results = []
        ceiling = 1.0
        for _, _, negative, _, result in ranked[:limit]:
            ceiling = min(ceiling, -negative)  # scores never increase down the list
            result["score"] = round(max(ceiling, 0.0), 4)
            results.append(result)
        envelope: dict[str, Any] = {
            "query": plan.text,
            "env": machine.to_dict() if machine else None,
            "ecosystem": wanted,
            "limit": limit,
            "results": results,
            "trust": "untrusted-data",
        }
        if not results:
            envelope["guidance"] = next_steps.publish_problem(
                plan.text, plan.lines, wanted or _guess_ecosystem(plan.text, machine), machine.to_dict() if machine else None
            )
        return envelope

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
        lossless), and no rate limit applies. Writes in batches, each one transaction.
        """
        report = ImportReport(dry_run=dry_run)
        batch: list[tuple[str, Prepared]] = []
        seen_ids: set[str] = set()
        for source, raw in documents:
            prepared = self._prepare_import(source, raw, report, seen_ids)
            if prepared is not None:
                batch.append((source, prepared))
            if len(batch) >= IMPORT_BATCH:
                await self._import_batch(batch, report, kind=kind, summary=summary)
                batch = []
        await self._import_batch(batch, report, kind=kind, summary=summary)
        return report

    def _prepare_import(
        self, source: str, raw: Any, report: ImportReport, seen_ids: set[str]
    ) -> Prepared | None:
        """Validate one imported document, or record why it is not imported."""
        if isinstance(raw, InvalidSource):
            report.invalid.append({"source": source, "id": None,
                                   "error": {"code": "invalid_json", "message": raw.reason}})
            return None
        try:
            if isinstance(raw, dict):
                raw = {key: value for key, value in raw.items() if key != "version"}
            document = validate_node(raw)
            check_overlaps(document)
        except InvalidNode as error:
            report.invalid.append({"source": source, "id": _raw_id(raw), "error": invalid_node_error(error).to_body()["error"]})
            return None
        except KnowmeshError as error:
            report.invalid.append({"source": source, "id": _raw_id(raw), "error": error.to_body()["error"]})
            return None
        if document.id in seen_ids:
            report.skipped.append({"source": source, "id": document.id, "reason": "duplicate id earlier in this import"})
            return None
        seen_ids.add(document.id)
        return Prepared.of(document)

    async def _import_batch(
        self, batch: list[tuple[str, Prepared]], report: ImportReport, *, kind: str, summary: str
    ) -> None:
        if not batch:
            return
        async with self.store.write() as tx:
            existing = await tx.versions_of([p.document.id for _, p in batch])
            fresh: list[NewNode] = []
            claimed: dict[str, list[tuple[list[str], str]]] = {}
            duplicates = await tx.signature_owners({p.signature_hash for _, p in batch})
            for source, prepared in batch:
                node_id = prepared.document.id
                if node_id in existing:
                    if existing[node_id] == prepared.version:
                        report.unchanged.append(node_id)
                    else:
                        report.skipped.append({"source": source, "id": node_id,
                                               "reason": "id exists with different content (edit the article instead)"})
                    continue
                owners = duplicates.get(prepared.signature_hash, []) + claimed.get(prepared.signature_hash, [])
                owner = next((oid for quoted, oid in owners if quoted == prepared.quoted_values), None)
                if owner is not None:
                    report.skipped.append({"source": source, "id": node_id, "reason": f"duplicate of {owner} (same normalized error)"})
                    continue
                claimed.setdefault(prepared.signature_hash, []).append((prepared.quoted_values, node_id))
                fresh.append(prepared.new_node(kind=kind, agent=None, summary=summary))
                report.created.append(node_id)
            if not report.dry_run:
                await tx.insert_nodes(fresh)

    async def export_documents(self) -> AsyncIterator[dict[str, Any]]:
        """Every current document with its status and version, in id order (what import reads back)."""
        async for document, status, version in self.store.iter_current_documents():
            yield {**document, "status": status, "version": version}


def _guess_ecosystem(query: str, env: Environment | None) -> str:
    lowered = query.lower()
    for ecosystem, hints in ECOSYSTEM_HINTS:
        if any(hint in lowered for hint in hints):
            return ecosystem
    if env is not None:
        for runtime in env.runtimes:
            return canonical_ecosystem(runtime)
    return "general"


def _raw_id(raw: Any) -> str | None:
    value = raw.get("id") if isinstance(raw, dict) else None
    return value if isinstance(value, str) else None


def _etag(version: str, revision: int, status: str, request: ReadRequest, stats: Iterable[Any] = ()) -> str:
    # Evidence changes a read without a new revision, so it is part of the tag.
    evidence = [[r.solution_id, r.solution_revision, r.cluster, r.sample_size, r.failure_state] for r in stats]
    shape = canonical_json([version, revision, status, request.env_text, request.solution, request.fields,
                            request.include, evidence])
    return '"' + hashlib.sha256(shape.encode("utf-8")).hexdigest()[:32] + '"'


def load_documents(paths: Iterable[str | Path]) -> list[tuple[str, Any]]:
    """(source, raw document) pairs from JSON documents, JSON arrays and JSONL files; folders recursively.

    A file that cannot be parsed yields one entry whose document is an `InvalidSource`.
    """
    found: list[tuple[str, Any]] = []
    for path in map(Path, paths):
        files = sorted(p for p in path.rglob("*") if p.suffix in {".json", ".jsonl"} and p.is_file()) if path.is_dir() else [path]
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


class InvalidSource:
    """Stands in for a document that could not even be read; validation reports `reason`."""

    def __init__(self, reason: str):
        self.reason = reason
