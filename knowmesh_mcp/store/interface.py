"""The store interface: what the service and everything above it may call, and nothing else.

`Store` is a database (reads outside a transaction, and `write()` opening one); `Writer` is one
write transaction. Each backend (`sqlite`, and `postgres` for a team's mesh) implements both with
these exact signatures, which `tests/test_store_interface.py` checks; rows come back as the plain
dataclasses and named tuples of `rows` (`NodeRow`, `StatsRow`, `ChangeRow`, ...) and plain tuples,
the same on every backend; a unique rule that refuses a row raises `rows.DuplicateRow`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from knowmesh_mcp.core.rows import (
    CandidateText,
    ChangeRow,
    ChannelMatch,
    CurrentDocument,
    DedupeTask,
    DedupeVote,
    EcosystemCount,
    Edit,
    Frequencies,
    LiveToken,
    NewNode,
    NodeForEdit,
    NodeForRead,
    NodeRow,
    OutcomeReport,
    PinnedVersion,
    ReviewRow,
    RevisionRow,
    RevisionWithDocument,
    SearchRow,
    StatsRow,
    SyncedHead,
    SyncedRevision,
    TermQuery,
    UndoToken,
)

# The tables a copy moves are the copy's part of the interface: re-exported as its names.
from knowmesh_mcp.store.tables import COPIED_TABLES as COPIED_TABLES
from knowmesh_mcp.store.tables import CopiedTable as CopiedTable

# The meta key of a mesh's starter corpus: "pending" from the transaction that creates the mesh
# (its first migration) until a `Mesh` has loaded the corpus ("loaded") or was told not to
# ("declined"). Every process that opens a pending mesh loads it before it serves a search.
STARTER_CORPUS = "starter_corpus"


async def meta_made_once(store: Store, key: str, make: Callable[[], str]) -> str:
    """The meta value `key`, made by `make` and stored the first time it is asked for: read again
    under the write lock, so two processes (or servers) that ask at once agree on one value."""
    value = await store.get_meta(key)
    if value is None:
        async with store.write() as tx:
            value = await store.get_meta(key)
            if value is None:
                value = make()
                await tx.set_meta(key, value)
    return value


class Writer(Protocol):
    """One write transaction: everything it does commits together, or nothing does."""

    async def add_dedupe_vote(
        self, task_id: int, agent_id: str, proof: str, vote: str, canonical_id: str | None
    ) -> None:
        """Raises `DuplicateRow` when this agent (so proven) already voted on the task."""
        ...

    async def add_token(self, token_hash: str, agent_id: str, role: str) -> None: ...

    async def apply_edit(self, edit: Edit) -> str:
        """Publish an edit: new current version, its revision, undo token and index rows. Returns the time."""
        ...

    async def apply_synced(self, head: SyncedHead, revisions: Sequence[SyncedRevision], *, fresh: bool) -> None:
        """Write the remote's revisions with their ids, numbers, authors and times, and make the last current.
        Not its index rows: a sync writes a page's at once (`write_search_rows`)."""
        ...

    async def archive_failures(self, ids: Sequence[int], revision_id: str) -> None: ...

    async def count_write(self, subject: str, hour: str) -> int:
        """Count one accepted submission of `subject` in `hour` (older hours are forgotten); returns the hour's count."""
        ...

    async def current_revision(self, node_id: str) -> int: ...

    async def dedupe_canonical(self, task_id: int) -> str | None:
        """The node two `same` votes agreed to keep (set when the task was flagged)."""
        ...

    async def dedupe_task(self, task_id: int) -> DedupeTask | None:
        """The node, candidate and status of one task."""
        ...

    async def dedupe_task_for(self, first: str, second: str) -> int | None: ...

    async def dedupe_votes(self, task_id: int) -> list[DedupeVote]:
        """A task's votes, oldest first."""
        ...

    async def duplicate_of(self, signature_hash: str, quoted: list[str]) -> str | None:
        """The node whose normalized signature and quoted values both match, if any."""
        ...

    async def feedback_of(self, node_id: str) -> list[OutcomeReport]:
        """The reports that are evidence on a node; the voter is None for an anonymous one (a personal mesh's rule). Unproven reports (no token, on a server with auth on) are left out: kept and listed, they move no state at all, or one forged `solved` could show a known_failed answer again."""
        ...

    async def insert_dedupe_task(
        self, node_id: str, candidate_id: str, reason: str | None, agent_id: str | None
    ) -> int: ...

    async def insert_maintainer_action(
        self, action: str, target: str, detail: dict[str, Any], note: str | None, maintainer_id: str, proof: str
    ) -> int: ...

    async def insert_nodes(self, nodes: Sequence[NewNode]) -> None:
        """Insert new nodes with their first version, revision 1, solution revisions and index rows."""
        ...

    async def insert_redirect(self, node_id: str, canonical_id: str, action_id: int) -> None:
        """`node_id` now answers with `canonical_id`; nodes merged into `node_id` follow it there too."""
        ...

    async def insert_row(self, table: str, row: dict[str, Any]) -> int:
        """INSERT one row given as {column: value} into one of our tables; returns its rowid."""
        ...

    async def insert_synced_feedback(self, rows: Sequence[dict[str, Any]]) -> int:
        """Feedback rows copied from a remote; one an agent already gave here is kept once. Returns how many."""
        ...

    async def issue_status(self, number: int) -> str | None: ...

    async def move_revisions(
        self,
        node_id: str,
        revision_ids: Sequence[str],
        keep_solution_revisions: dict[str, int],
        conflict: dict[str, Any],
    ) -> int:
        """Move local revisions into a new sync_conflicts row (documents included) and out of history, with the solution revision numbers only they used (the remote's take those numbers)."""
        ...

    async def node_for_edit(self, node_id: str) -> NodeForEdit | None:
        """The node's current revision, document and status, read inside the write transaction."""
        ...

    async def current_documents(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """{id: current document} of those ids that exist, read inside the write transaction."""
        ...

    async def open_failures(self, node_id: str) -> list[tuple[int, dict[str, Any]]]:
        """(id, environment) of the node's failed attempts not yet archived."""
        ...

    async def redirect(self, node_id: str) -> str | None: ...

    async def replace_stats(self, node_id: str, rows: Sequence[StatsRow]) -> None: ...

    async def resolve_issue(self, number: int, status: str, resolution: dict[str, Any]) -> None: ...

    async def revision(self, revision_id: str) -> RevisionRow | None: ...

    async def revisions_after(self, node_id: str, revision: int) -> list[RevisionRow]: ...

    async def revisions_with_documents(self, node_id: str, after: int = 0) -> list[RevisionWithDocument]: ...

    async def revoke_tokens(self, agent_id: str, token_id: str | None = None) -> int:
        """Revoke the agent's live tokens (with `token_id`, only the one whose hash starts with it)."""
        ...

    async def set_conflict_kept(self, conflict_id: int, revision: int) -> None: ...

    async def set_dedupe_status(self, task_id: int, status: str, canonical_id: str | None) -> None: ...

    async def set_evidence_synced(self, remote: str, node_id: str, after: int) -> None: ...

    async def delete_meta(self, key: str) -> None: ...

    async def dump_table(
        self, table: str, after: Sequence[Any] | None, limit: int, until: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """Rows of one `COPIED_TABLES` table (its columns, in key order) with key > `after` and <= `until`, read in this transaction."""
        ...

    async def load_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> int:
        """INSERT whole rows (in the table's column order, explicit ids included) of one `COPIED_TABLES` table; PostgreSQL's identity and change counter move past them."""
        ...

    async def update_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> int:
        """Set the `mutable` columns of existing rows (whole rows, matched by key) of one `COPIED_TABLES` table."""
        ...

    async def set_meta(self, key: str, value: str) -> None: ...

    async def set_node_status(self, node_id: str, status: str) -> None:
        """A maintainer's status change; the node moves to the end of the change feed."""
        ...

    async def set_signature_hashes(self, hashes: Iterable[tuple[str, str]]) -> None:
        """(signature_hash, node_id) pairs, for recomputing derived hashes after a normalizer change."""
        ...

    async def set_sync_cursor(self, remote: str, cursor: str) -> None: ...

    async def set_synced(self, remote: str, node_id: str, revision: int) -> None: ...

    async def duplicates_of(self, keys: Iterable[tuple[str, Sequence[str]]]) -> dict[tuple[str, tuple[str, ...]], str]:
        """{(signature hash, quoted values): the first node id, in id order, holding both} for the keys
        that have one: one index probe each, however many siblings share the hash."""
        ...

    async def solution_behaviours(self, node_id: str) -> dict[str, dict[str, int]]:
        """{solution id: {behaviour hash: revision}} of every behaviour a solution ever had."""
        ...

    async def spend_undo_token(self, revision_id: str) -> bool:
        """Mark a token used; False when another undo spent it first."""
        ...

    async def touch_node(self, node_id: str) -> None:
        """Move a node to the end of the change feed (new evidence), leaving its content alone."""
        ...

    async def touch_token(self, token_hash: str, at: str) -> None: ...

    async def undo_token(self, revision_id: str) -> UndoToken | None:
        """A revision's undo token: its hash and when it was used."""
        ...

    async def versions_of(self, ids: Sequence[str]) -> dict[str, str]:
        """{id: current version} of those ids that exist."""
        ...

    async def write_search_rows(self, rows: Sequence[tuple[str, SearchRow]], *, fresh: bool = False) -> None:
        """(Re)write the index rows of existing nodes; `fresh` nodes have none to remove first."""
        ...


class Store(Protocol):
    """A mesh's database: reads, and `write()` for one transaction."""

    path: str  # where it is: a file, or a PostgreSQL URL (without its password)
    created: bool  # True when this open made the database (the service then seeds it)
    shared: bool  # True when several servers may serve it at once (PostgreSQL): process state is not enough
    read_only: bool  # a file this process may only read: reads work, every write is `read_only_database`

    async def answers_in_state(self, failure_state: str, limit: int) -> list[ReviewRow]:
        """Current answers in `failure_state` in some cluster, most reports first."""
        ...

    async def awaiting_second_verification(self, before: str, limit: int) -> list[ReviewRow]:
        """Current answers, published before `before`, with exactly one independent solved report."""
        ...

    async def candidate_texts(self, versions: dict[int, str]) -> list[CandidateText]:
        """The indexed text of each node of `versions` ({pk: current version}), in that order."""
        ...

    async def changes_after(self, seq: int, limit: int) -> list[ChangeRow]:
        """The nodes written after `seq`, in write order."""
        ...

    async def channel_matches(
        self,
        hashes: Sequence[str],
        quoted: Sequence[str],
        signature_limit: int,
        queries: Sequence[TermQuery],
        family_limit: int = 0,
    ) -> list[ChannelMatch]:
        """The matches of every channel, in one round trip.

        With `family_limit`, a `family` channel too: the lowest-pk `family_limit` generic nodes
        (`specific` 0) sharing a signature hash with a specific node a term channel found."""
        ...

    async def close(self) -> None: ...

    async def count_changes_after(self, seq: int) -> int: ...

    async def count_rows(self, table: str) -> int:
        """How many rows one `COPIED_TABLES` table holds."""
        ...

    async def count_nodes(self) -> int: ...

    async def dedupe_tasks(self, status: str | None, limit: int) -> list[dict[str, Any]]: ...

    async def document_at(self, node_id: str, revision: int) -> dict[str, Any] | None:
        """The document an article revision published."""
        ...

    async def dump_table(
        self, table: str, after: Sequence[Any] | None, limit: int, until: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """Rows of one `COPIED_TABLES` table (its columns, in key order) with key > `after` and <= `until`: what a copy reads."""
        ...

    async def document_frequencies(
        self, terms: Sequence[str], grams: Sequence[str] = (), heads: Sequence[str] = ()
    ) -> Frequencies:
        """How many nodes hold each term (in any field), each template trigram of `grams` and each term
        of `heads` in title or signature (absent ones are left out), and `indexed_node_count` (BM25's N)
        read with them."""
        ...

    async def ecosystem_counts(self) -> list[EcosystemCount]:
        """The non-deprecated nodes and open problems of each ecosystem, by ecosystem."""
        ...

    async def answered_nodes(self, offset: int, limit: int) -> list[tuple[str, str]]:
        """(id, updated_at) of the answered, non-deprecated nodes in id order, from `offset` (the sitemap's)."""
        ...

    async def failures_after_edit(self, limit: int) -> list[ReviewRow]:
        """Failure reports newer than the article's current revision: nobody acted on them yet."""
        ...

    async def failures_of(self, node_id: str) -> list[dict[str, Any]]:
        """Every failed attempt on a node, visible and archived, oldest first."""
        ...

    async def feedback_after(self, node_id: str, after: int, limit: int) -> list[dict[str, Any]]:
        """A node's feedback rows after id `after`, without the address hash: what a sync copies."""
        ...

    async def get_meta(self, key: str) -> str | None: ...

    async def get_node(self, node_id: str) -> NodeRow | None: ...

    async def get_node_for_read(self, node_id: str) -> NodeForRead | None:
        """A node with its node_stats rows and its count of failed attempts, in one round trip."""
        ...

    async def get_nodes(self, ids: Sequence[str]) -> dict[str, NodeRow]:
        """{id: node} of those ids that exist, in one round trip."""
        ...

    async def get_nodes_by_pk(self, pks: Sequence[int]) -> list[NodeRow]: ...

    async def get_nodes_with_stats_by_pk(self, pks: Sequence[int]) -> list[tuple[NodeRow, list[StatsRow]]]:
        """The nodes of `pks` (in that order, absent ones left out), each with its node_stats rows: what
        search result entries are built from."""
        ...

    async def get_version(self, node_id: str, version: str) -> PinnedVersion | None:
        """One pinned version of a node: its document, solution revisions and created_at."""
        ...

    async def health_facts(self) -> dict[str, Any]:
        """What `doctor` and GET /v1/health report: versions, counts, tokens, syncs, integrity."""
        ...

    async def indexed_node_count(self) -> int:
        """The number of nodes BM25's document frequencies are relative to: the highest node pk, read on every call."""
        ...

    async def iter_current_documents(self, batch: int = 500) -> AsyncIterator[CurrentDocument]:
        """The current document, status and version of every node in id order."""
        raise NotImplementedError
        yield  # never reached: it makes this an async generator, as the backends' are

    async def list_nodes(self, *, ecosystem: str | None, after_id: str | None, limit: int) -> list[NodeRow]:
        """Current, non-deprecated nodes in id order, after `after_id`."""
        ...

    async def maintainer_actions(self, target: str | None, after: int, limit: int) -> list[dict[str, Any]]:
        """The audit log (optionally of one node or issue), oldest first, after action id `after`."""
        ...

    async def redirect(self, node_id: str) -> str | None:
        """The canonical node a merged node answers with, or None."""
        ...

    async def revision_of_version(self, node_id: str, version: str) -> int:
        """The latest article revision that published `version`."""
        ...

    async def revisions(self, node_id: str) -> list[RevisionRow]: ...

    async def revisions_with_documents(self, node_id: str, after: int = 0) -> list[RevisionWithDocument]:
        """Every revision after `after` with its document: what a sync copies."""
        ...

    async def service_issues(self, number: int | None = None, limit: int = 200) -> list[dict[str, Any]]: ...

    async def stale_nodes(self, before: str, limit: int) -> list[ReviewRow]:
        """Answered nodes never verified, or last verified before `before`."""
        ...

    async def stats_of(self, node_ids: Sequence[str]) -> dict[str, list[StatsRow]]:
        """{node id: its node_stats rows} (nodes without evidence are absent)."""
        ...

    async def sync_conflicts(self, node_id: str | None = None) -> list[dict[str, Any]]: ...

    async def sync_cursor(self, remote: str) -> str | None: ...

    async def synced_states(self, remote: str, node_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """{node id: (the last revision known identical here and on `remote`, i.e. the merge base; the remote's last feedback id copied here)} of the nodes synced before."""
        ...

    async def token(self, token_hash: str) -> LiveToken | None:
        """The agent, role and last use of a live (unrevoked) token."""
        ...

    async def tokens(self) -> list[dict[str, Any]]:
        """Every token's agent, role and dates (never the hash), oldest first."""
        ...

    async def unsolved_nodes(self, limit: int) -> list[ReviewRow]: ...

    def write(self) -> AbstractAsyncContextManager[Writer]:
        """One write transaction: all of it commits, or none of it does."""
        ...

    def bulk_import(self) -> AbstractAsyncContextManager[None]:
        """What an import's write transactions run inside: a backend may put off index upkeep that
        is cheaper done once, at the end."""
        ...
