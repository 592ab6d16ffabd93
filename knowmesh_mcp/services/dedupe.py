"""Suspected duplicates (protocol section 8): a pair of nodes that may be one problem, settled by
distinct agents' votes and never merged automatically (a maintainer confirms a flagged pair,
`maintaining`), and the queue's text form (`/dedupe.md`).
"""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter, not_found
from knowmesh_mcp.core.identity import Actor, acting
from knowmesh_mcp.services.publishing import author_of, path_number, require_node_id
from knowmesh_mcp.store import DuplicateRow, Store


class Dedupe:
    """`Mesh.dedupe`: suspected duplicates settled by distinct agents' votes, never auto-merged."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def open_dedupe_task(self, body: Any, *, actor: Actor | None = None) -> dict[str, Any]:
        """POST /v1/dedupe/tasks: queue a pair (`node`, `candidate`) that may be one problem."""
        if not isinstance(body, dict):
            raise KnowmeshError(400, "invalid_dedupe", "the request must be a JSON object", field="/")
        first, second = _pair_member(body, "node"), _pair_member(body, "candidate")
        if first == second:
            raise bad_parameter("candidate", "a node cannot duplicate itself", code="invalid_dedupe")
        opener = actor if actor is not None else acting(body.get("agent"), None, "off")
        async with self.store.write() as tx:
            for value in (first, second):
                if not await tx.versions_of([value]):
                    raise not_found("node", value)
            existing = await tx.dedupe_task_for(first, second)
            task_id = existing or await tx.insert_dedupe_task(
                first,
                second,
                body.get("reason") if isinstance(body.get("reason"), str) else None,
                opener.id,
            )
        return {
            "ok": True,
            "task_id": task_id,
            "created": existing is None,
            "path": "/dedupe.md",
            "vote": {
                "method": "POST",
                "path": f"/v1/dedupe/tasks/{task_id}/votes",
                "body": {
                    "vote": "<same | different>",
                    "canonical_id": f"<{first} or {second}, when same>",
                    "agent": {"id": "<your-agent-id>"},
                },
            },
        }

    async def vote_dedupe(self, task_id: Any, body: Any, *, actor: Actor | None = None) -> dict[str, Any]:
        """Two `same` votes on one canonical id flag the pair for a maintainer; two `different` close
        it. Only independent votes count (not unproven ones on a server with auth on)."""
        if not isinstance(body, dict) or body.get("vote") not in ("same", "different"):
            raise bad_parameter("vote", "vote must be same or different", code="invalid_dedupe")
        voter = author_of(body.get("agent"), actor)
        voter_id = voter.id
        assert voter_id is not None  # author_of refuses an author without an id
        number = path_number(task_id, "dedupe_task")
        async with self.store.write() as tx:
            task = await tx.dedupe_task(number)
            if task is None:
                raise not_found("dedupe_task", str(task_id))
            first, second, current_status = task
            canonical = body.get("canonical_id")
            if body["vote"] == "same" and canonical not in (first, second):
                raise bad_parameter(
                    "canonical_id", "a same vote names the node to keep: one of the pair", code="invalid_dedupe"
                )
            if current_status != "open":
                raise KnowmeshError(409, "dedupe_settled", f"this task is already {current_status}")
            try:
                await tx.add_dedupe_vote(
                    number,
                    voter_id,
                    voter.proof,
                    body["vote"],
                    canonical if body["vote"] == "same" else None,
                )
            except DuplicateRow:
                raise KnowmeshError(409, "duplicate_vote", "one vote per agent") from None
            votes = [(vote, target) for _, vote, target, proof in await tx.dedupe_votes(number) if proof != "unproven"]
            same: dict[str | None, int] = {}
            for vote, target in votes:
                if vote == "same":
                    same[target] = same.get(target, 0) + 1
            different = sum(1 for vote, _ in votes if vote == "different")
            status, settled_on = "open", None
            agreed = [target for target, count in same.items() if count >= 2]
            if agreed:
                status, settled_on = "flagged", agreed[0]
            elif different >= 2:
                status = "closed"
            if status != "open":
                await tx.set_dedupe_status(number, status, settled_on)
        return {
            "ok": True,
            "task_id": number,
            "status": status,
            "canonical_id": settled_on,
            "votes": {"same": sum(same.values()), "different": different},
            "counted": voter.votes,
        }

    async def dedupe_queue(self, *, limit: int = 50) -> dict[str, Any]:
        return {"tasks": await self.store.dedupe_tasks("open", limit), "trust": "untrusted-data"}


def _pair_member(body: dict[str, Any], name: str) -> str:
    """The node id `body[name]` names (`node` or `candidate`), checked: 400 when it is none."""
    value = body.get(name)
    if not isinstance(value, str):
        raise bad_parameter(name, f"{name} is required: a node id", code="invalid_dedupe")
    return require_node_id(value)


def dedupe_markdown(queue: dict[str, Any], base_url: str = "$KNOWMESH_URL") -> str:
    lines = [
        "# Duplicate candidates",
        "",
        "Two distinct agents voting `same` on one canonical id flag a pair for an administrator; two `different`",
        "votes close it. Nothing is merged automatically.",
        "",
    ]
    if not queue["tasks"]:
        lines.append("No open tasks.")
    for task in queue["tasks"]:
        lines += [
            f"- task {task['task_id']}: `{task['node']}` vs `{task['candidate']}` "
            f"(same {task['votes']['same']}, different {task['votes']['different']})",
            f"  `POST {base_url}/v1/dedupe/tasks/{task['task_id']}/votes` with "
            '`{"vote": "same", "canonical_id": "<id to keep>", "agent": {"id": "<you>"}}` or `{"vote": "different", ...}`',
        ]
    return "\n".join(lines) + "\n"
