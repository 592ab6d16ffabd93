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

This module fetches: the feed's pages, and for each page the histories and outcome reports it
needs, before any write; `sync_writes` writes a fetched page in one transaction, and
`sync_checks` checks every field the remote sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from knowmesh_mcp.core.errors import KnowmeshError, remote_error
from knowmesh_mcp.core.model import STATUSES
from knowmesh_mcp.services.local_agent import local_agent_id
from knowmesh_mcp.services.sync_checks import feed_page, feedback_row, is_count, remote_node_id
from knowmesh_mcp.services.sync_writes import NodePlan, PageIndex, SyncReport, sync_node
from knowmesh_mcp.store import Store

if TYPE_CHECKING:
    from knowmesh_mcp.services.remote import RemoteMesh
    from knowmesh_mcp.services.remote_api import ByteBudget

PAGE_SIZE = 100
FETCHES_AT_ONCE = 8

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

T = TypeVar("T")

Progress = Callable[[int, int], None]  # (nodes done, nodes known so far)


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
    """`Mesh.sync`: `sync_from`, a pull from a remote mesh."""

    def __init__(self, store: Store) -> None:
        self.store = store

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
        from knowmesh_mcp.services.remote import RemoteMesh
        from knowmesh_mcp.services.remote_api import ByteBudget, RemoteApi, public_url

        base_url = public_url(url)
        owned = remote is None
        mesh = remote or RemoteMesh(RemoteApi(url, token=token))
        report = SyncReport(remote=base_url)
        cursor = await self.store.sync_cursor(base_url)
        clock = SyncClock(base_url, SYNC_DEADLINE_SECONDS)
        sent = {cursor}  # the cursors this sync has asked with: a page must lead past them
        done, total = 0, 0
        try:
            while True:
                budget = ByteBudget(PAGE_BYTE_LIMIT, f"a page of {base_url}/v1/changes")
                page = feed_page(
                    await clock.wait(mesh.feed.changes(since=cursor, limit=page_size, budget=budget)),
                    base_url,
                    page_size,
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
                agent = await local_agent_id(self.store)
                # One transaction a page, the cursor in it: a page lands whole or not at all, and its
                # index rows are written together (docs/decisions.md, "Sync").
                async with self.store.write() as tx:
                    indexing = PageIndex()
                    for plan in plans:
                        await sync_node(tx, base_url, plan, fetched.get(plan.node_id, {}), agent, indexing, report)
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
        ids = [remote_node_id(entry["id"], remote_url) for entry in entries]
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
            if not (evidence_seq is None or is_count(evidence_seq)) or not (
                revision is None or is_count(revision, lowest=1)
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
                    merged_from=tuple(remote_node_id(m, remote_url) for m in merged if m != node_id),
                    merged_into=remote_node_id(canonical, remote_url) if canonical not in (None, node_id) else None,
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
                    await mesh.articles.article_history(
                        plan.node_id, after=plan.base or 0, include="documents", budget=budget
                    ),
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

    @staticmethod
    async def _fetch_feedback(
        mesh: RemoteMesh, node_id: str, after: int, budget: ByteBudget
    ) -> tuple[list[dict[str, Any]], int]:
        """The remote's outcome reports on a node after `after`, and the last one's id. Each page must
        lead past the one before (a list that answers the same page for ever was an endless loop);
        the page's byte budget bounds how many there are."""
        rows: list[dict[str, Any]] = []
        while True:
            page = await mesh.outcomes.list_feedback(node_id, after=after, budget=budget)
            items, next_after, has_more = page.get("feedback"), page.get("next_after"), page.get("has_more", False)
            if not (isinstance(items, list) and is_count(next_after) and isinstance(has_more, bool)):
                raise remote_error(f"{mesh.base_url} did not answer with the feedback of {node_id}")
            if items and next_after <= after:
                raise remote_error(
                    f"{mesh.base_url} answered the feedback of {node_id} after {after} with next_after "
                    f"{next_after}, which does not move past it: the sync stopped rather than read "
                    "the same reports for ever"
                )
            rows += [feedback_row(mesh.base_url, node_id, item) for item in items]
            after = next_after
            if not has_more or not items:
                return rows, after
