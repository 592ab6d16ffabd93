"""Pulling a remote mesh into the local store: `knowmesh-mcp sync --from URL` (protocol section 9).

The remote's `/v1/changes` feed says which nodes changed since the saved cursor; for each, the
revisions after the last one both sides share come from
`/v1/nodes/{id}/article/revisions?after=N&include=documents` and are written exactly as the
remote has them (ids, numbers, authors, times, and documents whose version hash is checked).
Local-only nodes are never touched. A node edited on both sides since the last sync is never
silently overwritten: the local revisions move to `sync_conflicts` (nothing is lost), the
remote's take their numbers, and the local edit is published again on top as a new revision
and reported (docs/decisions.md, "Sync").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .articles import field_changes, rebase_changes
from .errors import KnowmeshError, remote_error
from .identity import PROOFS, Actor
from .evidence import OUTCOMES, node_stats
from .model import STATUSES, InvalidNode, canonical_json, validate_node
from .maintaining import write_merge, write_status
from .outcomes import archive_answered_failures, current_revisions, node_answers
from .publishing import Prepared, behavior_hash, require_node_id
from .search import index_row
from .store import RevisionRow, SearchRow, Store, SyncedHead, SyncedRevision, Writer

if TYPE_CHECKING:
    from .remote import RemoteMesh

PAGE_SIZE = 100
FETCHES_AT_ONCE = 8
REVISION_KINDS = ("create", "edit", "undo", "import", "sync")

Progress = Callable[[int, int], None]  # (nodes done, nodes known so far)


@dataclass
class SyncReport:
    remote: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    evidence: int = 0  # outcome reports copied
    statuses: list[dict[str, str]] = field(default_factory=list)  # {id, from, to}: a maintainer's change there
    merged: list[dict[str, str]] = field(default_factory=list)  # {id, canonical}: merged there, so here too
    cursor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"remote": self.remote, "created": self.created, "updated": self.updated,
                "unchanged": self.unchanged, "conflicts": self.conflicts, "evidence": self.evidence,
                "statuses": self.statuses, "merged": self.merged, "cursor": self.cursor}


@dataclass
class PageIndex:
    """The index rows of the nodes a sync page wrote, written together before the page commits: a
    node's rows cost ~1.6 ms one at a time (eight statements, each a thread hop on SQLite), a
    page's the same eight statements (docs/decisions.md, "Sync")."""

    fresh: list[tuple[str, SearchRow]] = field(default_factory=list)  # nodes new here: no rows to replace
    replaced: list[tuple[str, SearchRow]] = field(default_factory=list)

    def add(self, node_id: str, row: SearchRow, *, fresh: bool) -> None:
        (self.fresh if fresh else self.replaced).append((node_id, row))

    async def write(self, tx: Writer) -> None:
        await tx.write_search_rows(self.fresh, fresh=True)
        await tx.write_search_rows(self.replaced)
        self.fresh, self.replaced = [], []


@dataclass(frozen=True)
class NodePlan:
    node_id: str
    status: str
    base: int | None  # the merge base, None before the first sync of this node
    revised: bool  # the remote has revisions past the merge base (or it is unknown)
    evidence_after: int
    new_evidence: bool
    merged_from: tuple[str, ...] = ()  # nodes the remote merged into this one
    merged_into: str | None = None  # the node the remote merged this one into


