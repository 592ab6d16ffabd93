"""The rows a store returns and takes: plain dataclasses, the same on every backend."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

# A token's id: the start of its hash, enough to tell an agent's tokens apart, nothing to guess it by.
TOKEN_ID_LENGTH = 8
TOKEN_FIELDS = ("id", "agent_id", "role", "created_at", "last_used_at", "revoked_at")  # of `Store.tokens`


class DuplicateRow(Exception):
    """A unique rule refused a row (a second vote of one agent, a duplicate report): every backend
    raises this, never its driver's own error, so the service stays backend-blind."""


@dataclass(frozen=True)
class NodeRow:
    """A node's summary row with its current document."""

    pk: int
    id: str
    ecosystem: str
    status: str
    title: str
    version: str
    revision: int
    has_answer: bool
    created_at: str
    updated_at: str
    document: dict[str, Any]
    solution_revisions: dict[str, int]
    document_size: int  # bytes of the stored JSON: what reading the article costs


@dataclass(frozen=True)
class StatsRow:
    """One node_stats row: evidence of one solution revision in one cluster ('' = all)."""

    solution_id: str
    solution_revision: int
    cluster: str
    solved: float
    failed: float
    sample_size: int
    success_score: float
    failure_state: str
    answer_state: str
    solved_agents: int
    failed_agents: int
    last_verified: str | None


# A candidate's term counts, packed: title | signature << 5 | article << 10. Each is capped at 20,
# where BM25's term-frequency part stops growing in ranking (a sum of capped counts saturates
# exactly when the sum of the counts does).
COUNT_CAP = 20
SIGNATURE_SHIFT, ARTICLE_SHIFT = 5, 10
FIELD_MASK = (1 << SIGNATURE_SHIFT) - 1


@dataclass
class CandidateText:
    """What search ranking reads of a candidate node: its indexed term keys and templates.

    Immutable for a node version; kept by `Store.candidate_texts` across queries, so ranking
    caches what it derives from it (`counts`).
    """

    pk: int
    id: str
    ecosystem: str
    title: str  # term keys, as indexed
    signature: str
    article: str
    templates: str  # normalized, one per line
    template_terms: str  # each template's term keys, one line per template
    slug_terms: str  # the id's content-word keys
    value_terms: str  # keys of the error's values that can name what the node is about
    value_shapes: str  # "path" or "name" for each of the error's values, in order

    @cached_property
    def counts(self) -> dict[str, int]:
        """Each term's counts in title, signature and article packed in one int (see COUNT_CAP):
        one dict instead of three, so ranking reads a term once and a kept text is smaller."""
        cap = COUNT_CAP
        packed = {term: (n if n < cap else cap) << ARTICLE_SHIFT for term, n in Counter(self.article.split()).items()}
        for term, n in Counter(self.signature.split()).items():
            packed[term] = packed.get(term, 0) + ((n if n < cap else cap) << SIGNATURE_SHIFT)
        for term, n in Counter(self.title.split()).items():
            packed[term] = packed.get(term, 0) + (n if n < cap else cap)
        return packed

    @cached_property
    def derived(self) -> Derived:
        """What ranking reads of the index columns, split once per node version."""
        slug = frozenset(self.slug_terms.split())
        return Derived(
            slug,
            frozenset(self.value_terms.split()) & slug,
            [frozenset(line.split()) for line in self.template_terms.split("\n")],
            self.templates.split("\n"),
        )


class Derived(NamedTuple):
    """A candidate's index columns as ranking reads them."""

    slug: frozenset[str]  # the id's words
    specific: frozenset[str]  # the values the node is about (empty for a generic node, whose values are examples)
    template_terms: list[frozenset[str]]  # each template's term set
    templates: list[str]  # the templates


class Frequencies(NamedTuple):
    """How many nodes hold each asked term: in any field, as a template trigram, in title or signature;
    and how many nodes they are counted among (BM25's N, read with them)."""

    terms: dict[str, int]
    grams: dict[str, int]
    heads: dict[str, int]
    nodes: int


@dataclass(frozen=True)
class TermQuery:
    """One term channel's FTS5 query: nodes holding any (with `every`: all) of `terms`.

    Ranking by BM25 reads every match, so it is asked for only when the matches are too many to
    take all and few enough to afford; unranked, the first `limit` matches come back.
    """

    channel: str
    table: str  # "search" (title, signature, article) or "heads" (title, signature) or "grams" (template trigrams)
    terms: Sequence[str]
    limit: int
    every: bool = False
    ranked: bool = False
    # Each term's bm25 idf (FTS5's formula), for a backend whose ranking does not compute it
    # (PostgreSQL's ts_rank); SQLite's bm25() ignores it.
    weights: Sequence[float] = ()
    # At most this share of the nodes match (the rarest term's), and at most this many: where matches
    # are dense, a backend can find the lowest pks by walking the pks in order (FTS5's doclists are in
    # that order already) instead of visiting every match.
    density: float = 0.0
    matches: int = 0
    # Ranked over titles and signatures or the full text: of the best `pool` matches, at most
    # `per_family` of one template family (nodes of the same template, each about its own value,
    # read alike and would fill the channel), then the best `limit` of those. 0: no cap.
    per_family: int = 0
    pool: int = 0


@dataclass(frozen=True)
class SearchRow:
    """A node's rows in the search index (node_search, node_signatures, node_index)."""

    title: str
    signature: str
    article: str
    template: str
    template_terms: str  # each template's term keys, one line per template
    slug_terms: str
    value_terms: str
    value_shapes: str
    grams: str  # templates without placeholders, for the trigram table
    specific: bool  # the node's id names the error's quoted value: the node is about that value
    signature_hashes: tuple[tuple[str, str], ...]  # (hash, source)


