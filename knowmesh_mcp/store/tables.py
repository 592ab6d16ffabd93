"""The tables a copy of a whole mesh moves (`services.copying`), described once for both backends.

`COPIED_TABLES` is an allow-list: every table and column name a copy's SQL holds comes from it,
never from request data (`copied_table` refuses any other name). `interface` re-exports both names,
the copy's part of the store's interface.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CopiedTable:
    """One table `copying` moves row for row between meshes (`dump_table`, `load_rows`, `update_rows`).

    `columns` in the order rows are read and written; `key` the unique columns rows are paged,
    ordered (byte order on every backend) and matched by, with `numeric` those of them that are
    integers; `mutable` the columns a later write may change (a row that differs anywhere else is
    another mesh's row); `identity` the column PostgreSQL numbers itself (its sequence is moved
    past copied ids); `target_keeps`: rows only the target holds are its own, not a sign of another
    mesh (a team's tokens, made before its members' meshes are copied in).
    """

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    numeric: tuple[str, ...] = ()
    mutable: tuple[str, ...] = ()
    identity: str | None = None
    target_keeps: bool = False


# The tables a copy moves, in an order every foreign key allows (a revision an undo reverts comes
# first: revisions are keyed by node and number). Not here: schema_migrations (each backend's own),
# the search index (rebuilt by the target from the documents), write_counts (hourly limits).
COPIED_TABLES: tuple[CopiedTable, ...] = (
    CopiedTable("meta", ("key", "value"), ("key",), mutable=("value",)),
    CopiedTable(
        "nodes",
        (
            "pk",
            "id",
            "ecosystem",
            "status",
            "title",
            "current_version",
            "current_revision",
            "has_answer",
            "signature_hash",
            "quoted_values",
            "created_at",
            "updated_at",
            "change_seq",
        ),
        ("id",),
        mutable=(
            "status",
            "title",
            "current_version",
            "current_revision",
            "has_answer",
            "signature_hash",
            "quoted_values",
            "updated_at",
            "change_seq",
        ),
        identity="pk",
    ),
    CopiedTable("node_versions", ("version", "node_id", "document", "solution_revisions", "created_at"), ("version",)),
    CopiedTable(
        "article_revisions",
        (
            "revision_id",
            "node_id",
            "revision",
            "parent_revision",
            "kind",
            "version",
            "agent_id",
            "model",
            "summary",
            "changes",
            "reverts_revision_id",
            "created_at",
            "agent_proof",
        ),
        ("node_id", "revision"),
        numeric=("revision",),
    ),
    CopiedTable("undo_tokens", ("revision_id", "token_hash", "used_at"), ("revision_id",), mutable=("used_at",)),
    CopiedTable(
        "solution_revisions",
        ("node_id", "solution_id", "revision", "behavior_hash", "created_at"),
        ("node_id", "solution_id", "revision"),
        numeric=("revision",),
    ),
    CopiedTable(
        "node_stats",
        (
            "node_id",
            "solution_id",
            "solution_revision",
            "cluster",
            "solved",
            "failed",
            "sample_size",
            "success_score",
            "failure_state",
            "answer_state",
            "solved_agents",
            "failed_agents",
            "last_verified",
            "updated_at",
        ),
        ("node_id", "solution_id", "solution_revision", "cluster"),
        numeric=("solution_revision",),
        mutable=(
            "solved",
            "failed",
            "sample_size",
            "success_score",
            "failure_state",
            "answer_state",
            "solved_agents",
            "failed_agents",
            "last_verified",
            "updated_at",
        ),
    ),
    CopiedTable(
        "feedback",
        (
            "id",
            "node_id",
            "node_version",
            "solution_id",
            "solution_revision",
            "outcome",
            "cluster",
            "environment",
            "agent_id",
            "model",
            "ip_hash",
            "reason",
            "note",
            "evidence_hash",
            "exit_code",
            "created_at",
            "proof",
        ),
        ("id",),
        numeric=("id",),
        identity="id",
    ),
    CopiedTable(
        "failures",
        (
            "id",
            "node_id",
            "environment",
            "cluster",
            "summary",
            "steps",
            "reason",
            "agent_id",
            "model",
            "ip_hash",
            "created_at",
            "archived_at",
            "archived_by",
            "proof",
        ),
        ("id",),
        numeric=("id",),
        mutable=("archived_at", "archived_by"),
        identity="id",
    ),
    CopiedTable(
        "dedupe_tasks",
        ("id", "node_id", "candidate_id", "reason", "created_by", "status", "canonical_id", "created_at"),
        ("id",),
        numeric=("id",),
        mutable=("status", "canonical_id"),
        identity="id",
    ),
    CopiedTable(
        "dedupe_votes",
        ("task_id", "agent_id", "proof", "vote", "canonical_id", "created_at"),
        ("task_id", "agent_id", "proof"),
        numeric=("task_id",),
    ),
    CopiedTable(
        "service_issues",
        (
            "number",
            "title",
            "body",
            "details",
            "agent_id",
            "model",
            "ip_hash",
            "status",
            "created_at",
            "proof",
            "resolution",
        ),
        ("number",),
        numeric=("number",),
        mutable=("status", "resolution"),
        identity="number",
    ),
    CopiedTable(
        "agent_tokens",
        ("token_hash", "agent_id", "role", "created_at", "last_used_at", "revoked_at"),
        ("token_hash",),
        mutable=("last_used_at", "revoked_at"),
        target_keeps=True,
    ),
    CopiedTable(
        "maintainer_actions",
        ("id", "action", "target", "detail", "note", "maintainer_id", "proof", "created_at"),
        ("id",),
        numeric=("id",),
        identity="id",
    ),
    CopiedTable(
        "node_redirects",
        ("node_id", "canonical_id", "action_id", "created_at"),
        ("node_id",),
        mutable=("canonical_id",),
    ),
    CopiedTable("sync_state", ("remote", "cursor", "synced_at"), ("remote",), mutable=("cursor", "synced_at")),
    CopiedTable(
        "synced_nodes",
        ("remote", "node_id", "revision", "evidence_after"),
        ("remote", "node_id"),
        mutable=("revision", "evidence_after"),
    ),
    CopiedTable(
        "sync_conflicts",
        (
            "id",
            "remote",
            "node_id",
            "base_revision",
            "remote_revision",
            "local_revisions",
            "both_changed",
            "kept_revision",
            "created_at",
        ),
        ("id",),
        numeric=("id",),
        mutable=("kept_revision",),
        identity="id",
    ),
    CopiedTable("moved_revisions", ("revision_id", "conflict_id"), ("revision_id",)),
)

_COPIED = {table.name: table for table in COPIED_TABLES}


def copied_table(name: str) -> CopiedTable:
    """The allow-listed table `name` (a constant of `copying`, never request data)."""
    try:
        return _COPIED[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a table a copy moves") from None
