"""Writing one page of a sync: for each node the feed named, the remote's new revisions (a local
edit made since the last sync kept in `sync_conflicts` and published again on top), its new
outcome reports, and the status or merge its entry says it has there; all in the page's one
transaction (see `syncing`, which fetches the page first).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from knowmesh_mcp.core.articles import field_changes, rebase_changes
from knowmesh_mcp.core.errors import KnowmeshError, remote_error
from knowmesh_mcp.core.evidence import node_stats
from knowmesh_mcp.core.identity import PROOFS, Actor, Proof
from knowmesh_mcp.core.model import InvalidNode, validate_node
from knowmesh_mcp.core.rows import RevisionWithDocument
from knowmesh_mcp.search.query import index_row
from knowmesh_mcp.services.editing import publish_edit
from knowmesh_mcp.services.failed_attempts import archive_answered_failures
from knowmesh_mcp.services.maintaining import write_merge, write_status
from knowmesh_mcp.services.outcomes import current_revisions, node_answers
from knowmesh_mcp.services.publishing import Prepared
from knowmesh_mcp.services.sync_checks import synced_revision
from knowmesh_mcp.store import RevisionRow, SearchRow, SyncedHead, SyncedRevision, Writer


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
        return {
            "remote": self.remote,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "conflicts": self.conflicts,
            "evidence": self.evidence,
            "statuses": self.statuses,
            "merged": self.merged,
            "cursor": self.cursor,
        }


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


async def sync_node(
    tx: Writer,
    remote_url: str,
    plan: NodePlan,
    fetched: dict[str, Any],
    agent: str,
    indexing: PageIndex,
    report: SyncReport,
) -> None:
    """Write what was fetched for one node of the page (`fetched`: its `history`, its `feedback`),
    and the merge or status its feed entry names; count it in `report`. `agent` is the local agent,
    whom a status or merge taken from the remote is recorded as."""
    written = (
        await sync_revisions(tx, remote_url, plan, fetched["history"], agent, indexing, report)
        if "history" in fetched
        else None
    )
    pulled = await sync_evidence(tx, remote_url, plan.node_id, *fetched["feedback"]) if "feedback" in fetched else 0
    report.evidence += pulled
    # a merge or a status change writes no revision: the feed's entry is all that says so
    pairs = [(m, plan.node_id) for m in plan.merged_from] + (
        [(plan.node_id, plan.merged_into)] if plan.merged_into else []
    )
    merged = bool(pairs) and await sync_merges(tx, remote_url, pairs, agent, report)
    restated = not written and await sync_status(tx, remote_url, plan, agent, report)
    if written:
        (report.created if written == "created" else report.updated).append(plan.node_id)
    elif not (pulled or restated or merged):
        report.unchanged += 1


async def sync_status(tx: Writer, remote_url: str, plan: NodePlan, agent: str, report: SyncReport) -> bool:
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


async def sync_merges(
    tx: Writer, remote_url: str, pairs: list[tuple[str, str]], agent: str, report: SyncReport
) -> bool:
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


async def sync_revisions(
    tx: Writer,
    remote_url: str,
    plan: NodePlan,
    history: dict[str, Any],
    local_agent: str,
    indexing: PageIndex,
    report: SyncReport,
) -> str | None:
    """Copy the remote's revisions after the merge base; "created", "updated", or None (nothing new)."""
    node_id, status, base = plan.node_id, plan.status, plan.base
    items = history.get("revisions")
    if not isinstance(items, list):
        raise remote_error(f"{remote_url} did not answer with the revisions of {node_id}")
    remote_revisions = [synced_revision(remote_url, node_id, item) for item in items]
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
    _check_reverts(remote_url, node_id, [revision.row for revision in local if revision.row.revision <= base], newer)
    local_only = [revision for revision in local if revision.row.revision > base]
    moved = await move_local_edits(tx, remote_url, node_id, base, local, local_only, newer, local_agent)
    last = newer[-1]
    document = json.loads(last.document_json)
    prepared = Prepared.of(validate_node({**document, "status": status}))
    head = SyncedHead(
        id=node_id,
        ecosystem=prepared.document.ecosystem,
        status=status,
        title=prepared.document.title,
        has_answer=bool(document["content"]["solutions"]),
        signature_hash=prepared.signature_hash,
        quoted_values=prepared.quoted_values,
    )
    await tx.apply_synced(head, newer, fresh=not local)
    indexing.add(node_id, index_row(prepared.body), fresh=not local)
    if moved:  # the kept edit is published over these rows, so they are written first
        await indexing.write(tx)
    await tx.set_synced(remote_url, node_id, last.row.revision)
    kept = await keep_local_edit(tx, moved, node_id, document, status, last.row) if moved else None
    if kept is None:  # else publishing the kept edit refreshed evidence and failed attempts
        now = datetime.now(UTC)
        await tx.replace_stats(node_id, node_stats(await tx.feedback_of(node_id), last.solution_revisions, now))
        await archive_answered_failures(tx, node_id, document, last.row.revision_id)
    if moved:
        report.conflicts.append(
            {
                "id": node_id,
                "base_revision": base,
                "remote_revision": last.row.revision,
                "moved_revisions": [revision.row.revision for revision in local_only],
                "both_changed": moved["both_changed"],
                "kept_revision": kept,
                "conflict_id": moved["conflict_id"],
            }
        )
    return "updated" if local else "created"


