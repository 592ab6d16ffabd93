"""Pulling a remote mesh into the local store: `knowmesh-mcp sync --from URL` (protocol section 9).

The remote's `/v1/changes` feed says which nodes changed since the saved cursor; for each, the
revisions after the last one both sides share come from
`/v1/nodes/{id}/article/revisions?after=N&include=documents` and are written exactly as the
remote has them (ids, numbers, authors, times, and documents whose version hash is checked).
Local-only nodes are never touched. A node edited on both sides since the last sync is never
silently overwritten: the local revisions move to `sync_conflicts` (nothing is lost), the
remote's take their numbers, and the local edit is published again on top as a new revision
and reported (docs/decisions.md, "Sync").

The remote is untrusted: a sync ends within SYNC_DEADLINE_SECONDS, a page's answers hold at most
PAGE_BYTE_LIMIT (and each answer RemoteMesh's own limits), a feed or feedback list must move past
the position it was asked for, and every field is checked before it is stored. Whatever the remote
gets wrong is a 502 `remote_error` (504 `remote_timeout` for time) naming it, and the page it came
in writes nothing. The remote is named without the user and password of its URL, everywhere.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from knowmesh_mcp.core.articles import field_changes, rebase_changes
from knowmesh_mcp.core.errors import KnowmeshError, remote_error
from knowmesh_mcp.core.evidence import OUTCOMES, node_stats
from knowmesh_mcp.core.identity import MAX_AGENT_ID, PROOFS, Actor
from knowmesh_mcp.core.limits import MAX_INT
from knowmesh_mcp.core.model import STATUSES, InvalidNode, canonical_json, validate_node
from knowmesh_mcp.search.query import index_row
from knowmesh_mcp.services.maintaining import write_merge, write_status
from knowmesh_mcp.services.outcomes import archive_answered_failures, current_revisions, node_answers
from knowmesh_mcp.services.publishing import Prepared, behavior_hash, require_node_id
from knowmesh_mcp.store import RevisionRow, SearchRow, Store, SyncedHead, SyncedRevision, Writer

if TYPE_CHECKING:
    from knowmesh_mcp.services.remote import ByteBudget, RemoteMesh

PAGE_SIZE = 100
FETCHES_AT_ONCE = 8
REVISION_KINDS = ("create", "edit", "undo", "import", "sync")

SYNC_DEADLINE_SECONDS = 3600.0
"""The longest a whole sync may wait on its remote. Each answer has its own deadline, and the feed
must move, but a remote could still send one small new page after another for ever. An hour is
over 100 times what 10,000 nodes take (~30 s, bench/sync_bench.py); the pages written before it
are kept with their cursor, so running the sync again goes on from there."""

PAGE_BYTE_LIMIT = 128 * 1024 * 1024
"""The most the answers of one sync page (the feed page, histories and feedback lists) may hold
together: they are all kept until the page is written as one transaction, so the limit on one
answer alone would let a page of 100 nodes hold 100 of the largest. A page of typical nodes takes a
few MiB."""

MAX_CURSOR_CHARS = 500  # a feed cursor is stored in sync_state; this mesh's own are ~30 characters
MAX_TEXT_CHARS = 8000  # a revision's summary or model, a report's reason or note
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # every time the store writes (`utc_now`)
TIMESTAMP_SHAPE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")  # strptime is lenient

T = TypeVar("T")

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


@dataclass(frozen=True)
class FeedPage:
    """A page of the remote's change feed, its fields checked (`_feed_page`)."""

    entries: list[Any]
    next_cursor: str
    has_more: bool
    remaining: int  # changes after this page, for the progress bar