class Syncing:
    """Mixed into Service (which provides `_publish` from ArticleEditing, and `local_agent_id`)."""

    store: Store

    async def sync_from(self, url: str, *, progress: Progress | None = None, remote: RemoteMesh | None = None,
                        page_size: int = PAGE_SIZE, token: str | None = None) -> SyncReport:
        """Pull every change since this remote's saved cursor; the cursor is saved after each page.
        `token` (else KNOWMESH_TOKEN) is sent as the bearer, for a team's mesh that wants one."""
        from .remote import RemoteMesh

        base_url = url.rstrip("/")
        owned = remote is None
        mesh = remote or RemoteMesh(base_url, token=token)
        report = SyncReport(remote=base_url)
        cursor = await self.store.sync_cursor(base_url)
        done, total = 0, 0
        try:
            while True:
                page = await mesh.changes(since=cursor, limit=page_size)
                entries = page.get("changes")
                if not isinstance(entries, list) or not isinstance(page.get("next_cursor"), str):
                    raise remote_error(f"{base_url}/v1/changes did not answer with a change feed")
                total = max(total, done + len(entries) + int(page.get("remaining") or 0))
                plans = await self._plans(base_url, entries)
                fetched = await self._fetch_page(mesh, plans)
                agent = await self.local_agent_id()
                # One transaction a page, the cursor in it: a page lands whole or not at all, and its
                # index rows are written together (docs/decisions.md, "Sync").
                async with self.store.write() as tx:
                    indexing = PageIndex()
                    for plan in plans:
                        await self._sync_node(tx, base_url, plan, fetched.get(plan.node_id, {}), agent, indexing, report)
                        done += 1
                        if progress:
                            progress(done, total)
                    await indexing.write(tx)
                    cursor = page["next_cursor"]
                    await tx.set_sync_cursor(base_url, cursor)
                if not page.get("has_more") or not entries:
                    break
        finally:
            if owned:
                await mesh.close()
        report.cursor = cursor
        return report

    async def _plans(self, remote_url: str, entries: list[Any]) -> list[NodePlan]:
        """What each change entry of a page asks for, given what was synced before."""
        if not all(isinstance(entry, dict) and isinstance(entry.get("id"), str) for entry in entries):
            raise remote_error(f"a change entry from {remote_url} has no id")
        ids = [require_node_id(entry["id"]) for entry in entries]
        synced = await self.store.synced_states(remote_url, ids)
        plans = []
        for node_id, entry in zip(ids, entries):
            base, evidence_after = synced.get(node_id, (None, 0))
            evidence_seq = entry.get("evidence_seq")
            merged, canonical = entry.get("merged_from", []), entry.get("merged_into")
            if not (isinstance(merged, list) and all(isinstance(m, str) for m in merged)) \
                    or not isinstance(canonical, (str, type(None))):
                raise remote_error(f"the change entry of {node_id} from {remote_url} names its merges malformed")
            plans.append(NodePlan(
                node_id=node_id, status=entry.get("status") if entry.get("status") in STATUSES else "draft", base=base,
                revised=base is None or entry.get("revision") != base, evidence_after=evidence_after,
                new_evidence=isinstance(evidence_seq, int) and evidence_seq > evidence_after,
                merged_from=tuple(require_node_id(m) for m in merged if m != node_id),
                merged_into=require_node_id(canonical) if canonical not in (None, node_id) else None,
            ))
        return plans

    async def _fetch_page(self, mesh: RemoteMesh, plans: list[NodePlan]) -> dict[str, dict[str, Any]]:
        """Per node of a page, what the remote has for it: `history` (revisions after the merge base,
        with documents) when revised, `feedback` (outcome reports after the last pulled one, and the
        last report's id) when it has new evidence. A few requests at a time, before any write."""
        limiter = asyncio.Semaphore(FETCHES_AT_ONCE)

        async def history(plan: NodePlan) -> tuple[str, str, Any]:
            async with limiter:
                return plan.node_id, "history", await mesh.article_history(plan.node_id, after=plan.base or 0,
                                                                            include="documents")

        async def feedback(plan: NodePlan) -> tuple[str, str, Any]:
            async with limiter:
                return plan.node_id, "feedback", await self._fetch_feedback(mesh, plan.node_id, plan.evidence_after)

        fetches = [history(plan) for plan in plans if plan.revised] + [feedback(plan) for plan in plans if plan.new_evidence]
        fetched: dict[str, dict[str, Any]] = {}
        for node_id, kind, value in await asyncio.gather(*fetches):
            fetched.setdefault(node_id, {})[kind] = value
        return fetched

    async def _sync_node(self, tx: Writer, remote_url: str, plan: NodePlan, fetched: dict[str, Any], agent: str,
                         indexing: PageIndex, report: SyncReport) -> None:
        written = (await self._sync_revisions(tx, remote_url, plan, fetched["history"], indexing, report)
                   if "history" in fetched else None)
        pulled = await self._sync_evidence(tx, remote_url, plan.node_id, *fetched["feedback"]) if "feedback" in fetched else 0
        report.evidence += pulled
        # a merge or a status change writes no revision: the feed's entry is all that says so
        pairs = [(m, plan.node_id) for m in plan.merged_from] + ([(plan.node_id, plan.merged_into)] if plan.merged_into else [])
        merged = bool(pairs) and await self._sync_merges(tx, remote_url, pairs, agent, report)
        restated = not written and await self._sync_status(tx, remote_url, plan, agent, report)
        if written:
            (report.created if written == "created" else report.updated).append(plan.node_id)
        elif not (pulled or restated or merged):
            report.unchanged += 1

    async def _sync_status(self, tx: Writer, remote_url: str, plan: NodePlan, agent: str, report: SyncReport) -> bool:
        """Take the remote's status (a maintainer promoted, set back or deprecated the node there) when
        it differs here; recorded in the audit log as this mesh's own act, naming the remote."""
        state = await tx.node_for_edit(plan.node_id)
        if state is None or state[2] == plan.status or await tx.redirect(plan.node_id) is not None:
            return False
        _, document, previous = state
        if plan.status == "verified" and not document["content"]["solutions"]:
            return False  # the answer it was verified with did not reach this mesh (a kept local edit)
        await write_status(tx, plan.node_id, previous, plan.status, None, agent, "local", synced_from=remote_url)
        report.statuses.append({"id": plan.node_id, "from": previous, "to": plan.status})
        return True

    async def _sync_merges(self, tx: Writer, remote_url: str, pairs: list[tuple[str, str]], agent: str,
                           report: SyncReport) -> bool:
        """The remote merged each (merged, canonical) pair: here too the merged node is deprecated and
        answers with the canonical one (301 over HTTP). Both nodes' entries name the pair, so whichever
        of them the feed brings second finds the other here."""
        done = []
        for merged, canonical in pairs:
            if await tx.redirect(merged) is not None or await tx.redirect(canonical) is not None:
                continue  # already merged here (the steady state of a canonical node's entry)
            state = await tx.node_for_edit(merged)
            if state is None or await tx.node_for_edit(canonical) is None:
                continue  # one of them not synced here (yet)
            await write_merge(tx, merged, canonical, state[2], None, agent, "local", synced_from=remote_url)
            done.append({"id": merged, "canonical": canonical})
        report.merged += done
        return bool(done)

    async def _sync_revisions(self, tx: Writer, remote_url: str, plan: NodePlan, history: dict[str, Any],
                              indexing: PageIndex, report: SyncReport) -> str | None:
        """Copy the remote's revisions after the merge base; "created", "updated", or None (nothing new)."""
        node_id, status, base = plan.node_id, plan.status, plan.base
        remote_revisions = [_synced_revision(node_id, item) for item in history.get("revisions") or []]
        local = await tx.revisions_with_documents(node_id)
        if base is None:
            base = _shared_prefix(local, remote_revisions)
        newer = [r for r in remote_revisions if r.row.revision > base]
        if not newer:
            if local:
                await tx.set_synced(remote_url, node_id, base)
            return None
        if newer[0].row.revision != base + 1 or any(b.row.revision != a.row.revision + 1 for a, b in zip(newer, newer[1:])):
            raise remote_error(f"{remote_url} sent a gap in the revisions of {node_id}")
        local_only = [r for r in local if r[0].revision > base]
        moved = await self._move_local_edits(tx, remote_url, node_id, base, local, local_only, newer)
        last = newer[-1]
        document = json.loads(last.document_json)
        prepared = Prepared.of(validate_node({**document, "status": status}))
        head = SyncedHead(id=node_id, ecosystem=prepared.document.ecosystem, status=status,
                          title=prepared.document.title, has_answer=bool(document["content"]["solutions"]),
                          signature_hash=prepared.signature_hash, quoted_values=prepared.quoted_values)
        await tx.apply_synced(head, newer, fresh=not local)
        indexing.add(node_id, index_row(prepared.body), fresh=not local)
        if moved:  # the kept edit is published over these rows, so they are written first
            await indexing.write(tx)
        await tx.set_synced(remote_url, node_id, last.row.revision)
        kept = await self._keep_local_edit(tx, moved, node_id, document, status, last.row) if moved else None
        if kept is None:  # else publishing the kept edit refreshed evidence and failed attempts
            now = datetime.now(UTC)
            await tx.replace_stats(node_id, node_stats(await tx.feedback_of(node_id), last.solution_revisions, now))
            await archive_answered_failures(tx, node_id, document, last.row.revision_id)
        if moved:
            report.conflicts.append({
                "id": node_id, "base_revision": base, "remote_revision": last.row.revision,
                "moved_revisions": [r[0].revision for r in local_only], "both_changed": moved["both_changed"],
                "kept_revision": kept, "conflict_id": moved["conflict_id"],
            })
        return "updated" if local else "created"

    @staticmethod
    async def _fetch_feedback(mesh: RemoteMesh, node_id: str, after: int) -> tuple[list[dict[str, Any]], int]:
        """The remote's outcome reports on a node after `after`, and the last one's id."""
        rows: list[dict[str, Any]] = []
        while True:
            page = await mesh.list_feedback(node_id, after=after)
            items = page.get("feedback")
            if not isinstance(items, list) or not isinstance(page.get("next_after"), int):
                raise remote_error(f"{mesh.base_url} did not answer with the feedback of {node_id}")
            rows += [_feedback_row(node_id, item) for item in items]
            after = page["next_after"]
            if not page.get("has_more") or not items:
                return rows, after

    async def _sync_evidence(self, tx: Writer, remote_url: str, node_id: str, rows: list[dict[str, Any]], after: int) -> int:
        """Store the remote's outcome reports fetched for a node; returns how many are new here."""
        _, document, known = await node_answers(tx, node_id)
        # A report on a solution revision this mesh does not have (renumbered by a conflict) stays behind.
        usable = [row for row in rows if row["solution_revision"] in known.get(row["solution_id"], {}).values()]
        pulled = await tx.insert_synced_feedback(usable)
        if pulled:
            current = current_revisions(document, known)
            await tx.replace_stats(node_id, node_stats(await tx.feedback_of(node_id), current, datetime.now(UTC)))
            await tx.touch_node(node_id)
        await tx.set_evidence_synced(remote_url, node_id, after)
        return pulled

    async def _move_local_edits(self, tx: Writer, remote_url: str, node_id: str, base: int,
                                local: list[tuple[RevisionRow, dict[str, Any], dict[str, int]]],
                                local_only: list[tuple[RevisionRow, dict[str, Any], dict[str, int]]],
                                newer: list[SyncedRevision]) -> dict[str, Any] | None:
        """Move local revisions after the merge base into sync_conflicts; returns what to re-apply."""
        if not local_only:
            return None
        base_document = local[base - 1][1] if base else {}
        local_document = local_only[-1][1]
        remote_document = json.loads(newer[-1].document_json)
        merged, both = rebase_changes(base_document, local_document, remote_document)
        keep = {}
        for _, _, solutions in local[:base]:  # solution revision numbers the shared history uses
            for solution_id, number in solutions.items():
                keep[solution_id] = max(keep.get(solution_id, 0), number)
        conflict_id = await tx.move_revisions(node_id, [r.revision_id for r, _, _ in local_only], keep, {
            "remote": remote_url, "base_revision": base, "remote_revision": newer[-1].row.revision,
            "local_revisions": json.dumps([{**_row_dict(r), "document": d} for r, d, _ in local_only], ensure_ascii=False),
            "both_changed": json.dumps(both),
        })
        author = local_only[-1][0]
        agent = (Actor(author.agent_id, author.agent_proof, author.model) if author.agent_id
                 else Actor(await self.local_agent_id(), "local", author.model))
        return {"conflict_id": conflict_id, "merged": merged, "both_changed": both, "agent": agent}

    async def _keep_local_edit(self, tx: Writer, moved: dict[str, Any], node_id: str, remote_document: dict[str, Any],
                               status: str, last: RevisionRow) -> int | None:
        """Publish the local edit again on top of the remote's revision; None when it has nothing left to
        change or no longer validates (it stays in sync_conflicts either way)."""
        merged = moved["merged"]
        if not field_changes(remote_document, merged):
            return None
        summary = f"Local edit kept on top of revision {last.revision} from sync"
        if moved["both_changed"]:
            summary += f" (both changed: {', '.join(moved['both_changed'])})"
        try:
            kept = await self._publish(tx, node_id, remote_document, merged, status, last.revision,
                                       moved["agent"], summary[:500], "sync")
        except (KnowmeshError, InvalidNode):
            return None
        await tx.set_conflict_kept(moved["conflict_id"], kept["revision"])
        return int(kept["revision"])


