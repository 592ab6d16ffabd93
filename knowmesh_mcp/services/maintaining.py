"""What only maintainers do: set a node's status, confirm a flagged duplicate as a merge, close
or discard a service issue. Each is one transaction that also appends a row to the audit log
naming the maintainer (`GET /v1/audit`).

A maintainer is a proven actor with the maintainer role: a maintainer's bearer token, or the
`knowmesh-mcp admin` command on the local database (whoever may write the file). It is
`Mesh.maintenance`; depends on `identity`, `store` and `errors`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter, not_found
from knowmesh_mcp.core.identity import Actor, maintainer_required
from knowmesh_mcp.core.limits import MAX_MAINTAINER_NOTE, to_int
from knowmesh_mcp.core.model import STATUSES
from knowmesh_mcp.services.publishing import path_number, require_node_id
from knowmesh_mcp.store import Store, Writer, utc_now

T = TypeVar("T")
ISSUE_RESOLUTIONS = ("closed", "discarded")
AUDIT_PAGE = 200


def check_note(note: Any, *, required: bool = False) -> str | None:
    if note is None or (isinstance(note, str) and not note.strip()):
        if required:
            raise bad_parameter("note", "note is required: say why, for the people who filed it")
        return None
    if not isinstance(note, str) or len(note) > MAX_MAINTAINER_NOTE:
        raise bad_parameter("note", f"note must be text of at most {MAX_MAINTAINER_NOTE} characters")
    return note.strip()


def canonical_ref(node_id: str) -> dict[str, str]:
    return {"id": node_id, "path": f"/v1/nodes/{node_id}", "html_path": f"/nodes/{node_id}"}


def moved(node_id: str, canonical: str) -> KnowmeshError:
    """301: a merged node answers with its canonical one (the HTTP app sends `Location`)."""
    return KnowmeshError(
        301,
        "moved",
        f"{node_id} was merged into {canonical}: read {canonical}",
        merged=node_id,
        top_level={"canonical": canonical_ref(canonical)},
    )


class Maintaining:
    """`Mesh.maintenance`: maintainers' actions (status, merges, issue resolutions) and the audit log."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def set_status(self, node_id: str, status: Any, *, note: Any = None, actor: Actor) -> dict[str, Any]:
        """Promote a node to `verified`, set it back to `draft`, or `deprecate` it (it leaves lists
        and search, stays readable, and the change feed says `deprecated`)."""
        maintainer_required(actor)
        require_node_id(node_id)
        if status not in STATUSES:
            raise bad_parameter("status", f"status must be one of {', '.join(STATUSES)}")
        text = check_note(note)
        async with self.store.write() as tx:
            state = await tx.node_for_edit(node_id)
            if state is None:
                raise not_found("node", node_id)
            _, document, previous = state
            await refuse_merged(tx, node_id)
            if status == "verified" and not document["content"]["solutions"]:
                raise KnowmeshError(409, "no_answer", "an open problem (no answer) cannot be verified")
            if previous == status:
                return {"ok": True, "node": node_id, "status": status, "previous": previous, "changed": False}
            action = await write_status(tx, node_id, previous, status, text, actor.id or "", actor.proof)
        return {
            "ok": True,
            "node": node_id,
            "status": status,
            "previous": previous,
            "changed": True,
            "action_id": action,
            "maintainer": actor.as_agent(),
        }

    async def confirm_merge(
        self, task_id: Any, *, canonical_id: Any = None, note: Any = None, actor: Actor
    ) -> dict[str, Any]:
        """Merge a flagged duplicate pair: the other node is deprecated and its URLs answer 301 to
        the canonical one; its history, evidence and failed approaches stay where they were."""
        maintainer_required(actor)
        number = path_number(task_id, "dedupe_task")
        text = check_note(note)
        async with self.store.write() as tx:
            task = await tx.dedupe_task(number)
            if task is None:
                raise not_found("dedupe_task", str(task_id))
            first, second, task_status = task
            flagged_on = await tx.dedupe_canonical(number)
            if task_status != "flagged":
                raise KnowmeshError(
                    409,
                    "dedupe_not_flagged",
                    f"task {number} is {task_status}: only a pair that two "
                    "agents voted the same (flagged) can be merged",
                )
            canonical = canonical_id if canonical_id is not None else flagged_on
            if canonical not in (first, second):
                raise bad_parameter("canonical_id", f"canonical_id must be {first} or {second}")
            merged = second if canonical == first else first
            for node_id in (merged, canonical):
                await refuse_merged(tx, node_id)
            state, kept = await tx.node_for_edit(merged), await tx.node_for_edit(canonical)
            assert state is not None and kept is not None  # dedupe tasks reference nodes
            if kept[2] == "deprecated":
                raise KnowmeshError(
                    409,
                    "canonical_deprecated",
                    f"{canonical} is deprecated: set it back to draft first, or keep the other node",
                )
            action = await write_merge(
                tx, merged, canonical, state[2], text, actor.id or "", actor.proof, task_id=number
            )
            await tx.set_dedupe_status(number, "closed", canonical)
            await tx.touch_node(canonical)  # the canonical node now stands for both: the feed says so
        return {
            "ok": True,
            "task_id": number,
            "merged": merged,
            "canonical": canonical_ref(canonical),
            "action_id": action,
            "maintainer": actor.as_agent(),
        }

    async def resolve_issue(self, number: Any, status: Any, *, note: Any, actor: Actor) -> dict[str, Any]:
        """Close (fixed) or discard (not accepted) a service issue, with a note for who filed it."""
        maintainer_required(actor)
        issue = path_number(number, "issue")
        if status not in ISSUE_RESOLUTIONS:
            raise bad_parameter("status", "status must be closed (fixed) or discarded (not accepted)")
        text = check_note(note, required=True)
        async with self.store.write() as tx:
            current = await tx.issue_status(issue)
            if current is None:
                raise not_found("issue", str(number))
            if current != "open":
                raise KnowmeshError(409, "issue_resolved", f"issue {issue} is already {current}")
            resolution = {"note": text, "maintainer": actor.id, "at": utc_now()}
            await tx.resolve_issue(issue, status, resolution)
            action = await tx.insert_maintainer_action(
                "close_issue" if status == "closed" else "discard_issue",
                str(issue),
                {"from": "open", "to": status},
                text,
                actor.id or "",
                actor.proof,
            )
        return {"ok": True, "issue_number": issue, "status": status, "resolution": resolution, "action_id": action}

    async def audit_log(self, *, target: str | None = None, after: Any = None, limit: Any = None) -> dict[str, Any]:
        """GET /v1/audit: every maintainer action, oldest first (of one node or issue with `target`)."""
        first = 0 if after in (None, "") else to_int(after, "after", lowest=0)
        size = AUDIT_PAGE if limit in (None, "") else min(to_int(limit, "limit", lowest=1), AUDIT_PAGE)
        rows = await self.store.maintainer_actions(target or None, first, size + 1)
        page = rows[:size]
        return {"actions": page, "next_after": page[-1]["id"] if page else first, "has_more": len(rows) > size}

    async def flagged_pairs(self, *, limit: int = 50) -> dict[str, Any]:
        """Duplicate pairs two agents voted the same: what `confirm_merge` takes."""
        return {"tasks": await self.store.dedupe_tasks("flagged", limit), "trust": "untrusted-data"}


