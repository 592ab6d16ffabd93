"""What a sync takes from its remote, checked field by field before anything is stored: a page of
the change feed, a node id, a revision with its document (which must hash to its version), an
outcome report. Whatever is wrong is a 502 `remote_error` naming the remote and the field, never a
raw error from the store later (the remote is untrusted: see `syncing`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeGuard

from knowmesh_mcp.core.errors import KnowmeshError, remote_error
from knowmesh_mcp.core.evidence import OUTCOMES
from knowmesh_mcp.core.identity import MAX_AGENT_ID, PROOFS
from knowmesh_mcp.core.limits import MAX_INT
from knowmesh_mcp.core.model import InvalidNode, canonical_json, validate_node
from knowmesh_mcp.services.publishing import Prepared, behavior_hash, require_node_id
from knowmesh_mcp.store import RevisionRow, SyncedRevision

REVISION_KINDS = ("create", "edit", "undo", "import", "sync")


MAX_CURSOR_CHARS = 500  # a feed cursor is stored in sync_state; this mesh's own are ~30 characters
MAX_TEXT_CHARS = 8000  # a revision's summary or model, a report's reason or note
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # every time the store writes (`utc_now`)
TIMESTAMP_SHAPE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")  # strptime is lenient


@dataclass(frozen=True)
class FeedPage:
    """A page of the remote's change feed, its fields checked (`feed_page`)."""

    entries: list[Any]
    next_cursor: str
    has_more: bool
    remaining: int  # changes after this page, for the progress bar


def feed_page(body: dict[str, Any], remote_url: str, page_size: int) -> FeedPage:
    """A page of the remote's change feed, each field checked before it is used: `remaining: "many"`
    was a raw ValueError from int(), and a `has_more` of "no" was taken as true."""
    where = f"{remote_url}/v1/changes"
    entries, cursor, has_more = body.get("changes"), body.get("next_cursor"), body.get("has_more", False)
    remaining = 0 if body.get("remaining") is None else body["remaining"]
    if not isinstance(entries, list) or not _text(cursor, MAX_CURSOR_CHARS, required=True) or not cursor:
        raise remote_error(f"{where} did not answer with a change feed")
    if len(entries) > page_size:
        raise remote_error(f"{where} answered {len(entries)} changes to a request for {page_size}")
    if not isinstance(has_more, bool) or not is_count(remaining):
        raise remote_error(
            f"{where} answered a has_more that is not true or false, or a remaining that is not a whole number"
        )
    return FeedPage(entries=entries, next_cursor=cursor, has_more=has_more, remaining=remaining)


def remote_node_id(value: str, remote_url: str) -> str:
    """A node id the remote named, checked as a client's is: a bad one is the remote's fault (502 naming
    it), not a 400 of this mesh's."""
    try:
        return require_node_id(value)
    except KnowmeshError:
        raise remote_error(f"{remote_url} named a node id that is not valid: {value[:200]!r}") from None


def synced_revision(remote_url: str, node_id: str, item: Any) -> SyncedRevision:
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
    if not (
        prepared.version == item.get("content_hash")
        and document.id == node_id
        and is_count(revision, lowest=1)
        and isinstance(solutions, dict)
        and set(hashes) <= set(solutions)
        and all(is_count(solutions[k], lowest=1) for k in hashes)
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
        (parent is None or is_count(parent), "a parent_revision that is not a whole number"),
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


def feedback_row(remote_url: str, node_id: str, item: Any) -> dict[str, Any]:
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
        or not is_count(revision, lowest=1)
        or not isinstance(item.get("environment"), dict)
        or not (exit_code is None or is_count(exit_code, lowest=-MAX_INT - 1))
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


def is_count(value: Any, *, lowest: int = 0) -> TypeGuard[int]:
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