def _shared_prefix(local: list[tuple[RevisionRow, dict[str, Any], dict[str, int]]], remote: list[SyncedRevision]) -> int:
    """How many first revisions both sides have with the same content (e.g. the same starter corpus)."""
    shared = 0
    for (mine, _, _), theirs in zip(local, remote):
        if mine.revision != theirs.row.revision or mine.version != theirs.row.version:
            break
        shared = mine.revision
    return shared


def _synced_revision(node_id: str, item: Any) -> SyncedRevision:
    """One revision of the remote's history, checked: its document must hash to its version."""
    if not isinstance(item, dict) or not isinstance(item.get("document"), dict):
        raise remote_error(f"a revision of {node_id} came without its document")
    try:
        document = validate_node(item["document"])
    except InvalidNode:
        raise remote_error(f"a revision of {node_id} holds an invalid document") from None
    prepared = Prepared.of(document)
    agent = item.get("agent") if isinstance(item.get("agent"), dict) else {}
    revision, kind = item.get("revision"), item.get("kind")
    solutions = item.get("solution_revisions")
    hashes = {s["id"]: behavior_hash(s) for s in prepared.body["content"]["solutions"]}
    if (prepared.version != item.get("content_hash") or document.id != node_id or not isinstance(revision, int)
            or kind not in REVISION_KINDS or not _short_text(item.get("revision_id"))
            or not isinstance(solutions, dict) or not set(hashes) <= set(solutions)
            or not all(isinstance(solutions[k], int) for k in hashes) or not _short_text(item.get("created_at"))
            or not isinstance(item.get("parent_revision"), (int, type(None)))):
        raise remote_error(f"revision {revision!r} of {node_id} does not match its content hash or is malformed")
    row = RevisionRow(
        revision_id=item["revision_id"], node_id=node_id, revision=revision, parent_revision=item.get("parent_revision"),
        kind=kind, version=prepared.version, agent_id=agent.get("id"), model=agent.get("model"),
        summary=str(item.get("summary") or ""), changes=item.get("changes") or [],
        reverts_revision_id=item.get("reverts_revision_id"), created_at=item["created_at"],
        agent_proof=item["agent_proof"] if item.get("agent_proof") in PROOFS else "claimed",  # the team's mark
    )
    return SyncedRevision(row=row, document_json=prepared.body_json,
                          solution_revisions={k: solutions[k] for k in hashes},
                          solution_hashes=hashes)