async def write_status(
    tx: Writer,
    node_id: str,
    previous: str,
    status: str,
    note: str | None,
    maintainer_id: str,
    proof: str,
    **detail: Any,
) -> int:
    """A status change and its audit row (the action id); `detail` adds to the row (a sync's remote)."""
    await tx.set_node_status(node_id, status)
    return await tx.insert_maintainer_action(
        "set_status", node_id, {"from": previous, "to": status, **detail}, note, maintainer_id, proof
    )


async def write_merge(
    tx: Writer,
    merged: str,
    canonical: str,
    previous: str,
    note: str | None,
    maintainer_id: str,
    proof: str,
    **detail: Any,
) -> int:
    """`merged` deprecated and answering with `canonical`, and the audit row (the action id)."""
    await tx.set_node_status(merged, "deprecated")
    action = await tx.insert_maintainer_action(
        "merge",
        merged,
        {"canonical": canonical, **detail, "from": previous, "to": "deprecated"},
        note,
        maintainer_id,
        proof,
    )
    await tx.insert_redirect(merged, canonical, action)
    return action


async def follow_redirect(store: Store, node_id: str, status: str) -> None:
    """Raise `moved` when a node was merged. Merged nodes are deprecated, so reads of every other
    node (their status in hand) pay nothing for this."""
    if status == "deprecated":
        canonical = await store.redirect(node_id)
        if canonical is not None:
            raise moved(node_id, canonical)


async def following_merge(read: Callable[[str], Awaitable[T]], node_id: str) -> T:
    """`read(node_id)`, or of its canonical node when it was merged (a `moved` error)."""
    try:
        return await read(node_id)
    except KnowmeshError as error:
        if error.status != 301:
            raise
        return await read(error.top_level["canonical"]["id"])


async def read_following_merge(read: Callable[[str], Awaitable[dict[str, Any]]], node_id: str) -> dict[str, Any]:
    """A read that lands on the canonical node of a merged one, marked `merged_from`: what an agent
    gets over MCP, which has no 301 to follow."""
    body = await following_merge(read, node_id)
    return {**body, "merged_from": node_id} if body["id"] != node_id else body


async def refuse_merged(tx: Writer, node_id: str) -> None:
    canonical = await tx.redirect(node_id)
    if canonical is not None:
        raise KnowmeshError(
            409,
            "node_merged",
            f"{node_id} was merged into {canonical}: work on {canonical}",
            top_level={"canonical": canonical_ref(canonical)},
        )
