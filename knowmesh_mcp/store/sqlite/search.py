"""The search index on SQLite: FTS5 tables (node_search, node_heads, node_grams), signature hashes,
the term channels, candidate texts and document frequencies (`term_counts`).

`SearchReads` is mixed into `store.SqliteStore`, `SearchWrites` into `writer.SqliteWriter` (see
`nodes`). Every term reaches FTS5's MATCH quoted (`fts_quote`), never as query syntax.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, NamedTuple

import aiosqlite

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

# FTS5 table and ranking of each TermQuery.table: title and signature weigh more than the article.
TERM_TABLES = {
    "search": ("node_search", "bm25(node_search, 10.0, 5.0, 1.0)"),
    "heads": ("node_heads", "bm25(node_heads, 2.0, 1.0)"),
    "grams": ("node_grams", "bm25(node_grams)"),
}


def fts_quote(term: str) -> str:
    """One FTS5 string: node text and queries never reach MATCH as syntax."""
    return '"' + term.replace('"', '""') + '"'


def fts_any(terms: Sequence[str]) -> str:
    return " OR ".join(map(fts_quote, terms))


def fts_every(terms: Sequence[str]) -> str:
    return " AND ".join(map(fts_quote, terms))


class Counted(NamedTuple):
    """What `SearchReads._counted` reads in one statement: one snapshot of the database."""

    version: int  # the reader's `PRAGMA data_version`
    nodes: int  # the highest node pk (BM25's N)
    counts: dict[tuple[str, str], int]  # {(kind, term): nodes holding it} of the keys asked


class SearchReads:
    _fetchall: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # SqliteStore's
    write_generation: int  # SqliteStore's: bumped by every write transaction
    _frequencies: tuple[tuple[int, int], dict[tuple[str, str], int]]  # SqliteStore's: see document_frequencies
    _candidate_texts: CandidateTexts  # made by SqliteStore

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

        `signature`: nodes indexed under any of `hashes`. A common error shape (`No module named
        '<*>'`) can match thousands of nodes; only the first `signature_limit` are read: those with
        the query's quoted values, then generic nodes (whose values are examples), then the rest.
        The term channels are FTS5 queries over quoted terms only (see `TermQuery`).
        """
        parts: list[str] = []
        params: list[Any] = []
        if hashes:
            marks = ",".join("?" * len(hashes))
            # UNION ALL keeps its arms' order and the inner LIMIT stops the scan early.
            parts.append(f"""SELECT 'signature' AS channel, node_pk, hash FROM
                  (SELECT node_pk, hash FROM node_signatures WHERE hash IN ({marks}) AND quoted_values = ?
                   UNION ALL
                   SELECT node_pk, hash FROM node_signatures WHERE hash IN ({marks}) AND specific = 0
                   UNION ALL
                   SELECT node_pk, hash FROM node_signatures WHERE hash IN ({marks}) AND specific = 1
                   LIMIT ?)""")
            params += [*hashes, json.dumps(list(quoted), ensure_ascii=False), *hashes, *hashes, 2 * signature_limit]
        for query in queries:
            if query.terms:
                table, rank = TERM_TABLES[query.table]
                match = fts_every(query.terms) if query.every else fts_any(query.terms)
                if query.ranked and query.per_family:
                    parts.append(f"""SELECT '{query.channel}' AS channel, node_pk, NULL AS hash FROM
                          (SELECT node_pk FROM
                             (SELECT m.rowid AS node_pk, m.r,
                                     row_number() OVER (PARTITION BY i.templates ORDER BY m.r, m.rowid) AS family_rank
                              FROM (SELECT rowid, {rank} AS r FROM {table} WHERE {table} MATCH ? ORDER BY r LIMIT ?) AS m
                              JOIN node_index i ON i.node_pk = m.rowid)
                           WHERE family_rank <= ? ORDER BY r, node_pk LIMIT ?)""")
                    params += [match, query.pool, query.per_family, query.limit]
                    continue
                order = f"ORDER BY {rank} " if query.ranked else ""
                parts.append(
                    f"SELECT '{query.channel}' AS channel, rowid AS node_pk, NULL AS hash FROM "
                    f"(SELECT rowid FROM {table} WHERE {table} MATCH ? {order}LIMIT ?)"
                )
                params += [match, query.limit]
        if not parts:
            return []
        found = " UNION ALL ".join(parts)
        if family_limit:
            # Each specific node a term channel found brings the generic node of its family: of each of
            # its signature hashes, the generic node with the lowest pk (the index reads one row a hash).
            # CROSS JOIN keeps `found` outer: else SQLite scans every signature row for the join.
            found = f"""WITH found AS MATERIALIZED ({found})
                SELECT * FROM found UNION ALL
                SELECT 'family', node_pk, NULL FROM
                  (SELECT DISTINCT node_pk FROM
                     (SELECT (SELECT g.node_pk FROM node_signatures g WHERE g.hash = h.hash AND g.specific = 0
                              ORDER BY g.node_pk LIMIT 1) AS node_pk
                      FROM (SELECT DISTINCT s.hash FROM found f CROSS JOIN node_signatures s ON s.node_pk = f.node_pk
                            WHERE f.channel != 'signature' AND s.specific = 1) AS h) AS generic
                   WHERE node_pk IS NOT NULL ORDER BY node_pk LIMIT ?)"""
            params.append(family_limit)
        rows = await self._fetchall(
            "SELECT m.*, n.current_version FROM (" + found + ") AS m JOIN nodes n ON n.pk = m.node_pk", params
        )
        return fold_channel_rows(rows, signature_limit)

    async def candidate_texts(self, versions: dict[int, str]) -> list[CandidateText]:
        """The indexed text of each node of `versions` ({pk: current version}), in that order (kept per version)."""

        async def fetch(missing: list[int]) -> list[tuple[str, CandidateText]]:
            rows = await self._fetchall(
                f"""SELECT {CANDIDATE_COLUMNS}, n.current_version FROM node_index i JOIN nodes n ON n.pk = i.node_pk
                    JOIN node_search s ON s.rowid = i.node_pk WHERE i.node_pk IN ({",".join("?" * len(missing))})""",
                missing,
            )
            return [(row[-1], CandidateText(*row[:-1])) for row in rows]

        return await self._candidate_texts.texts(versions, fetch)

    async def document_frequencies(
        self, terms: Sequence[str], grams: Sequence[str] = (), heads: Sequence[str] = ()
    ) -> Frequencies:
        """How many nodes hold each term (in any field), each template trigram of `grams` and each term
        of `heads` in title or signature (absent ones are left out), and `indexed_node_count`.

        Read from `term_counts` (primary-key probes) with the node count, in one statement; the counts
        read are kept while the database is unchanged, so most queries probe only their new terms.
        Unchanged means the same write generation and the same `PRAGMA data_version` of the reader,
        read in that statement: it moves with every commit of another connection, this store's writer
        or another process on the same file (a second agent's stdio server, the CLI), whose new node
        would else stay unfindable here by words counted as absent. The cache is swapped, never
        cleared in place, and filled only from rows read under the version it belongs to, so a write
        during the read cannot leave it half-updated for another request.
        """
        asked = (("term", terms), ("gram", grams), ("head", heads))
        wanted = [(kind, term) for kind, chosen in asked for term in dict.fromkeys(chosen)]
        generation = self.write_generation
        cached, known = self._frequencies
        if cached[1] != generation or len(known) > 200_000:
            known = {}
        version, nodes, fresh = await self._counted([key for key in wanted if key not in known])
        if (version, generation) != cached:
            if len(fresh) < len(wanted):  # the database changed since the kept counts were read
                version, nodes, fresh = await self._counted(wanted)
            known = {}
        if self.write_generation == generation:  # else a newer generation owns the cache now
            if known is not self._frequencies[1]:  # `known` holds counts of (version, generation) only
                self._frequencies = ((version, generation), known)
            known.update(fresh)
        counts = {key: fresh[key] if key in fresh else known[key] for key in wanted}
        held_terms, held_grams, held_heads = (
            {term: n for (k, term), n in counts.items() if k == kind and n} for kind, _ in asked
        )
        return Frequencies(held_terms, held_grams, held_heads, nodes=nodes)

    async def _counted(self, keys: list[tuple[str, str]]) -> Counted:
        """The counts of `keys` with what they were read at, in one statement: one snapshot of the database."""
        parts = [
            "SELECT 'version', '', data_version FROM pragma_data_version",
            "SELECT 'nodes', '', coalesce(max(pk), 0) FROM nodes",
        ]
        params: list[str] = []
        for kind in dict.fromkeys(kind for kind, _ in keys):
            chosen = [term for k, term in keys if k == kind]
            parts.append(
                f"SELECT kind, term, doc FROM term_counts WHERE kind = ? AND term IN ({','.join('?' * len(chosen))})"
            )
            params += [kind, *chosen]
        counted = {
            (kind, term): int(doc) for kind, term, doc in await self._fetchall(" UNION ALL ".join(parts), params)
        }
        return Counted(
            counted.pop(("version", "")), counted.pop(("nodes", "")), {key: counted.get(key, 0) for key in keys}
        )

    async def indexed_node_count(self) -> int:
        """The number of nodes BM25's document frequencies are relative to: the highest node pk, read as
        `document_frequencies` reads it."""
        return (await self._counted([])).nodes


