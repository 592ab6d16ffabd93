"""Article edits: the current article, JSON Pointer patches, whole revisions, conflicts,
token-authorized undo and history (spec "Article revision API"; protocol sections 6 and 7).

The document operations are pure (`articles`); this service runs them inside one write
transaction and publishes the result through `publish_edit`, the single edit path (a sync
publishes a local edit it keeps through it too).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from datetime import UTC, datetime
from typing import Any

from knowmesh_mcp.core import next_steps
from knowmesh_mcp.core.articles import apply_ops, field_changes, revert_changes
from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter, not_found
from knowmesh_mcp.core.evidence import node_stats
from knowmesh_mcp.core.identity import Actor, agent_object
from knowmesh_mcp.core.limits import MAX_INT, to_int
from knowmesh_mcp.core.rows import NodeForEdit
from knowmesh_mcp.search.query import index_row
from knowmesh_mcp.services.failed_attempts import archive_answered_failures
from knowmesh_mcp.services.maintaining import follow_redirect, refuse_merged
from knowmesh_mcp.services.node_reads import NodeReads
from knowmesh_mcp.services.publishing import (
    author_of,
    behavior_hash,
    check_summary,
    prepare_off_loop,
    require_node_id,
)
from knowmesh_mcp.services.reading import ReadRequest, ReadResult, editable_document, parse_list
from knowmesh_mcp.store import Edit, RevisionRow, Store, Writer

ARTICLE_CACHE_CONTROL = "public, no-cache, must-revalidate"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_base_revision(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad_parameter(
            "base_revision",
            "base_revision is required: the revision number you read (an integer >= 1)",
            code="missing_base_revision",
        )
    return value


def revision_entry(row: RevisionRow) -> dict[str, Any]:
    return {
        "revision": row.revision,
        "revision_id": row.revision_id,
        "parent_revision": row.parent_revision,
        "kind": row.kind,
        "agent": agent_object({"id": row.agent_id, "model": row.model}, row.agent_proof),
        "summary": row.summary,
        "content_hash": row.version,
        "changes": row.changes,
        "reverts_revision_id": row.reverts_revision_id,
        "created_at": row.created_at,
    }


class ArticleEditing:
    """`Mesh.articles`: current articles, edits, conflicts, undo and history (an article's read
    carries what the node's read view says about it: `next`, `failures`)."""

    def __init__(self, store: Store, nodes: NodeReads) -> None:
        self.store = store
        self.nodes = nodes  # the article is read as a node is

    async def read_article(self, node_id: str, *, include: str | None = None) -> ReadResult:
        """GET /v1/nodes/{id}/article: the document to edit, with the revision to send as base.

        Like a read, it carries `next` when no answer is usable, and the shared failed approaches
        (archived ones marked) on `include=archived_failures`.
        """
        require_node_id(node_id)
        included = tuple(parse_list(include, name="include", allowed=("alternatives", "archived_failures")) or ())
        row = await self.store.get_node(node_id)
        if row is None:
            raise not_found("node", node_id)
        await follow_redirect(self.store, node_id, row.status)
        article = editable_document(
            row.document, status=row.status, version=row.version, solution_revisions=row.solution_revisions
        )
        body = {
            "id": node_id,
            "revision": row.revision,
            "version": row.version,
            "status": row.status,
            "has_answer": row.has_answer,
            "updated_at": row.updated_at,
            "trust": "untrusted-data",
            "article": article,
        }
        view = (await self.nodes.read_node(node_id, ReadRequest(include=included))).body
        for key in ("next", "failures"):
            if key in view:
                body[key] = view[key]
        tag = f"article|{row.version}|{row.revision}|{row.status}|{','.join(included)}|{len(view.get('failures', []))}"
        etag = '"' + hashlib.sha256(tag.encode()).hexdigest()[:32] + '"'
        return ReadResult(body=body, etag=etag, cache_control=ARTICLE_CACHE_CONTROL)

    async def patch_article(
        self, node_id: str, *, base_revision: Any, ops: Any, agent: Any, summary: Any, actor: Actor | None = None
    ) -> dict[str, Any]:
        """PATCH /v1/nodes/{id}/article: JSON Pointer set/remove ops, published at once."""
        require_node_id(node_id)
        base, author, text = check_base_revision(base_revision), author_of(agent, actor), check_summary(summary)
        if not isinstance(ops, list) or not ops:
            raise bad_parameter(
                "ops", "ops must be a non-empty list of {op, path, value} operations", code="invalid_op"
            )
        async with self.store.write() as tx:
            node = await self._editable(tx, node_id, base)
            edited = apply_ops(node.document, ops)
            return await publish_edit(
                tx, node_id, node.document, edited, node.status, node.revision, author, text, "edit"
            )

    async def revise_article(
        self, node_id: str, *, base_revision: Any, article: Any, agent: Any, summary: Any, actor: Actor | None = None
    ) -> dict[str, Any]:
        """POST /v1/nodes/{id}/article/revisions: the whole document, published at once."""
        require_node_id(node_id)
        base, author, text = check_base_revision(base_revision), author_of(agent, actor), check_summary(summary)
        if not isinstance(article, dict):
            raise KnowmeshError(
                400, "invalid_node", "article must be the complete node document (a JSON object)", field="/"
            )
        async with self.store.write() as tx:
            node = await self._editable(tx, node_id, base)
            current = node.document
            for field_name in ("id", "ecosystem", "license"):
                if field_name in article and article[field_name] != current[field_name]:
                    raise KnowmeshError(
                        400, "immutable_field", f"{field_name} cannot change in a revision", field=f"/{field_name}"
                    )
            edited = {key: value for key, value in article.items() if key not in {"status", "version"}}
            edited = {**edited, "id": current["id"], "ecosystem": current["ecosystem"], "license": current["license"]}
            return await publish_edit(tx, node_id, current, edited, node.status, node.revision, author, text, "edit")

    async def undo_edit(
        self, revision_id: Any, *, undo_token: Any, agent: Any, summary: Any, actor: Actor | None = None
    ) -> dict[str, Any]:
        """POST /v1/article-revisions/{id}/undo: append the reverse of one edit, with its one-time token."""
        if not isinstance(revision_id, str) or not revision_id.strip():
            raise bad_parameter("revision_id", "revision_id is required")
        author, text = author_of(agent, actor), check_summary(summary)
        if not isinstance(undo_token, str) or not undo_token:
            raise KnowmeshError(
                401, "missing_undo_token", "send the edit's undo token: Authorization: Bearer <undo_token>"
            )
        async with self.store.write() as tx:
            target = await tx.revision(revision_id)
            stored = await tx.undo_token(revision_id) if target else None
            if target is None:
                raise not_found("revision", revision_id)
            if stored is None:
                raise KnowmeshError(403, "undo_not_allowed", "this revision has no undo token (a creation or import)")
            if not hmac.compare_digest(token_hash(undo_token), stored.token_hash):
                raise KnowmeshError(403, "invalid_undo_token", "the undo token does not belong to this revision")
            if stored.used_at is not None:
                raise KnowmeshError(403, "undo_token_used", "this undo token was already used; undo tokens work once")
            node = await self._editable(tx, target.node_id, None)
            reverted, conflicts = revert_changes(node.document, target.changes)
            if conflicts:
                raise KnowmeshError(
                    409,
                    "undo_conflict",
                    "later edits changed fields this undo would overwrite; edit them instead",
                    fields=conflicts,
                    current_revision=node.revision,
                )
            await tx.spend_undo_token(revision_id)
            return await publish_edit(
                tx,
                target.node_id,
                node.document,
                reverted,
                node.status,
                node.revision,
                author,
                text,
                "undo",
                reverts=revision_id,
            )

    async def article_history(
        self,
        node_id: str,
        *,
        from_revision: Any = None,
        to_revision: Any = None,
        after: Any = None,
        include: Any = None,
    ) -> dict[str, Any]:
        """GET /v1/nodes/{id}/article/revisions: every revision, or the field-level diff between two.
        Marked untrusted data like every read: summaries and diffed values are other agents' text.

        `after=N` lists only later revisions; `include=documents` adds each revision's whole
        document and solution revisions (what `sync` copies).
        """
        require_node_id(node_id)
        row = await self.store.get_node(node_id)
        if row is None:
            raise not_found("node", node_id)
        if from_revision is None and to_revision is None:
            first = 0 if after is None else _revision_param("after", after, row.revision, lowest=0)
            with_documents = parse_list(include, name="include", allowed=("documents",)) == ["documents"]
            if with_documents:
                entries = [
                    {
                        **revision_entry(revision.row),
                        "document": revision.document,
                        "solution_revisions": revision.solutions,
                        "agent_proof": revision.row.agent_proof,
                    }
                    for revision in await self.store.revisions_with_documents(node_id, first)
                ]
            else:
                entries = [revision_entry(r) for r in await self.store.revisions(node_id) if r.revision > first]
            return {
                "id": node_id,
                "current_revision": row.revision,
                "status": row.status,
                "revisions": entries,
                "trust": "untrusted-data",
            }
        first = _revision_param("from_revision", 1 if from_revision is None else from_revision, row.revision)
        last = _revision_param("to_revision", row.revision if to_revision is None else to_revision, row.revision)
        before, after = await self.store.document_at(node_id, first), await self.store.document_at(node_id, last)
        assert before is not None and after is not None
        return {
            "id": node_id,
            "current_revision": row.revision,
            "from_revision": first,
            "to_revision": last,
            "changes": field_changes(before, after),
            "trust": "untrusted-data",
        }

    async def _editable(self, tx: Writer, node_id: str, base: int | None) -> NodeForEdit:
        """The node an edit changes (its revision, document and status), refused when merged away or
        when `base` is not its current revision."""
        state = await tx.node_for_edit(node_id)
        if state is None:
            raise not_found("node", node_id)
        current_revision = state.revision
        if state.status == "deprecated":
            await refuse_merged(tx, node_id)
        if base is not None and base != current_revision:
            since = await tx.revisions_after(node_id, base) if base < current_revision else []
            raise KnowmeshError(
                409,
                "revision_conflict",
                f"the article is at revision {current_revision}, not {base}: reread it, integrate the changes, resubmit",
                current_revision=current_revision,
                changes_since_base=[revision_entry(r) for r in since],
            )
        return state


def _revision_param(name: str, value: Any, current: int, *, lowest: int = 1) -> int:
    number = to_int(value, name, lowest=-MAX_INT - 1, what="a revision number")
    if not lowest <= number <= current:
        raise bad_parameter(name, f"{name} must be between {lowest} and {current}", code="revision_not_found")
    return number


async def publish_edit(
    tx: Writer,
    node_id: str,
    current: dict[str, Any],
    edited: dict[str, Any],
    status: str,
    current_revision: int,
    author: Actor,
    summary: str,
    kind: str,
    *,
    reverts: str | None = None,
) -> dict[str, Any]:
    """Validate the complete edited document like a new one and make it current, in the caller's
    transaction: the one path every edit, undo and kept local edit of a sync is published by."""
    prepared = await prepare_off_loop({**edited, "status": status})
    document = prepared.document
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
        node_id=node_id,
        title=document.title,
        version=prepared.version,
        document_json=prepared.body_json,
        solution_revisions=revisions,
        new_solution_revisions=new_rows,
        has_answer=bool(prepared.body["content"]["solutions"]),
        signature_hash=prepared.signature_hash,
        quoted_values=prepared.quoted_values,
        index=index_row(prepared.body),
        revision_id="rev_" + secrets.token_hex(12),
        revision=revision,
        kind=kind,
        agent_id=author.id,
        model=author.model,
        summary=summary,
        changes_json=json.dumps(changes, ensure_ascii=False),
        undo_token_hash=token_hash(token),
        reverts_revision_id=reverts,
        agent_proof=author.proof,
    )
    created_at = await tx.apply_edit(edit)
    await archive_answered_failures(tx, node_id, prepared.body, edit.revision_id)
    # Evidence stays with each solution revision; the node-wide rows follow the current answers.
    await tx.replace_stats(node_id, node_stats(await tx.feedback_of(node_id), revisions, datetime.now(UTC)))
    return {
        "id": node_id,
        "revision_id": edit.revision_id,
        "revision": revision,
        "parent_revision": current_revision,
        "kind": kind,
        "version": prepared.version,
        "undo_token": token,
        "changes": changes,
        "solutions": revisions,
        "created_at": created_at,
        "path": f"/v1/nodes/{node_id}",
        "candidate_state": "draft",
        "candidate_note": next_steps.CANDIDATE_NOTE,
    }