def _feedback_row(node_id: str, item: Any) -> dict[str, Any]:
    """One outcome report of the remote's, checked field by field before it is stored here."""
    def text(key: str, *, required: bool = False) -> str | None:
        value = item.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or len(value) > 8000:
            raise remote_error(f"a feedback row of {node_id} has a bad {key}")
        return value

    if not isinstance(item, dict):
        raise remote_error(f"a feedback row of {node_id} is not an object")
    revision, exit_code = item.get("solution_revision"), item.get("exit_code")
    if (item.get("outcome") not in OUTCOMES or isinstance(revision, bool) or not isinstance(revision, int) or revision < 1
            or not isinstance(item.get("environment"), dict)
            or not (exit_code is None or (isinstance(exit_code, int) and not isinstance(exit_code, bool)))):
        raise remote_error(f"a feedback row of {node_id} is malformed")
    return {
        "node_id": node_id, "node_version": text("node_version"), "solution_id": text("solution_id", required=True),
        "solution_revision": revision, "outcome": item["outcome"], "cluster": text("cluster", required=True),
        "environment": canonical_json(item["environment"]), "agent_id": text("agent_id"), "model": text("model"),
        "reason": text("reason"), "note": text("note"), "evidence_hash": text("evidence_hash"), "exit_code": exit_code,
        "created_at": text("created_at", required=True),
        "proof": item["proof"] if item.get("proof") in PROOFS else "claimed",  # the team's mark, kept
    }


def _short_text(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 100


def _row_dict(row: RevisionRow) -> dict[str, Any]:
    return {"revision_id": row.revision_id, "revision": row.revision, "kind": row.kind, "version": row.version,
            "agent_id": row.agent_id, "model": row.model, "summary": row.summary, "changes": row.changes,
            "created_at": row.created_at, "agent_proof": row.agent_proof}