class SearchWrites(DuplicateLookup):
    connection: aiosqlite.Connection
    _all: Callable[..., Awaitable[list[tuple[Any, ...]]]]  # SqliteWriter's
    _all_in: Callable[[str, Iterable[Any]], Awaitable[list[tuple[Any, ...]]]]  # SqliteWriter's
    indexed_rows: int  # SqliteWriter's: see `SqliteStore.bulk_import`

    async def duplicates_of(self, keys: Iterable[tuple[str, Sequence[str]]]) -> dict[tuple[str, tuple[str, ...]], str]:
        wanted = list(dict.fromkeys((digest, tuple(values)) for digest, values in keys))
        rows = await self._all(
            """SELECT k.key, (SELECT min(n.id) FROM nodes n WHERE n.signature_hash = json_extract(k.value, '$[0]')
                                                            AND n.quoted_values = json_extract(k.value, '$[1]'))
               FROM json_each(?) AS k""",
            (json.dumps([[digest, json.dumps(list(values), ensure_ascii=False)] for digest, values in wanted]),),
        )
        return {wanted[int(index)]: node_id for index, node_id in rows if node_id is not None}

    async def set_signature_hashes(self, hashes: Iterable[tuple[str, str]]) -> None:
        """(signature_hash, node_id) pairs, for recomputing derived hashes after a normalizer change."""
        await self.connection.executemany("UPDATE nodes SET signature_hash = ? WHERE id = ?", list(hashes))

    async def write_search_rows(self, rows: Sequence[tuple[str, SearchRow]], *, fresh: bool = False) -> None:
        """(Re)write the index rows of existing nodes; `fresh` nodes have none to remove first."""
        if not rows:
            return
        self.indexed_rows += len(rows)
        pks = await self._pks([node_id for node_id, _ in rows])
        removed = []
        if not fresh:
            removed = [
                counted_keys(*row)
                for row in await self._all_in(
                    """SELECT s.title, s.signature, s.article, g.templates FROM node_search s
                   JOIN node_grams g ON g.rowid = s.rowid WHERE s.rowid IN ({marks})""",
                    [pks[i] for i, _ in rows],
                )
            ]
            for table, column in (
                ("node_search", "rowid"),
                ("node_heads", "rowid"),
                ("node_grams", "rowid"),
                ("node_signatures", "node_pk"),
                ("node_index", "node_pk"),
            ):
                await self.connection.executemany(
                    f"DELETE FROM {table} WHERE {column} = ?", [(pks[i],) for i, _ in rows]
                )
        await self._count_terms(term_count_delta(removed, (row_keys(r) for _, r in rows)))
        await self.connection.executemany(
            "INSERT INTO node_search (rowid, title, signature, article) VALUES (?, ?, ?, ?)",
            [(pks[i], r.title, r.signature, r.article) for i, r in rows],
        )
        await self.connection.executemany(
            "INSERT INTO node_heads (rowid, title, signature) VALUES (?, ?, ?)",
            [(pks[i], r.title, r.signature) for i, r in rows],
        )
        await self.connection.executemany(
            "INSERT INTO node_grams (rowid, templates) VALUES (?, ?)", [(pks[i], r.grams) for i, r in rows]
        )
        await self.connection.executemany(
            """INSERT OR IGNORE INTO node_signatures (hash, node_pk, source, quoted_values, specific)
               SELECT ?, pk, ?, quoted_values, ? FROM nodes WHERE pk = ?""",
            [(digest, source, int(r.specific), pks[i]) for i, r in rows for digest, source in r.signature_hashes],
        )
        await self.connection.executemany(
            """INSERT INTO node_index (node_pk, templates, title_terms, template_terms, slug_terms, value_terms,
                                       value_shapes)
               VALUES (?, ?, ?, ?, ?, ?, ?)""",
            [
                (pks[i], r.template, r.title, r.template_terms, r.slug_terms, r.value_terms, r.value_shapes)
                for i, r in rows
            ],
        )

    async def _optimize_search_tables(self) -> None:
        """Merge each FTS5 table's segments into one b-tree (FTS5's 'optimize'): the same rows, but a
        term's doclist is read from one segment instead of a dozen (see `SqliteStore.bulk_import`)."""
        for table, _ in TERM_TABLES.values():
            await self.connection.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")

    async def _count_terms(self, delta: Counter[tuple[str, str]]) -> None:
        """Apply document-frequency changes to term_counts; counts that reach 0 are removed."""
        up = [(kind, term, n) for (kind, term), n in sorted(delta.items()) if n > 0]
        down = [(n, kind, term) for (kind, term), n in sorted(delta.items()) if n < 0]
        if up:
            await self.connection.executemany(
                """INSERT INTO term_counts (kind, term, doc) VALUES (?, ?, ?)
                   ON CONFLICT (kind, term) DO UPDATE SET doc = doc + excluded.doc""",
                up,
            )
        if down:  # an edit's rows mostly keep their terms: nothing to count down, no round trips
            await self.connection.executemany(
                "UPDATE term_counts SET doc = max(doc + ?, 0) WHERE kind = ? AND term = ?", down
            )
            await self.connection.executemany(
                "DELETE FROM term_counts WHERE kind = ? AND term = ? AND doc = 0",
                [(kind, term) for _, kind, term in down],
            )

    async def _pks(self, ids: Sequence[str]) -> dict[str, int]:
        return {row[0]: row[1] for row in await self._all_in("SELECT id, pk FROM nodes WHERE id IN ({marks})", ids)}