class SyncClock:
    """The whole sync's deadline, enforced while it waits on the remote: a page's local write is
    never cut short (cancelled halfway, a database driver would be left mid-statement), so the most
    a sync can run past it is one page's write."""

    def __init__(self, remote_url: str, seconds: float):
        self.remote_url, self.seconds = remote_url, seconds
        self.ends_at = asyncio.get_running_loop().time() + seconds

    async def wait(self, awaitable: Awaitable[T]) -> T:
        deadline = asyncio.timeout_at(self.ends_at)
        try:
            async with deadline:
                return await awaitable
        except TimeoutError:
            if not deadline.expired():
                raise
            raise KnowmeshError(
                504,
                "remote_timeout",
                f"the sync from {self.remote_url} did not finish within {self.seconds:g} s; the pages "
                "written so far are kept: run it again to go on from there",
            ) from None


class Syncing:
    """Mixed into Service (which provides `_publish` from ArticleEditing, and `local_agent_id`)."""

    store: Store

    async def sync_from(
        self,
        url: str,
        *,
        progress: Progress | None = None,
        remote: RemoteMesh | None = None,
        page_size: int = PAGE_SIZE,
        token: str | None = None,
    ) -> SyncReport:
        """Pull every change since this remote's saved cursor; the cursor is saved after each page.
        `token` (else KNOWMESH_TOKEN) is sent as the bearer, for a team's mesh that wants one; the
        user and password of `url` as basic auth. The remote is stored and reported without them."""
        from knowmesh_mcp.services.remote import ByteBudget, RemoteMesh, public_url

        base_url = public_url(url)
        owned = remote is None
        mesh = remote or RemoteMesh(url, token=token)
        report = SyncReport(remote=base_url)
        cursor = await self.store.sync_cursor(base_url)
        clock = SyncClock(base_url, SYNC_DEADLINE_SECONDS)
        sent = {cursor}  # the cursors this sync has asked with: a page must lead past them
        done, total = 0, 0
        try:
            while True:
                budget = ByteBudget(PAGE_BYTE_LIMIT, f"a page of {base_url}/v1/changes")
                page = _feed_page(
                    await clock.wait(mesh.changes(since=cursor, limit=page_size, budget=budget)), base_url, page_size
                )
                if (page.entries or page.has_more) and page.next_cursor in sent:
                    raise remote_error(
                        f"{base_url}/v1/changes answered a page of changes with a cursor it had "
                        "answered before, so it does not move past it: the sync stopped rather "
                        "than read the same pages for ever"
                    )
                sent.add(page.next_cursor)
                entries = page.entries
                total = max(total, done + len(entries) + page.remaining)
                plans = await self._plans(base_url, entries)
                fetched = await clock.wait(self._fetch_page(mesh, plans, budget))
                agent = await self.local_agent_id()
                # One transaction a page, the cursor in it: a page lands whole or not at all, and its
                # index rows are written together (docs/decisions.md, "Sync").
                async with self.store.write() as tx:
                    indexing = PageIndex()
                    for plan in plans:
                        await self._sync_node(
                            tx, base_url, plan, fetched.get(plan.node_id, {}), agent, indexing, report
                        )
                        done += 1
                        if progress:
                            progress(done, total)
                    await indexing.write(tx)
                    cursor = page.next_cursor
                    await tx.set_sync_cursor(base_url, cursor)
                if not page.has_more or not entries:
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
        ids = [_remote_node_id(entry["id"], remote_url) for entry in entries]
        synced = await self.store.synced_states(remote_url, ids)
        plans = []
        for node_id, entry in zip(ids, entries):
            base, evidence_after = synced.get(node_id, (None, 0))
            evidence_seq, revision, status = entry.get("evidence_seq"), entry.get("revision"), entry.get("status")
            merged, canonical = entry.get("merged_from", []), entry.get("merged_into")
            if not (isinstance(merged, list) and all(isinstance(m, str) for m in merged)) or not isinstance(
                canonical, (str, type(None))
            ):
                raise remote_error(f"the change entry of {node_id} from {remote_url} names its merges malformed")
            if not (evidence_seq is None or _count(evidence_seq)) or not (
                revision is None or _count(revision, lowest=1)
            ):
                raise remote_error(
                    f"the change entry of {node_id} from {remote_url} has a revision or evidence_seq "
                    "that is not a whole number"
                )
            plans.append(
                NodePlan(
                    node_id=node_id,
                    status=status if isinstance(status, str) and status in STATUSES else "draft",
                    base=base,
                    revised=base is None or revision != base,
                    evidence_after=evidence_after,
                    new_evidence=evidence_seq is not None and evidence_seq > evidence_after,
                    merged_from=tuple(_remote_node_id(m, remote_url) for m in merged if m != node_id),
                    merged_into=_remote_node_id(canonical, remote_url) if canonical not in (None, node_id) else None,
                )
            )
        return plans

    async def _fetch_page(
        self, mesh: RemoteMesh, plans: list[NodePlan], budget: ByteBudget
    ) -> dict[str, dict[str, Any]]:
        """Per node of a page, what the remote has for it: `history` (revisions after the merge base,
        with documents) when revised, `feedback` (outcome reports after the last pulled one, and the
        last report's id) when it has new evidence. A few requests at a time, before any write; all
        of them charged to the page's `budget`, since all of them are held until the page is written."""
        limiter = asyncio.Semaphore(FETCHES_AT_ONCE)

        async def history(plan: NodePlan) -> tuple[str, str, Any]:
            async with limiter:
                return (
                    plan.node_id,
                    "history",
                    await mesh.article_history(plan.node_id, after=plan.base or 0, include="documents", budget=budget),
                )

        async def feedback(plan: NodePlan) -> tuple[str, str, Any]:
            async with limiter:
                return (
                    plan.node_id,
                    "feedback",
                    await self._fetch_feedback(mesh, plan.node_id, plan.evidence_after, budget),
                )

        fetches = [history(plan) for plan in plans if plan.revised] + [
            feedback(plan) for plan in plans if plan.new_evidence
        ]
        fetched: dict[str, dict[str, Any]] = {}
        for node_id, kind, value in await asyncio.gather(*fetches):
            fetched.setdefault(node_id, {})[kind] = value
        return fetched

    async def _sync_node(
        self,
        tx: Writer,
        remote_url: str,
        plan: NodePlan,
        fetched: dict[str, Any],
        agent: str,
        indexing: PageIndex,
        report: SyncReport,
    ) -> None:
        written = (
            await self._sync_revisions(tx, remote_url, plan, fetched["history"], indexing, report)
            if "history" in fetched
            else None
        )
        pulled = (
            await self._sync_evidence(tx, remote_url, plan.node_id, *fetched["feedback"])
            if "feedback" in fetched
            else 0
        )
        report.evidence += pulled
        # a merge or a status change writes no revision: the feed's entry is all that says so
        pairs = [(m, plan.node_id) for m in plan.merged_from] + (
            [(plan.node_id, plan.merged_into)] if plan.merged_into else []
        )
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

    async def _sync_merges(
        self, tx: Writer, remote_url: str, pairs: list[tuple[str, str]], agent: str, report: SyncReport
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

    async def _sync_revisions(
        self,
        tx: Writer,
        remote_url: str,
        plan: NodePlan,
        history: dict[str, Any],
        indexing: PageIndex,
        report: SyncReport,
    ) -> str | None:
        """Copy the remote's revisions after the merge base; "created", "updated", or None (nothing new)."""
        node_id, status, base = plan.node_id, plan.status, plan.base
        items = history.get("revisions")
        if not isinstance(items, list):
            raise remote_error(f"{remote_url} did not answer with the revisions of {node_id}")
        remote_revisions = [_synced_revision(remote_url, node_id, item) for item in items]
        local = await tx.revisions_with_documents(node_id)
        if base is None:
            base = _shared_prefix(local, remote_revisions)
        newer = [r for r in remote_revisions if r.row.revision > base]
        if not newer:
            if local:
                await tx.set_synced(remote_url, node_id, base)
            return None
        if newer[0].row.revision != base + 1 or any(
            b.row.revision != a.row.revision + 1 for a, b in zip(newer, newer[1:])
        ):
            raise remote_error(f"{remote_url} sent a gap in the revisions of {node_id}")
        _check_reverts(remote_url, node_id, [row for row, _, _ in local if row.revision <= base], newer)
        local_only = [r for r in local if r[0].revision > base]
        moved = await self._move_local_edits(tx, remote_url, node_id, base, local, local_only, newer)
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
        kept = await self._keep_local_edit(tx, moved, node_id, document, status, last.row) if moved else None
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
                    "moved_revisions": [r[0].revision for r in local_only],
                    "both_changed": moved["both_changed"],
                    "kept_revision": kept,
                    "conflict_id": moved["conflict_id"],
                }
            )
        return "updated" if local else "created"

    @staticmethod
    async def _fetch_feedback(
        mesh: RemoteMesh, node_id: str, after: int, budget: ByteBudget
    ) -> tuple[list[dict[str, Any]], int]:
        """The remote's outcome reports on a node after `after`, and the last one's id. Each page must
        lead past the one before (a list that answers the same page for ever was an endless loop);
        the page's byte budget bounds how many there are."""
        rows: list[dict[str, Any]] = []
        while True:
            page = await mesh.list_feedback(node_id, after=after, budget=budget)
            items, next_after, has_more = page.get("feedback"), page.get("next_after"), page.get("has_more", False)
            if not isinstance(items, list) or not _count(next_after) or not isinstance(has_more, bool):
                raise remote_error(f"{mesh.base_url} did not answer with the feedback of {node_id}")
            if items and next_after <= after:
                raise remote_error(
                    f"{mesh.base_url} answered the feedback of {node_id} after {after} with next_after "
                    f"{next_after}, which does not move past it: the sync stopped rather than read "
                    "the same reports for ever"
                )
            rows += [_feedback_row(mesh.base_url, node_id, item) for item in items]
            after = next_after
            if not has_more or not items:
                return rows, after

    async def _sync_evidence(
        self, tx: Writer, remote_url: str, node_id: str, rows: list[dict[str, Any]], after: int
    ) -> int:
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

    async def _move_local_edits(
        self,
        tx: Writer,
        remote_url: str,
        node_id: str,
        base: int,
        local: list[tuple[RevisionRow, dict[str, Any], dict[str, int]]],
        local_only: list[tuple[RevisionRow, dict[str, Any], dict[str, int]]],
        newer: list[SyncedRevision],
    ) -> dict[str, Any] | None:
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
        conflict_id = await tx.move_revisions(
            node_id,
            [r.revision_id for r, _, _ in local_only],
            keep,
            {
                "remote": remote_url,
                "base_revision": base,
                "remote_revision": newer[-1].row.revision,
                "local_revisions": json.dumps(
                    [{**_row_dict(r), "document": d} for r, d, _ in local_only], ensure_ascii=False
                ),
                "both_changed": json.dumps(both),
            },
        )
        author = local_only[-1][0]
        agent = (
            Actor(author.agent_id, author.agent_proof, author.model)
            if author.agent_id
            else Actor(await self.local_agent_id(), "local", author.model)
        )
        return {"conflict_id": conflict_id, "merged": merged, "both_changed": both, "agent": agent}

    async def _keep_local_edit(
        self,
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
            kept = await self._publish(
                tx, node_id, remote_document, merged, status, last.revision, moved["agent"], summary[:500], "sync"
            )
        except (KnowmeshError, InvalidNode):
            return None
        await tx.set_conflict_kept(moved["conflict_id"], kept["revision"])
        return int(kept["revision"])


def _shared_prefix(
    local: list[tuple[RevisionRow, dict[str, Any], dict[str, int]]], remote: list[SyncedRevision]
) -> int:
    """How many first revisions both sides have with the same content (e.g. the same starter corpus)."""
    shared = 0
    for (mine, _, _), theirs in zip(local, remote):
        if mine.revision != theirs.row.revision or mine.version != theirs.row.version:
            break
        shared = mine.revision
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


def _feed_page(body: dict[str, Any], remote_url: str, page_size: int) -> FeedPage:
    """A page of the remote's change feed, each field checked before it is used: `remaining: "many"`
    was a raw ValueError from int(), and a `has_more` of "no" was taken as true."""
    where = f"{remote_url}/v1/changes"
    entries, cursor, has_more = body.get("changes"), body.get("next_cursor"), body.get("has_more", False)
    remaining = 0 if body.get("remaining") is None else body["remaining"]
    if not isinstance(entries, list) or not _text(cursor, MAX_CURSOR_CHARS, required=True) or not cursor:
        raise remote_error(f"{where} did not answer with a change feed")
    if len(entries) > page_size:
        raise remote_error(f"{where} answered {len(entries)} changes to a request for {page_size}")
    if not isinstance(has_more, bool) or not _count(remaining):
        raise remote_error(
            f"{where} answered a has_more that is not true or false, or a remaining that is not a whole number"
        )
    return FeedPage(entries=entries, next_cursor=cursor, has_more=has_more, remaining=remaining)


def _remote_node_id(value: str, remote_url: str) -> str:
    """A node id the remote named, checked as a client's is: a bad one is the remote's fault (502 naming
    it), not a 400 of this mesh's."""
    try:
        return require_node_id(value)
    except KnowmeshError:
        raise remote_error(f"{remote_url} named a node id that is not valid: {value[:200]!r}") from None


def _synced_revision(remote_url: str, node_id: str, item: Any) -> SyncedRevision:
    """One revision of the remote's history, checked: its document must hash to its version, and each
    other field be what the store keeps (an object as the agent's id was a raw "Error binding
    parameter 7"; `changes: "not a list"` and `created_at: "not a date"` were stored as sent)."""
    if not isinstance(item, dict) or not isinstance(item.get("document"), dict):
        raise remote_error(f"{remote_url} sent a revision of {node_id} without its document")
    try:
        document = validate_node(item["document"])
    except InvalidNode:
        raise remote_error(f"{remote_url} sent a revision of {node_id} that holds an invalid document") from None
    prepared = Prepared.of(document)
    revision, solutions = item.get("revision"), item.get("solution_revisions")
    hashes = {s["id"]: behavior_hash(s) for s in prepared.body["content"]["solutions"]}
    if (
        prepared.version != item.get("content_hash")
        or document.id != node_id
        or not _count(revision, lowest=1)
        or not isinstance(solutions, dict)
        or not set(hashes) <= set(solutions)
        or not all(_count(solutions[k], lowest=1) for k in hashes)
    ):
        raise remote_error(
            f"{remote_url} sent a revision of {node_id} that does not match its content hash, or "
            "numbers it or its solutions with something other than whole numbers"
        )
    problem = _revision_problem(item)
    if problem:
        raise remote_error(f"{remote_url} sent revision {revision} of {node_id} with {problem}")
    agent = item.get("agent") or {}
    row = RevisionRow(
        revision_id=item["revision_id"],
        node_id=node_id,
        revision=revision,
        parent_revision=item.get("parent_revision"),
        kind=item["kind"],
        version=prepared.version,
        agent_id=agent.get("id"),
        model=agent.get("model"),
        summary=item.get("summary") or "",
        changes=item.get("changes") or [],
        reverts_revision_id=item.get("reverts_revision_id"),
        created_at=item["created_at"],
        agent_proof=item["agent_proof"] if item.get("agent_proof") in PROOFS else "claimed",  # the team's mark
    )
    return SyncedRevision(
        row=row,
        document_json=prepared.body_json,
        solution_revisions={k: solutions[k] for k in hashes},
        solution_hashes=hashes,
    )


def _revision_problem(item: dict[str, Any]) -> str | None:
    """What is wrong with a revision's fields besides its document and numbers, in words, or None."""
    agent, changes, parent = item.get("agent"), item.get("changes"), item.get("parent_revision")
    checks = (
        (item.get("kind") in REVISION_KINDS, "an unknown kind"),
        (_short_text(item.get("revision_id")), "a revision_id that is not an id"),
        (
            item.get("reverts_revision_id") is None or _short_text(item["reverts_revision_id"]),
            "a reverts_revision_id that is not an id",
        ),
        (parent is None or _count(parent), "a parent_revision that is not a whole number"),
        (_timestamp(item.get("created_at")), "a created_at that is not a time like 2026-05-01T12:00:00.000000Z"),
        (
            agent is None
            or (
                isinstance(agent, dict)
                and _text(agent.get("id"), MAX_AGENT_ID)
                and _text(agent.get("model"), MAX_TEXT_CHARS)
            ),
            "an agent that is not an id and a model",
        ),
        (_text(item.get("summary"), MAX_TEXT_CHARS), "a summary that is not text"),
        (
            changes is None or (isinstance(changes, list) and all(isinstance(c, dict) for c in changes)),
            "changes that are not a list of objects",
        ),
    )
    return next((what for passed, what in checks if not passed), None)


def _feedback_row(remote_url: str, node_id: str, item: Any) -> dict[str, Any]:
    """One outcome report of the remote's, checked field by field before it is stored here (a
    `created_at` that is not a time was stored, then failed the stats with a raw ValueError)."""

    def text(key: str, *, required: bool = False) -> str | None:
        value = item.get(key)
        if not _text(value, MAX_TEXT_CHARS, required=required):
            raise remote_error(f"{remote_url} sent a feedback row of {node_id} with a bad {key}")
        return value

    if not isinstance(item, dict):
        raise remote_error(f"{remote_url} sent a feedback row of {node_id} that is not an object")
    revision, exit_code = item.get("solution_revision"), item.get("exit_code")
    if (
        item.get("outcome") not in OUTCOMES
        or not _count(revision, lowest=1)
        or not isinstance(item.get("environment"), dict)
        or not (exit_code is None or _count(exit_code, lowest=-MAX_INT - 1))
    ):
        raise remote_error(f"{remote_url} sent a feedback row of {node_id} that is malformed")
    if not _timestamp(item.get("created_at")):
        raise remote_error(
            f"{remote_url} sent a feedback row of {node_id} whose created_at is not a time like "
            "2026-05-01T12:00:00.000000Z"
        )
    return {
        "node_id": node_id,
        "node_version": text("node_version"),
        "solution_id": text("solution_id", required=True),
        "solution_revision": revision,
        "outcome": item["outcome"],
        "cluster": text("cluster", required=True),
        "environment": canonical_json(item["environment"]),
        "agent_id": text("agent_id"),
        "model": text("model"),
        "reason": text("reason"),
        "note": text("note"),
        "evidence_hash": text("evidence_hash"),
        "exit_code": exit_code,
        "created_at": item["created_at"],
        "proof": item["proof"] if item.get("proof") in PROOFS else "claimed",  # the team's mark, kept
    }


def _count(value: Any, *, lowest: int = 0) -> bool:
    """A whole number the store can keep (a bool is not one, though Python calls it an int)."""
    return isinstance(value, int) and not isinstance(value, bool) and lowest <= value <= MAX_INT


def _text(value: Any, limit: int, *, required: bool = False) -> bool:
    """Text of at most `limit` characters, or None unless `required`."""
    if value is None:
        return not required
    return isinstance(value, str) and len(value) <= limit


def _short_text(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 100


def _timestamp(value: Any) -> bool:
    """A time as the store writes it, 2026-05-01T12:00:00.000000Z: stored times are compared as text
    and read back with fromisoformat, so any other shape sorts wrong or fails later."""
    if not isinstance(value, str) or not TIMESTAMP_SHAPE.fullmatch(value):
        return False
    try:
        datetime.strptime(value, TIMESTAMP_FORMAT)
    except ValueError:
        return False
    return True


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