async def sync_evidence(tx: Writer, remote_url: str, node_id: str, rows: list[dict[str, Any]], after: int) -> int:
    """Store the remote's outcome reports fetched for a node; returns how many are new here."""
    answers = await node_answers(tx, node_id)
    document, known = answers.document, answers.behaviours
    # A report on a solution revision this mesh does not have (renumbered by a conflict) stays behind.
    usable = [row for row in rows if row["solution_revision"] in known.get(row["solution_id"], {}).values()]
    pulled = await tx.insert_synced_feedback(usable)
    if pulled:
        current = current_revisions(document, known)
        await tx.replace_stats(node_id, node_stats(await tx.feedback_of(node_id), current, datetime.now(UTC)))
        await tx.touch_node(node_id)
    await tx.set_evidence_synced(remote_url, node_id, after)
    return pulled


async def move_local_edits(
    tx: Writer,
    remote_url: str,
    node_id: str,
    base: int,
    local: list[RevisionWithDocument],
    local_only: list[RevisionWithDocument],
    newer: list[SyncedRevision],
    local_agent: str,
) -> dict[str, Any] | None:
    """Move local revisions after the merge base into sync_conflicts; returns what to re-apply, as
    its author (the local agent when the edit names none)."""
    if not local_only:
        return None
    base_document = local[base - 1].document if base else {}
    local_document = local_only[-1].document
    remote_document = json.loads(newer[-1].document_json)
    merged, both = rebase_changes(base_document, local_document, remote_document)
    keep: dict[str, int] = {}
    for shared in local[:base]:  # solution revision numbers the shared history uses
        for solution_id, number in shared.solutions.items():
            keep[solution_id] = max(keep.get(solution_id, 0), number)
    conflict_id = await tx.move_revisions(
        node_id,
        [revision.row.revision_id for revision in local_only],
        keep,
        {
            "remote": remote_url,
            "base_revision": base,
            "remote_revision": newer[-1].row.revision,
            "local_revisions": json.dumps(
                [{**_row_dict(revision.row), "document": revision.document} for revision in local_only],
                ensure_ascii=False,
            ),
            "both_changed": json.dumps(both),
        },
    )
    author = local_only[-1].row
    agent = (
        Actor(author.agent_id, _proof(author.agent_proof), author.model)
        if author.agent_id
        else Actor(local_agent, "local", author.model)
    )
    return {"conflict_id": conflict_id, "merged": merged, "both_changed": both, "agent": agent}


async def keep_local_edit(
    tx: Writer,
    moved: dict[str, Any],
    node_id: str,
    remote_document: dict[str, Any],
    status: str,
    last: RevisionRow,
) -> int | None:
    """Publish the local edit again on top of the remote's revision; None when it has nothing left to
    change or no longer validates (it stays in sync_conflicts either way)."""
    merged = moved["merged"]
    if not field_changes(remote_document, merged):
        return None
    summary = f"Local edit kept on top of revision {last.revision} from sync"
    if moved["both_changed"]:
        summary += f" (both changed: {', '.join(moved['both_changed'])})"
    try:
        kept = await publish_edit(
            tx, node_id, remote_document, merged, status, last.revision, moved["agent"], summary[:500], "sync"
        )
    except (KnowmeshError, InvalidNode):
        return None
    await tx.set_conflict_kept(moved["conflict_id"], kept["revision"])
    return int(kept["revision"])


def _shared_prefix(local: list[RevisionWithDocument], remote: list[SyncedRevision]) -> int:
    """How many first revisions both sides have with the same content (e.g. the same starter corpus)."""
    shared = 0
    for mine, theirs in zip(local, remote):
        if mine.row.revision != theirs.row.revision or mine.row.version != theirs.row.version:
            break
        shared = mine.row.revision
    return shared


def _check_reverts(remote_url: str, node_id: str, shared: list[RevisionRow], newer: list[SyncedRevision]) -> None:
    """An undo names the revision it reverts, and the store holds it to that (a foreign key): it must
    be a revision of this node, one both sides share or an earlier one of `newer`. Another id was a
    raw "FOREIGN KEY constraint failed" at the write."""
    known = {row.revision_id for row in shared}
    for revision in newer:
        reverts = revision.row.reverts_revision_id
        if reverts is not None and reverts not in known:
            raise remote_error(
                f"{remote_url} sent revision {revision.row.revision} of {node_id} as the undo of "
                f"{reverts!r}, which is no earlier revision of it"
            )
        known.add(revision.row.revision_id)


def _row_dict(row: RevisionRow) -> dict[str, Any]:
    return {
        "revision_id": row.revision_id,
        "revision": row.revision,
        "kind": row.kind,
        "version": row.version,
        "agent_id": row.agent_id,
        "model": row.model,
        "summary": row.summary,
        "changes": row.changes,
        "created_at": row.created_at,
        "agent_proof": row.agent_proof,
    }


def _proof(stored: str) -> Proof:
    """A stored revision's proof as `identity` names it (the store keeps it as text; this code only
    ever writes one of PROOFS, and takes anything else a remote sent as "claimed")."""
    for proof in PROOFS:
        if proof == stored:
            return proof
    return "claimed"
