"""The search index on PostgreSQL: signature hashes, the term channels (weighted tsvectors, trigram sets), candidate texts and document frequencies.

`SearchReads` is mixed into `store.PostgresStore` (reads: `self._fetchall(sql, params)`, outside any
transaction), `SearchWrites` into `writer.PostgresWriter` (one write transaction:
`self._all(sql, params)` and `self.connection`, a psycopg AsyncConnection). Same signatures and
results as `SqliteStore` / `SqliteWriter` (see `interface`); values are bound `%s` parameters.

How FTS5 maps onto PostgreSQL here:

- **Term queries.** Each of our terms reaches the database only as a bound parameter of
  `phraseto_tsquery('simple', %s)`, which runs it through the text *parser* (as `to_tsvector` does
  for the indexed text), never the tsquery parser: `'`, `&`, `|`, `!`, `:*`, `(`, `\\` are
  separators there, not operators, so a term cannot add an operator, a negation, a prefix match or
  a weight label (FTS5's `"..."` quoting does the same in SQLite). The per-term queries are joined
  by `||` (any) in SQL text made only of our constants; "every" is one `terms @@ q` conjunct per
  term, so a term without any token matches nothing, as an empty FTS5 phrase in an AND does.
- **Ranking.** Each term's `ts_rank` over the weighted vectors (A title 1.0, B signature 0.5,
  C article 0.1, normalized by document length), times the term's bm25 idf (`TermQuery.weights`,
  from the document frequencies the search already read), summed: FTS5's bm25(10, 5, 1) in spirit, not in value. Unranked
  queries return the lowest `node_pk`s, as an unranked FTS5 query returns the lowest rowids.
- **Trigrams.** FTS5's trigram table matches rows whose case-folded templates contain a trigram;
  here each node's distinct template trigrams are a `text[]` (`node_grams.grams`, GIN-indexed),
  matched with `&&` (any) or `@>` (all) against an array parameter of our grams, so a gram is only
  ever a literal value; ranked by the idf of the grams matched. (pg_trgm indexes word trigrams,
  which are not FTS5's: see migration 0004.)
- **Document frequencies** live in `term_counts` (as in SQLite), kept by `write_search_rows` in
  the indexing transaction from the keys `common.counted_keys` gives (what fts5vocab counts in
  SQLite). They are read from the table on every call (primary-key probes), never cached in the
  process: several servers share the database, and a count cached by one would miss another's writes.
- **Candidate texts** are cached per node version (bounded LRU, as in SQLite): a node's indexed
  text changes only with its version, so a kept text is right on every server.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from knowmesh_mcp.core.rows import CandidateText, ChannelMatch, Frequencies, SearchRow, TermQuery
from knowmesh_mcp.store.common import (
    CANDIDATE_COLUMNS,
    CandidateTexts,
    DuplicateLookup,
    counted_keys,
    fold_channel_rows,
    row_keys,
    term_count_delta,
)

# ts_rank's weights, in its {D, C, B, A} order: article (C) 0.1, signature (B) 0.5, title (A) 1.0.
RANK_WEIGHTS = "'{0, 0.1, 0.5, 1.0}'::float4[]"
TERM_TABLES = {"search": "node_search", "heads": "node_heads"}
# The GIN indexes of the search tables: kept up row by row they are most of what an import costs
# the server; built once after it, a fraction (docs/decisions.md, "PostgreSQL throughput and latency").
DEFERRED_INDEXES = ("node_search_terms", "node_heads_terms", "node_grams_sets")
DEFERRED_KEY = "deferred_index:"  # meta key prefix: the definition of an index a bulk import dropped
PHRASE = "phraseto_tsquery('simple', %s)"


def array_literal(items: Sequence[Any]) -> str:
    """A text[] (or bigint[]) literal of `items`, every element quoted: COPY then escapes it as any
    text, and a query parameter passes it whole. (psycopg dumping a list of ~80 trigrams costs
    70 µs a row in COPY; this, which escapes only when an element needs it, a few.)"""
    if not items:
        return "{}"
    joined = '","'.join(map(str, items))
    # the separators hold 2 (n - 1) quotes: any more, or a backslash, is in an element
    if "\\" in joined or joined.count('"') != 2 * (len(items) - 1):
        joined = '","'.join(str(item).replace("\\", "\\\\").replace('"', '\\"') for item in items)
    return '{"' + joined + '"}'


def _count_columns(keys: Sequence[tuple[str, str]], delta: Counter[tuple[str, str]]) -> list[str]:
    """The kind, term and count columns of `keys` as array literals, for unnest (psycopg would
    dump each list element by element in Python)."""
    return [
        array_literal([kind for kind, _ in keys]),
        array_literal([term for _, term in keys]),
        array_literal([delta[key] for key in keys]),
    ]


def _term_channel(query: TermQuery) -> tuple[str, list[Any]]:
    """The subquery (node_pk, rank) of one term channel and its parameters, in text order.

    A ranked channel sums each term's (or trigram's) match weighted by its idf (`query.weights`),
    as bm25 does: `ts_rank` alone weighs a common term like a rare one, and kept other rows than FTS5."""
    terms = list(query.terms)
    rarity = dict(zip(terms, query.weights))
    if query.table == "grams":
        # Exact trigram sets (`grams`, GIN): `&&` any, `@>` all; FTS5's trigram table matches nothing
        # for a string under three characters.
        grams = [term for term in terms if len(term) >= 3]
        if not grams:
            return "SELECT g.node_pk, 0 AS rank FROM node_grams g WHERE FALSE", []
        where = "g.grams @> %s::text[]" if query.every else "g.grams && %s::text[]"
        if query.ranked:
            return (
                "SELECT g.node_pk, (SELECT sum(q.weight) FROM unnest(%s::text[], %s::float8[]) AS q (gram, weight) "
                f"WHERE q.gram = ANY (g.grams)) AS rank FROM node_grams g WHERE {where} "
                "ORDER BY rank DESC, g.node_pk LIMIT %s",
                [grams, [rarity.get(gram, 1.0) for gram in grams], grams, query.limit],
            )
        return _lowest_pks(query, "node_grams", "g", "grams", where, [grams])
    table = TERM_TABLES[query.table]
    if query.every:
        where = " AND ".join(f"t.terms @@ {PHRASE}" for _ in terms)
    else:
        where = f"t.terms @@ ({' || '.join(PHRASE for _ in terms)})"
    if query.ranked:
        rank = " + ".join(f"%s * ts_rank({RANK_WEIGHTS}, t.terms, {PHRASE}, 1)" for _ in terms)
        weighted = [value for term in terms for value in (rarity.get(term, 1.0), term)]
        ranked = f"SELECT t.node_pk, {rank} AS rank FROM {table} t WHERE {where} ORDER BY rank DESC, t.node_pk LIMIT %s"
        if query.per_family:  # as SQLite: of the best `pool`, at most `per_family` of one template family
            return (
                "SELECT node_pk, rank FROM (SELECT c.node_pk, c.rank, row_number() OVER "
                "(PARTITION BY i.templates ORDER BY c.rank DESC, c.node_pk) AS family_rank "
                f"FROM ({ranked}) AS c JOIN node_index i ON i.node_pk = c.node_pk) AS f "
                "WHERE family_rank <= %s ORDER BY rank DESC, node_pk LIMIT %s",
                [*weighted, *terms, query.pool, query.per_family, query.limit],
            )
        return ranked, [*weighted, *terms, query.limit]
    return _lowest_pks(query, table, "t", "terms", where, terms)


WALK_ROWS = 3000  # a walk of the primary key may always read this many rows ...
# ... or as many as the rarest term has matches: the index would visit each of those, at random pages
# of `node_search`, where the walk reads the table in order (at 1,000,000 nodes a term in 16,000
# nodes cost 164 ms through the index, 15,504 pages for its lowest 20; a walk found them in 1.4 ms).
WALK_SPAN = 3  # a walk is taken when three times the rows expected to hold `limit` matches fit in that
WALK_REACH = 10  # ... and reads up to ten times them: the oldest nodes may hold fewer matches than most


def _lowest_pks(
    query: TermQuery, table: str, alias: str, column: str, where: str, values: list[Any]
) -> tuple[str, list[Any]]:
    """The lowest `limit` node_pks matching `where`, as an unranked FTS5 query returns the lowest rowids.

    Rare terms (few matches) are read by the GIN index; `node_pk + 0` keeps the planner off the
    primary key's order, which it took for a LIMIT and then filtered 300,000 rows to find 7 (279 ms
    instead of 1 ms). Dense matches are the opposite: a bitmap visits every matching row (an AND of
    two common trigrams, 10,049 rows: 50 ms at 300,000 nodes) where a walk of the primary key finds
    `limit` of them in a few hundred. So when the rarest term is dense enough, a bounded walk goes
    first and the index answers only if the walk found fewer than `limit`: the rows are the same
    either way.
    """
    indexed = (
        f"SELECT {alias}.node_pk, 0 AS rank FROM {table} {alias} WHERE {where} ORDER BY {alias}.node_pk + 0 LIMIT %s"
    )
    cap = max(WALK_ROWS, query.matches)
    need = query.limit / query.density if query.density > 0 else math.inf  # rows that hold `limit` matches
    if WALK_SPAN * need > cap:
        return indexed, [*values, query.limit]
    span = min(cap, math.ceil(WALK_REACH * need))
    walked = (
        f"SELECT {alias}.node_pk FROM (SELECT node_pk, {column} FROM {table} ORDER BY node_pk LIMIT {span}) "
        f"AS {alias} WHERE {where} ORDER BY {alias}.node_pk LIMIT %s"
    )
    return (
        f"WITH walked AS MATERIALIZED ({walked}) "
        "SELECT node_pk, 0 AS rank FROM walked WHERE (SELECT count(*) FROM walked) = %s "
        f"UNION ALL (SELECT * FROM ({indexed}) AS i WHERE (SELECT count(*) FROM walked) < %s)",
        [*values, query.limit, query.limit, *values, query.limit, query.limit],
    )


class SearchReads:
    _fetchall: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # PostgresStore's
    _candidate_texts: CandidateTexts  # made by PostgresStore

    # -- search channels: each bounded, all read in one statement; ranking happens in `ranking`

    async def channel_matches(
        self,
        hashes: Sequence[str],
        quoted: Sequence[str],
        signature_limit: int,
        queries: Sequence[TermQuery],
        family_limit: int = 0,
    ) -> list[ChannelMatch]:
        """The matches of every channel, in one round trip.

        As SQLite's: the signature channel reads the nodes with the query's quoted values, then
        generic ones, then the rest, `2 * signature_limit` rows at most; every term channel is
        bounded by its limit. Rows come back in each part's order (`part`, `ord`), so the first
        `signature_limit` distinct signature nodes are the ones SQLite keeps.
        """
        parts: list[str] = []
        params: list[Any] = []
        if hashes:
            hashes = list(dict.fromkeys(hashes))  # one index range per hash, as `IN` reads each once
            # Per hash, each arm reads its rows in node order up to the limit (an index range each).
            arm = """SELECT %s AS arm, h.hash, s.node_pk, s.source FROM unnest(%s::text[]) AS h (hash)
                     CROSS JOIN LATERAL (SELECT node_pk, source FROM node_signatures
                                         WHERE hash = h.hash AND {} ORDER BY node_pk, source LIMIT %s) AS s"""
            parts.append(f"""SELECT 0 AS part, row_number() OVER (ORDER BY arm, hash COLLATE "C", node_pk, source) AS ord,
                      'signature'::text AS channel, node_pk, hash FROM
                  (SELECT * FROM ({arm.format("quoted_values = %s")} UNION ALL {arm.format("specific = 0")}
                                  UNION ALL {arm.format("specific = 1")}) AS arms
                   ORDER BY arm, hash COLLATE "C", node_pk, source LIMIT %s) AS s""")
            limit = 2 * signature_limit
            params += [
                1,
                hashes,
                json.dumps(list(quoted), ensure_ascii=False),
                limit,
                2,
                hashes,
                limit,
                3,
                hashes,
                limit,
                limit,
            ]
        for number, query in enumerate(queries, start=1):
            if query.terms:
                sql, values = _term_channel(query)
                parts.append(
                    f"SELECT {number} AS part, row_number() OVER (ORDER BY rank DESC, node_pk) AS ord, "
                    f"%s::text AS channel, node_pk, NULL::text AS hash FROM ({sql}) AS c{number}"
                )
                params += [query.channel, *values]
        if not parts:
            return []
        found = " UNION ALL ".join(f"({part})" for part in parts)
        if (
            family_limit
        ):  # as SQLite: the generic nodes sharing a signature hash with a specific node a term channel found
            found = f"""WITH found AS MATERIALIZED ({found})
                SELECT * FROM found UNION ALL
                SELECT {len(queries) + 1} AS part, row_number() OVER (ORDER BY node_pk) AS ord, 'family'::text AS channel,
                       node_pk, NULL::text AS hash FROM
                  (SELECT DISTINCT node_pk FROM
                     (SELECT (SELECT g.node_pk FROM node_signatures g WHERE g.hash = h.hash AND g.specific = 0
                              ORDER BY g.node_pk LIMIT 1) AS node_pk
                      FROM (SELECT DISTINCT s.hash FROM found f JOIN node_signatures s ON s.node_pk = f.node_pk
                            WHERE f.channel <> 'signature' AND s.specific = 1) AS h) AS generic
                   WHERE node_pk IS NOT NULL ORDER BY node_pk LIMIT %s) AS family"""
            params.append(family_limit)
        rows = await self._fetchall(
            f"SELECT m.channel, m.node_pk, m.hash, n.current_version FROM ({found}) AS m JOIN nodes n ON n.pk = m.node_pk "
            "ORDER BY m.part, m.ord",
            params,
        )
        return fold_channel_rows(rows, signature_limit)

    async def candidate_texts(self, versions: dict[int, str]) -> list[CandidateText]:
        """The indexed text of each node of `versions` ({pk: current version}), in that order (kept per version)."""

        async def fetch(missing: list[int]) -> list[tuple[str, CandidateText]]:
            rows = await self._fetchall(
                f"""SELECT {CANDIDATE_COLUMNS}, n.current_version FROM node_index i JOIN nodes n ON n.pk = i.node_pk
                    JOIN node_search s ON s.node_pk = i.node_pk WHERE i.node_pk = ANY (%s::bigint[])""",
                [missing],
            )
            return [(row[-1], CandidateText(*row[:-1])) for row in rows]

        return await self._candidate_texts.texts(versions, fetch)

    async def document_frequencies(
        self, terms: Sequence[str], grams: Sequence[str] = (), heads: Sequence[str] = ()
    ) -> Frequencies:
        """How many nodes hold each term (in any field), each template trigram of `grams` and each
        term of `heads` in title or signature (absent ones are left out), and `indexed_node_count`.

        Read from `term_counts` on every call, in one statement with the node count (primary-key
        probes; nothing cached in the process, so every server of a mesh sees every write at once).
        """
        asked = {
            kind: list(dict.fromkeys(chosen)) for kind, chosen in (("term", terms), ("gram", grams), ("head", heads))
        }
        rows = await self._fetchall(
            """SELECT kind, term, doc FROM term_counts WHERE kind = 'term' AND term = ANY (%s::text[])
               UNION ALL
               SELECT kind, term, doc FROM term_counts WHERE kind = 'gram' AND term = ANY (%s::text[])
               UNION ALL
               SELECT kind, term, doc FROM term_counts WHERE kind = 'head' AND term = ANY (%s::text[])
               UNION ALL
               SELECT 'nodes', '', coalesce(max(pk), 0) FROM nodes""",
            list(asked.values()),
        )
        counted = {(kind, term): int(doc) for kind, term, doc in rows}
        held_terms, held_grams, held_heads = (
            {term: n for term in chosen if (n := counted.get((kind, term), 0))} for kind, chosen in asked.items()
        )
        return Frequencies(held_terms, held_grams, held_heads, nodes=counted[("nodes", "")])

    async def indexed_node_count(self) -> int:
        """The number of nodes BM25's document frequencies are relative to: the highest node pk, as
        in SQLite (one probe of the primary key; read on every call, not cached)."""
        rows = await self._fetchall("SELECT coalesce(max(pk), 0) FROM nodes")
        return int(rows[0][0])


class SearchWrites(DuplicateLookup):
    connection: Any

    _all: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # PostgresWriter's
    _copy: Callable[[str, str, Iterable[Sequence[Any]]], Awaitable[None]]  # PostgresWriter's

    if TYPE_CHECKING:  # evidence.EvidenceWrites'

        async def set_meta(self, key: str, value: str) -> None: ...

    async def duplicates_of(self, keys: Iterable[tuple[str, Sequence[str]]]) -> dict[tuple[str, tuple[str, ...]], str]:
        wanted = list(dict.fromkeys((digest, tuple(values)) for digest, values in keys))
        if not wanted:
            return {}
        quoted = [json.dumps(list(values), ensure_ascii=False) for _, values in wanted]
        rows = await self._all(  # md5(...) = md5(...) is what the index nodes_by_duplicate_key serves
            """SELECT k.ord, (SELECT min(n.id COLLATE "C") FROM nodes n
                              WHERE n.signature_hash = k.hash AND md5(n.quoted_values) = md5(k.quoted)
                                AND n.quoted_values = k.quoted)
               FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS k (hash, quoted, ord)""",
            [[digest for digest, _ in wanted], quoted],
        )
        return {wanted[int(ordinal) - 1]: node_id for ordinal, node_id in rows if node_id is not None}

    async def set_signature_hashes(self, hashes: Iterable[tuple[str, str]]) -> None:
        """(signature_hash, node_id) pairs, for recomputing derived hashes after a normalizer change."""
        pairs = list(hashes)
        if pairs:
            async with self.connection.cursor() as cursor:
                await cursor.executemany("UPDATE nodes SET signature_hash = %s WHERE id = %s", pairs)

    async def write_search_rows(self, rows: Sequence[tuple[str, SearchRow]], *, fresh: bool = False) -> None:
        """(Re)write the index rows of existing nodes; `fresh` nodes have none to remove first.

        `term_counts` moves with them: the old row's keys (`common.counted_keys`) are counted down,
        the new row's up, in this transaction.
        """
        if not rows:
            return
        ids = [node_id for node_id, _ in rows]
        found = await self._all("SELECT id, pk FROM nodes WHERE id = ANY (%s::text[])", [ids])
        pks = {node_id: int(pk) for node_id, pk in found}
        keys = [pks[node_id] for node_id in ids]  # KeyError for a node that does not exist, as in SQLite
        removed = []
        if not fresh:
            removed = [
                counted_keys(*row)
                for row in await self._all(
                    """SELECT s.title, s.signature, s.article, g.templates FROM node_search s
                   JOIN node_grams g ON g.node_pk = s.node_pk WHERE s.node_pk = ANY (%s::bigint[])""",
                    [keys],
                )
            ]
            for table in ("node_search", "node_heads", "node_grams", "node_signatures", "node_index"):
                await self._all(f"DELETE FROM {table} WHERE node_pk = ANY (%s::bigint[])", [keys])
        searched = [row for _, row in rows]
        added = [row_keys(row) for row in searched]
        delta = term_count_delta(removed, added)
        await self._copy(
            "node_search",
            "node_pk, title, signature, article",
            ((pk, r.title, r.signature, r.article) for pk, r in zip(keys, searched)),
        )
        await self._copy(
            "node_heads", "node_pk, title, signature", ((pk, r.title, r.signature) for pk, r in zip(keys, searched))
        )
        await self._copy(
            "node_grams",
            "node_pk, templates, grams",
            ((pk, r.grams, array_literal(sorted(counted["gram"]))) for pk, r, counted in zip(keys, searched, added)),
        )
        signatures = [
            (digest, source, int(r.specific), pk)
            for pk, r in zip(keys, searched)
            for digest, source in r.signature_hashes
        ]
        if signatures:
            await self._all(
                """INSERT INTO node_signatures (hash, node_pk, source, quoted_values, specific)
                   SELECT d.hash, n.pk, d.source, n.quoted_values, d.specific
                   FROM unnest(%s::text[], %s::text[], %s::smallint[], %s::bigint[]) AS d (hash, source, specific, pk)
                   JOIN nodes n ON n.pk = d.pk
                   ON CONFLICT DO NOTHING""",
                [list(column) for column in zip(*signatures)],
            )
        await self._copy(
            "node_index",
            "node_pk, templates, title_terms, template_terms, slug_terms, value_terms, value_shapes",
            (
                (pk, r.template, r.title, r.template_terms, r.slug_terms, r.value_terms, r.value_shapes)
                for pk, r in zip(keys, searched)
            ),
        )
        await self._count_terms(delta)

    async def _count_terms(self, delta: Counter[tuple[str, str]]) -> None:
        """Apply document-frequency changes to term_counts; counts that reach 0 are removed."""
        up = sorted(key for key, n in delta.items() if n > 0)
        down = sorted(key for key, n in delta.items() if n < 0)
        if up:
            await self._all(
                """INSERT INTO term_counts (kind, term, doc)
                   SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[])
                   ON CONFLICT (kind, term) DO UPDATE SET doc = term_counts.doc + EXCLUDED.doc""",
                _count_columns(up, delta),
            )
        if down:
            kinds, terms, counts = _count_columns(down, delta)
            await self._all(
                """UPDATE term_counts c SET doc = greatest(c.doc + d.n, 0)
                   FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS d (kind, term, n)
                   WHERE c.kind = d.kind AND c.term = d.term""",
                [kinds, terms, counts],
            )
            await self._all(
                """DELETE FROM term_counts c USING unnest(%s::text[], %s::text[]) AS d (kind, term)
                   WHERE c.kind = d.kind AND c.term = d.term AND c.doc = 0""",
                [kinds, terms],
            )

    async def _defer_search_indexes(self, below: int) -> None:
        """Drop the DEFERRED_INDEXES when the mesh holds fewer than `below` nodes, keeping each
        definition (as PostgreSQL gives it) in `meta` in this same transaction."""
        if (await self._all("SELECT count(*) FROM nodes"))[0][0] >= below:
            return
        for name, definition in (await self._search_index_definitions()).items():
            await self.set_meta(DEFERRED_KEY + name, definition)
            await self._all(f'DROP INDEX "{name}"')  # one of DEFERRED_INDEXES, never input

    async def _restore_search_indexes(self) -> None:
        """Build every index `_defer_search_indexes` dropped and no one has built since."""
        present = await self._search_index_definitions()
        for key, definition in await self._all(
            "DELETE FROM meta WHERE key LIKE %s RETURNING key, value", (DEFERRED_KEY + "%",)
        ):
            name = key.removeprefix(DEFERRED_KEY)
            if name in DEFERRED_INDEXES and name not in present:  # the definition PostgreSQL wrote, ours
                await self._all(definition)

    async def _search_index_definitions(self) -> dict[str, str]:
        """{name: definition} of the DEFERRED_INDEXES the database holds now."""
        return dict(
            await self._all(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND indexname = ANY(%s)",
                (list(DEFERRED_INDEXES),),
            )
        )
