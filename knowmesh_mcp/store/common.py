"""What both backends share, in one place: where the SQL lives (`store_dir`), the clock, the
migration files, the column lists and row builders of the tables both read alike, the SQL of a
whole-mesh copy, and the Python both run around their own SQL (search's channel rows folded into
the interface's shape, one duplicate lookup, the candidate texts kept across queries, the
document-frequency keys of an index row, and the conditions of a node list).

Neither backend imports the other: each imports this module, `tables` and `interface`.
"""

from __future__ import annotations

import json
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from knowmesh_mcp.core.rows import (
    CandidateText,
    ChannelMatch,
    NodeRow,
    ReviewRow,
    RevisionRow,
    RevisionWithDocument,
    SearchRow,
)
from knowmesh_mcp.store.tables import CopiedTable

CANDIDATE_CACHE = 8192  # node versions whose candidate text is kept across queries (a few MB)


def store_dir() -> Path:
    """The `store/` folder of SQL and data: inside the wheel as `knowmesh_mcp/_store`, beside the
    package in a checkout."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_store"
    return packaged if packaged.is_dir() else package.parent / "store"


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Migration(NamedTuple):
    """One NNNN_name.sql file of a backend's migrations."""

    number: int  # the schema version it makes
    name: str
    sql: str


def read_migrations(folder: Path) -> list[Migration]:
    """Every NNNN_name.sql file in `folder`, in order."""
    found = []
    for path in sorted(folder.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        number, _, name = path.stem.partition("_")
        found.append(Migration(int(number), name, path.read_text(encoding="utf-8")))
    return found


MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""


NODE_COLUMNS = """n.pk, n.id, n.ecosystem, n.status, n.title, n.current_version, n.current_revision,
    n.has_answer, n.created_at, n.updated_at, v.document, v.solution_revisions"""


def node_row(row: Sequence[Any]) -> NodeRow:
    return NodeRow(
        pk=row[0],
        id=row[1],
        ecosystem=row[2],
        status=row[3],
        title=row[4],
        version=row[5],
        revision=row[6],
        has_answer=bool(row[7]),
        created_at=row[8],
        updated_at=row[9],
        document=json.loads(row[10]),
        solution_revisions=json.loads(row[11]),
        document_size=len(row[10]),
    )


STATS_COLUMNS = """solution_id, solution_revision, cluster, solved, failed, sample_size, success_score,
    failure_state, answer_state, solved_agents, failed_agents, last_verified"""


CANDIDATE_COLUMNS = (
    "i.node_pk, n.id, n.ecosystem, i.title_terms, s.signature, s.article, i.templates, "
    "i.template_terms, i.slug_terms, i.value_terms, i.value_shapes"
)


# Feedback as it travels between meshes: everything but the local id and the address hash.
FEEDBACK_COLUMNS = (
    "node_id",
    "node_version",
    "solution_id",
    "solution_revision",
    "outcome",
    "cluster",
    "environment",
    "agent_id",
    "model",
    "reason",
    "note",
    "evidence_hash",
    "exit_code",
    "created_at",
    "proof",
)


REVISION_COLUMNS = """revision_id, node_id, revision, parent_revision, kind, version, agent_id, model, summary,
    changes, reverts_revision_id, created_at, agent_proof"""


def revision_row(row: Sequence[Any]) -> RevisionRow:
    return RevisionRow(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        row[5],
        row[6],
        row[7],
        row[8],
        json.loads(row[9]),
        row[10],
        row[11],
        row[12],
    )


# (revision, document, solution revisions) rows of a node's revisions after a number, oldest first;
# `{mark}` is the backend's placeholder (`.format(mark=...)`).
REVISIONS_WITH_DOCUMENTS = f"""SELECT {", ".join("r." + c.strip() for c in REVISION_COLUMNS.split(","))},
        v.document, v.solution_revisions
    FROM article_revisions r JOIN node_versions v ON v.version = r.version
    WHERE r.node_id = {{mark}} AND r.revision > {{mark}} ORDER BY r.revision"""


def review_rows(rows: Iterable[Sequence[Any]]) -> list[ReviewRow]:
    """A review query's rows (node id, title, current revision, solution id, solution revision, cluster, reports), named."""
    return [ReviewRow(*row) for row in rows]


def revision_with_document(row: Sequence[Any]) -> RevisionWithDocument:
    return RevisionWithDocument(revision_row(row[:13]), json.loads(row[13]), json.loads(row[14]))


# -- copying a whole mesh (`services.copying`): whole rows of the allow-listed `tables.COPIED_TABLES` -------
# Table and column names come from that constant only; values are bound parameters.


def copy_select(
    table: CopiedTable, after: Sequence[Any] | None, until: Sequence[Any] | None, keys: str, mark: str
) -> tuple[str, list[Any]]:
    """SELECT of `table`'s rows with (`keys`) > `after` and <= `until`, in key order; LIMIT is the last parameter."""
    marks = ", ".join([mark] * len(table.key))
    where, params = [], []
    if after is not None:
        where.append(f"({keys}) > ({marks})")
        params += list(after)
    if until is not None:
        where.append(f"({keys}) <= ({marks})")
        params += list(until)
    sql = (
        f"SELECT {', '.join(table.columns)} FROM {table.name}"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + f" ORDER BY {keys} LIMIT {mark}"
    )
    return sql, params


def copy_update(table: CopiedTable, rows: Sequence[Sequence[Any]], mark: str) -> tuple[str, list[list[Any]]]:
    """UPDATE of `table`'s mutable columns by key, and the parameters of each whole row."""
    if not table.mutable:
        raise ValueError(f"{table.name} rows never change")
    position = {column: index for index, column in enumerate(table.columns)}
    sql = (
        f"UPDATE {table.name} SET {', '.join(f'{c} = {mark}' for c in table.mutable)} "
        f"WHERE {' AND '.join(f'{k} = {mark}' for k in table.key)}"
    )
    return sql, [[row[position[c]] for c in (*table.mutable, *table.key)] for row in rows]


# -- the Python both backends run around their own SQL -----------------------------------------


def listing_conditions(
    ecosystem: str | None, after_id: str | None, *, mark: str, node_id: str
) -> tuple[str, list[Any]]:
    """The WHERE of a list of published nodes, and its parameters: only the conditions asked for.

    `(? IS NULL OR n.ecosystem = ?)` made SQLite walk every node in id order (60,000 of 100,000
    before the first python one) instead of one ecosystem's range of its index. `mark` is the
    backend's placeholder, `node_id` how it orders ids."""
    where = ["n.status != 'deprecated'"]
    params: list[Any] = []
    if ecosystem is not None:
        where.append(f"n.ecosystem = {mark}")
        params.append(ecosystem)
    if after_id is not None:
        where.append(f"{node_id} > {mark}")
        params.append(after_id)
    return " AND ".join(where), params


def fold_channel_rows(rows: Iterable[Sequence[Any]], signature_limit: int) -> list[ChannelMatch]:
    """(channel, pk, matched hash or None, version) rows, in the backend's order, as
    `channel_matches` returns them: the first `signature_limit` distinct signature nodes (a match
    for each hash of theirs that matched: a node's template and its exact key both can), then every
    other channel's nodes once."""
    signature: dict[int, tuple[dict[str, None], str]] = {}
    others: dict[tuple[str, int], str] = {}
    for channel, pk, hashed, version in rows:
        if channel == "signature":
            if pk in signature:
                signature[pk][0][hashed] = None
            elif len(signature) < signature_limit:
                signature[pk] = ({hashed: None}, version)
        else:
            others[(channel, pk)] = version
    return [
        ChannelMatch("signature", pk, hashed, version)
        for pk, (hashes, version) in signature.items()
        for hashed in sorted(hashes)
    ] + [ChannelMatch(channel, pk, None, version) for (channel, pk), version in others.items()]


class DuplicateLookup:
    """`duplicate_of`, one key of a writer's `duplicates_of` (each backend has its own SQL for that)."""

    duplicates_of: Callable[[Iterable[tuple[str, Sequence[str]]]], Awaitable[dict[tuple[str, tuple[str, ...]], str]]]

    async def duplicate_of(self, signature_hash: str, quoted: list[str]) -> str | None:
        """The node whose normalized signature and quoted values both match, if any."""
        return (await self.duplicates_of([(signature_hash, quoted)])).get((signature_hash, tuple(quoted)))


Fetch = Callable[[list[int]], Awaitable[Iterable[tuple[str, CandidateText]]]]


class CandidateTexts:
    """Candidate texts by node pk, each kept with the node version it was read at.

    A node's text changes only with its version, so a kept text is never stale, on any number of
    servers; the least recently used go first past `size`."""

    def __init__(self, size: int = CANDIDATE_CACHE):
        self.size = size
        self._kept: OrderedDict[int, tuple[str, CandidateText]] = OrderedDict()

    async def texts(self, versions: dict[int, str], fetch: Fetch) -> list[CandidateText]:
        """The text of each node of `versions` ({pk: current version}), in that order; `fetch(pks)`
        reads the missing ones as (version, text) pairs."""
        missing = [pk for pk, version in versions.items() if self._kept.get(pk, (None,))[0] != version]
        if missing:
            for version, text in await fetch(missing):
                self._kept[text.pk] = (version, text)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        found = []
        for pk, version in versions.items():
            entry = self._kept.get(pk)
            if entry is not None and entry[0] == version:
                self._kept.move_to_end(pk)
                found.append(entry[1])
        return found


def _fold(text: str) -> str:
    """Lowercase character by character, keeping the length (FTS5's trigram tokenizer folds so)."""
    if text.isascii():
        return text.lower()  # ASCII lowercasing never changes a length
    return "".join(low if len(low := c.lower()) == 1 else c for c in text)


def gram_terms(grams: str) -> set[str]:
    """The distinct trigrams FTS5's trigram tokenizer indexes for `grams` (what fts5vocab counts)."""
    text = _fold(grams)
    return {text[i : i + 3] for i in range(len(text) - 2)}


CountedKeys = dict[str, set[str]]  # term_counts kind -> the terms a node is counted under


def counted_keys(title: str, signature: str, article: str, grams: str) -> CountedKeys:
    """The terms `term_counts` counts a node under, by kind: 'term' for each distinct key of its
    title, signature and article (what fts5vocab over node_search counts: `analysis` makes every key
    one unicode61 token), 'head' for those of title and signature (node_heads), 'gram' for each
    trigram of its templates (node_grams)."""
    heads = {*title.split(), *signature.split()}
    return {"term": heads.union(article.split()), "head": heads, "gram": gram_terms(grams)}


def row_keys(row: SearchRow) -> CountedKeys:
    return counted_keys(row.title, row.signature, row.article, row.grams)


def term_count_delta(removed: Iterable[CountedKeys], added: Iterable[CountedKeys]) -> Counter[tuple[str, str]]:
    """How each (kind, term) count moves when index rows with `removed` keys give way to rows with `added` keys."""
    by_kind: dict[str, Counter[str]] = {}
    for keys in removed:
        for kind, terms in keys.items():
            by_kind.setdefault(kind, Counter()).subtract(terms)
    for keys in added:
        for kind, terms in keys.items():
            by_kind.setdefault(kind, Counter()).update(terms)  # counting a set runs in C
    return Counter({(kind, term): n for kind, counts in by_kind.items() for term, n in counts.items() if n})