@dataclass(frozen=True)
class NewNode:
    """Everything one node insert writes, prepared by the caller outside the transaction."""

    id: str
    ecosystem: str
    status: str
    title: str
    version: str
    document_json: str
    solution_revisions: dict[str, int]
    solution_hashes: dict[str, str]
    has_answer: bool
    signature_hash: str
    quoted_values: list[str]
    index: SearchRow
    revision_id: str
    kind: str
    agent_id: str | None
    model: str | None
    summary: str
    changes_json: str
    agent_proof: str = "claimed"  # identity.PROOFS


@dataclass(frozen=True)
class Edit:
    """Everything one article edit writes, prepared by the caller inside the transaction."""

    node_id: str
    title: str
    version: str
    document_json: str
    solution_revisions: dict[str, int]
    new_solution_revisions: list[tuple[str, int, str]]  # (solution id, revision, behaviour hash)
    has_answer: bool
    signature_hash: str
    quoted_values: list[str]
    index: SearchRow
    revision_id: str
    revision: int
    kind: str
    agent_id: str | None
    model: str | None
    summary: str
    changes_json: str
    undo_token_hash: str
    reverts_revision_id: str | None = None
    agent_proof: str = "claimed"


@dataclass(frozen=True)
class RevisionRow:
    revision_id: str
    node_id: str
    revision: int
    parent_revision: int | None
    kind: str
    version: str
    agent_id: str | None
    model: str | None
    summary: str
    changes: list[dict[str, Any]]
    reverts_revision_id: str | None
    created_at: str
    agent_proof: str = "claimed"


@dataclass(frozen=True)
class SyncedRevision:
    """One revision exactly as the remote mesh has it, with the document it published."""

    row: RevisionRow
    document_json: str
    solution_revisions: dict[str, int]
    solution_hashes: dict[str, str]  # {solution id: behaviour hash} of this document


@dataclass(frozen=True)
class SyncedHead:
    """A node's row after a sync: the remote's current revision, its status and derived fields."""

    id: str
    ecosystem: str
    status: str
    title: str
    has_answer: bool
    signature_hash: str
    quoted_values: list[str]


class OutcomeReport(NamedTuple):
    """One outcome report that is evidence on a node (`Writer.feedback_of`): what `evidence.node_stats` replays."""

    solution_id: str
    solution_revision: int
    cluster: str
    outcome: str
    agent_id: str | None  # None for an anonymous report (a personal mesh's rule)
    created_at: str


class ChannelMatch(NamedTuple):
    """One node a search channel found (`Store.channel_matches`)."""

    channel: str  # "signature", a term channel's name, or "family"
    node_pk: int
    hash: str | None  # the signature hash it matched: set on the signature channel only
    version: str  # the node's current version, read with the match


class DedupeVote(NamedTuple):
    """One agent's vote on a dedupe task (`Writer.dedupe_votes`)."""

    agent_id: str
    vote: str  # same | different
    canonical_id: str | None  # the node a `same` vote would keep
    proof: str  # identity.PROOFS


class ChangeRow(NamedTuple):
    """One node of the change feed (`Store.changes_after`), in write order."""

    change_seq: int
    id: str
    version: str
    status: str
    title: str
    created_at: str
    updated_at: str
    revision: int
    has_answer: int  # 0 or 1, as the column holds it
    stats_json: str  # its node_stats rows of one answer in one cluster, as JSON lists in StatsRow's field order
    evidence_seq: int  # the node's last feedback id (0: none)
    merged: list[str]  # ids of the nodes merged into it
    canonical: str | None  # the node it was merged into, or None


class NodeForEdit(NamedTuple):
    """A node as an edit reads it inside the write transaction (`Writer.node_for_edit`)."""

    revision: int  # the current article revision
    document: dict[str, Any]  # the current document
    status: str


class NodeForRead(NamedTuple):
    """A node with what a read shows of its evidence (`Store.get_node_for_read`)."""

    node: NodeRow
    stats: list[StatsRow]  # its node_stats rows
    failures: int  # its count of failed attempts


class PinnedVersion(NamedTuple):
    """One version of a node, as a read pinned to it shows it (`Store.get_version`)."""

    document: dict[str, Any]
    solution_revisions: dict[str, int]
    created_at: str


class EcosystemCount(NamedTuple):
    """One ecosystem's non-deprecated nodes (`Store.ecosystem_counts`)."""

    ecosystem: str
    nodes: int
    open_problems: int  # nodes without an answer


class LiveToken(NamedTuple):
    """What a live (unrevoked) token grants (`Store.token`)."""

    agent_id: str
    role: str
    last_used_at: str | None


class DedupeTask(NamedTuple):
    """One dedupe task as a vote reads it (`Writer.dedupe_task`)."""

    node_id: str
    candidate_id: str
    status: str


class CurrentDocument(NamedTuple):
    """A node's current document (`Store.iter_current_documents`)."""

    document: dict[str, Any]
    status: str
    version: str


class UndoToken(NamedTuple):
    """A revision's undo token as an undo checks it (`Writer.undo_token`)."""

    token_hash: str
    used_at: str | None  # when it was spent, or None while it still works


class RevisionWithDocument(NamedTuple):
    """A revision with the whole document it made (`Store.revisions_with_documents`: what a sync copies)."""

    row: RevisionRow
    document: dict[str, Any]
    solutions: dict[str, int]  # each answer's revision number at this revision


class ReviewRow(NamedTuple):
    """One finding of a review query (`Store.answers_in_state`, `stale_nodes`, ...): a node, and the
    answer and cluster it is about when the reason names one."""

    node_id: str
    title: str
    base_revision: int  # the node's current revision
    solution_id: str | None
    solution_revision: int | None
    cluster: str | None
    reports: int
