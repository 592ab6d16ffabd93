"""The search index on both backends: the same rows written to SQLite (FTS5) and PostgreSQL
(tsvector, pg_trgm, term_counts) answer alike: document frequencies, signature owners, channel
matches, candidate texts, the indexed node count, and whole searches. Node rows are inserted
directly with SQL (the node writes are tested elsewhere); the index rows are `search.index_row`'s,
as the service writes them."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from knowmesh_mcp.core.normalize import quoted_values, signature_hash
from knowmesh_mcp.core.rows import ChannelMatch
from knowmesh_mcp.search.query import QueryPlan, _grams, find, index_row
from knowmesh_mcp.store import TermQuery

pytestmark = pytest.mark.anyio

NODE_COLUMNS = ("pk, id, ecosystem, status, title, current_version, current_revision, has_answer, signature_hash, "
                "quoted_values, created_at, updated_at, change_seq")

CORPUS: list[dict[str, Any]] = [
    {"id": "python/module-not-found-venv", "ecosystem": "python",
     "title": "ModuleNotFoundError although the package is installed",
     "error": "ModuleNotFoundError: No module named 'requests'"},
    {"id": "python/no-module-cv2-opencv", "ecosystem": "python",
     "title": "No module named cv2 after installing opencv",
     "error": "ModuleNotFoundError: No module named 'cv2'"},
    {"id": "node/eaddrinuse-port", "ecosystem": "node",
     "title": "Port already in use when starting the dev server",
     "error": "Error: listen EADDRINUSE: address already in use :::3000"},
    {"id": "python/permission-denied-site", "ecosystem": "python",
     "title": "PermissionError writing to site-packages",
     "error": "PermissionError: [Errno 13] Permission denied: '/usr/lib/python3/site.py'"},
    {"id": "rust/borrow-mutable-immutable", "ecosystem": "rust",
     "title": "Cannot borrow as mutable because it is also borrowed as immutable",
     "error": "error[E0502]: cannot borrow `x` as mutable because it is also borrowed as immutable"},
    {"id": "docker/no-space-left", "ecosystem": "docker",
     "title": "Docker build fails with no space left on device",
     "error": "write /var/lib/docker/tmp/x: no space left on device"},
    {"id": "git/not-a-repository", "ecosystem": "git",
     "title": "fatal: not a git repository",
     "error": "fatal: not a git repository (or any of the parent directories): .git"},
    {"id": "python/ssl-certificate-verify", "ecosystem": "python",
     "title": "SSL certificate verify failed behind a proxy",
     "error": "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"},
]

QUERIES = [
    "ModuleNotFoundError: No module named 'cv2'",
    "ModuleNotFoundError: No module named 'numpy'",
    "Error: listen EADDRINUSE: address already in use :::8080",
    "modul not foudn eror",
    "no space left on device",
    "certificate verify failed",
    "cannot borrow as mutable",
    "fatal: not a git repository",
    "permission denied site packages",
    "Traceback (most recent call last):\n  File \"x.py\", line 1\nModuleNotFoundError: No module named 'requests'",
]


def documents(make_doc) -> list[dict[str, Any]]:
    return [make_doc(**spec) for spec in CORPUS]


async def insert_nodes(stores: dict[str, Any], docs: list[dict[str, Any]], first_pk: int = 1) -> None:
    """The nodes rows (the same pks on both backends), then their index rows as a new node's."""
    rows = [(first_pk + i, d["id"], d["ecosystem"], "draft", d["title"], f"v1-{d['id']}", 1, 0,
             signature_hash(d["signature"]["error"]), json.dumps(quoted_values(d["signature"]["error"]), ensure_ascii=False),
             "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.000000Z", first_pk + i) for i, d in enumerate(docs)]
    for backend, mark in (("sqlite", "?"), ("postgres", "%s")):
        async with stores[backend].write() as tx:
            for row in rows:
                await tx.connection.execute(
                    f"INSERT INTO nodes ({NODE_COLUMNS}) VALUES ({', '.join([mark] * len(row))})", row)
            await tx.write_search_rows([(d["id"], index_row(d)) for d in docs], fresh=True)


async def set_version(stores: dict[str, Any], node_id: str, version: str) -> None:
    for backend, mark in (("sqlite", "?"), ("postgres", "%s")):
        async with stores[backend].write() as tx:
            await tx.connection.execute(f"UPDATE nodes SET current_version = {mark} WHERE id = {mark}", (version, node_id))


async def rewrite(stores: dict[str, Any], docs: list[dict[str, Any]], *, fresh: bool = False) -> None:
    for store in stores.values():
        async with store.write() as tx:
            await tx.write_search_rows([(d["id"], index_row(d)) for d in docs], fresh=fresh)


async def vocabularies(stores: dict[str, Any]) -> dict[str, tuple[dict[str, int], ...]]:
    """Every term's, head term's and trigram's document frequency: as FTS5 itself counts them
    (fts5vocab, the ground truth) and as each backend's `term_counts` keeps them."""
    sqlite, postgres = stores["sqlite"], stores["postgres"]

    async def kept(store: Any, mark: str) -> tuple[dict[str, int], ...]:
        return tuple([dict(await store._fetchall(f"SELECT term, doc FROM term_counts WHERE kind = {mark}", (kind,)))
                      for kind in ("term", "gram", "head")])

    return {
        "fts5vocab": tuple([dict(await sqlite._fetchall(f"SELECT term, doc FROM {table}"))
                            for table in ("search_terms", "gram_terms", "head_terms")]),
        "sqlite": await kept(sqlite, "?"),
        "postgres": await kept(postgres, "%s"),
    }


async def assert_frequencies_alike(stores: dict[str, Any], probes: list[str], grams: list[str]) -> None:
    whole = await vocabularies(stores)
    assert whole["sqlite"] == whole["fts5vocab"]
    assert whole["postgres"] == whole["fts5vocab"]
    assert all(whole["fts5vocab"])
    answers = {name: await store.document_frequencies(probes, grams, probes) for name, store in stores.items()}
    assert answers["sqlite"] == answers["postgres"]
    assert answers["sqlite"].heads and answers["sqlite"].heads != answers["sqlite"].terms
    assert list(answers["sqlite"].terms) == list(answers["postgres"].terms)  # same order: the order asked in


def probe_terms(docs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    terms = [term for d in docs for term in index_row(d).title.split()] + ["absentterm", "modul", "instal"]
    grams = [g for query in QUERIES for g in _grams(QueryPlan.of(query).mains[0])] + ["zzq", "mod", "Mod"]
    return terms, grams


async def test_document_frequencies_alike_after_inserts_replacements_and_rebuilds(both_stores, make_doc):
    docs = documents(make_doc)
    terms, grams = probe_terms(docs)
    await insert_nodes(both_stores, docs[:5])
    await assert_frequencies_alike(both_stores, terms, grams)

    await insert_nodes(both_stores, docs[5:], first_pk=6)
    await assert_frequencies_alike(both_stores, terms, grams)

    # Edits: new titles and errors replace terms and trigrams; one term leaves the index entirely.
    edited = [make_doc(**{**CORPUS[0], "title": "Interpreter mismatch hides the zebrafish package",
                          "error": "ModuleNotFoundError: No module named 'zebrafish'"}),
              make_doc(**{**CORPUS[6], "title": "Not a repository: quokka", "error": "fatal: quokka is not a repository"})]
    await rewrite(both_stores, edited)
    after_edit = (await both_stores["postgres"].document_frequencies(["zebrafish", "quokka", "git"])).terms
    assert after_edit["zebrafish"] == 1 and after_edit["quokka"] == 1
    await assert_frequencies_alike(both_stores, [*terms, "zebrafish", "quokka"], grams)

    # The same rows written again (a rebuild after an index version change) leave every count alone.
    current = [edited[0], *docs[1:6], edited[1], docs[7]]
    await rewrite(both_stores, current)
    await assert_frequencies_alike(both_stores, terms, grams)

    # Back to the original documents: counts return to what the first inserts made.
    await rewrite(both_stores, docs)
    await assert_frequencies_alike(both_stores, terms, grams)
    for store in both_stores.values():
        assert await store.document_frequencies(["zebrafish", "quokka"], [], ["zebrafish", "quokka"]) == ({}, {}, {}, len(docs))
        (left,) = await store._fetchall("SELECT count(*) FROM term_counts WHERE doc = 0")
        assert tuple(left) == (0,)


async def test_frequencies_count_what_another_store_on_the_database_wrote(both_stores, make_doc):
    """Another process on the same SQLite file (a second agent's server, the CLI), another server on the
    same PostgreSQL database: what it wrote is counted at this store's next read, though this store
    had read the term as absent and has written nothing since."""
    from knowmesh_mcp.store import open_store

    for name, store in both_stores.items():
        assert await store.document_frequencies(["qzxjk"], ["qzx"], ["qzxjk"]) == ({}, {}, {}, 0), name
    others = {name: await open_store(store.url if name == "postgres" else store.path) for name, store in both_stores.items()}
    try:
        await insert_nodes(others, [make_doc(id="python/qzxjk", title="qzxjk will not start", error="QzxjkError: no qzxjk")])
    finally:
        for other in others.values():
            await other.close()
    for name, store in both_stores.items():
        counted = await store.document_frequencies(["qzxjk"], ["qzx"], ["qzxjk"])
        assert counted == ({"qzxjk": 1}, {"qzx": 1}, {"qzxjk": 1}, 1), name
        assert await store.indexed_node_count() == 1, name


async def test_a_fresh_write_counts_from_nothing_and_a_failed_write_counts_nothing(both_stores, make_doc):
    docs = documents(make_doc)
    terms, grams = probe_terms(docs)
    await insert_nodes(both_stores, docs[:3])
    before = await vocabularies(both_stores)
    for store in both_stores.values():
        with pytest.raises(Exception):
            async with store.write() as tx:
                await tx.write_search_rows([(docs[0]["id"], index_row(docs[3]))])
                raise RuntimeError("rolled back")
    assert await vocabularies(both_stores) == before
    await insert_nodes(both_stores, docs[3:], first_pk=4)
    await assert_frequencies_alike(both_stores, terms, grams)


async def test_the_term_counts_migrations_count_the_nodes_a_mesh_already_holds(tmp_path, pg_database, make_doc):
    """SQLite's 0010 (term_counts from fts5vocab) and PostgreSQL's 0003 ('head' counts from
    node_heads) run on a mesh that already has nodes: afterwards every count equals FTS5's own."""
    from knowmesh_mcp.store import PostgresStore, SqliteStore
    from knowmesh_mcp.store.postgres.connection import migrate

    docs = documents(make_doc)
    stores = {"sqlite": await SqliteStore.open(tmp_path / "upgrade.db"), "postgres": await PostgresStore.open(pg_database)}
    await insert_nodes(stores, docs)
    expected = await vocabularies(stores)
    # Back to the schema before the migrations (SQLite's 0011 to 0013 undone too, as they come later), their rows gone
    async with stores["sqlite"].write() as tx:
        for statement in ("DROP TABLE term_counts", "DROP TABLE head_terms",
                          "DROP INDEX node_signatures_by_node_kind", "CREATE INDEX node_signatures_by_node ON node_signatures (node_pk)",
                          "DROP INDEX nodes_by_answer_age", "DROP INDEX nodes_by_answer", "DROP INDEX feedback_by_outcome",
                          "DROP INDEX nodes_by_ecosystem", "CREATE INDEX nodes_by_ecosystem ON nodes (ecosystem, id)",
                          "DROP INDEX node_redirects_by_canonical",
                          "DELETE FROM schema_migrations WHERE version >= 10"):
            await tx.connection.execute(statement)
    async with stores["postgres"].write() as tx:
        for statement in ("DELETE FROM term_counts WHERE kind = 'head'",
                          "ALTER TABLE term_counts DROP CONSTRAINT term_counts_kind_check",
                          "ALTER TABLE term_counts ADD CONSTRAINT term_counts_kind_check CHECK (kind IN ('term', 'gram'))",
                          "DELETE FROM schema_migrations WHERE version = 3"):
            await tx.connection.execute(statement)
    for store in stores.values():
        await store.close()
    assert await migrate(pg_database) == 1
    stores = {"sqlite": await SqliteStore.open(tmp_path / "upgrade.db"), "postgres": await PostgresStore.open(pg_database)}
    try:
        assert await vocabularies(stores) == expected
        assert all(expected["fts5vocab"])
    finally:
        for store in stores.values():
            await store.close()


async def test_the_gram_sets_migration_fills_the_sets_of_a_mesh_already_holding_nodes(tmp_path, pg_database, make_doc):
    """PostgreSQL's 0004 on a mesh with nodes: every node's `grams` is its templates' distinct trigrams
    (what term_counts counts), and the trigram channel finds what it found before the migration."""
    from knowmesh_mcp.store import PostgresStore, SqliteStore
    from knowmesh_mcp.store.common import gram_terms
    from knowmesh_mcp.store.postgres.connection import migrate

    docs = documents(make_doc)
    sqlite, store = await SqliteStore.open(tmp_path / "beside.db"), await PostgresStore.open(pg_database)
    await insert_nodes({"sqlite": sqlite, "postgres": store}, docs)
    await sqlite.close()
    probes = [TermQuery("grams", "grams", _grams(QueryPlan.of(q).mains[0])[:24], 20) for q in QUERIES]
    before = [await store.channel_matches([], [], 0, [probe]) for probe in probes]
    async with store.write() as tx:
        for statement in ("DROP INDEX node_grams_sets", "ALTER TABLE node_grams DROP COLUMN grams",
                          "CREATE INDEX node_grams_trigrams ON node_grams USING gin (templates gin_trgm_ops)",
                          "DELETE FROM schema_migrations WHERE version = 4"):
            await tx.connection.execute(statement)
    await store.close()
    assert await migrate(pg_database) == 1
    store = await PostgresStore.open(pg_database)
    try:
        rows = await store._fetchall("SELECT templates, grams FROM node_grams")
        assert len(rows) == len(docs)
        assert all(sorted(grams) == sorted(gram_terms(templates)) and grams for templates, grams in rows)
        assert [await store.channel_matches([], [], 0, [probe]) for probe in probes] == before
        assert any(before)
    finally:
        await store.close()


async def test_gram_sets_keep_quotes_backslashes_and_braces(both_stores, make_doc):
    """Trigrams with array-literal and COPY syntax (`"`, `\\`, `{`, `,`, a tab, `NULL`) are stored
    as they are and found as SQLite finds them."""
    from knowmesh_mcp.store.common import gram_terms

    hostile = make_doc(id="shell/hostile-grams", ecosystem="shell", title="Hostile trigram text",
                       error='error: unexpected "{" at C:\\Users\\x\t{a,b}, got NULL or "null" \\" end')
    await insert_nodes(both_stores, [*documents(make_doc), hostile])
    (templates, grams), = await both_stores["postgres"]._fetchall(
        "SELECT g.templates, g.grams FROM node_grams g JOIN nodes n ON n.pk = g.node_pk WHERE n.id = %s", ["shell/hostile-grams"])
    assert sorted(grams) == sorted(gram_terms(templates))
    assert {'" a', "{a,", "a,b", ' \\"', '\\" ', "ull"} <= set(grams)
    for probe in (['" a', "{a,"], ["a,b", ",b}"], [' \\"', '\\" '], ["nul", "ull"]):
        for every in (False, True):
            queries = [TermQuery("grams", "grams", probe, 20, every=every)]
            found = await both_stores["postgres"].channel_matches([], [], 0, queries)
            assert found == await both_stores["sqlite"].channel_matches([], [], 0, queries), probe
            assert found, probe


async def test_indexed_node_count_alike(both_stores, make_doc):
    assert {name: await store.indexed_node_count() for name, store in both_stores.items()} == {"sqlite": 0, "postgres": 0}
    docs = documents(make_doc)
    await insert_nodes(both_stores, docs[:4])
    assert {name: await store.indexed_node_count() for name, store in both_stores.items()} == {"sqlite": 4, "postgres": 4}
    await insert_nodes(both_stores, docs[4:], first_pk=5)
    assert {name: await store.indexed_node_count() for name, store in both_stores.items()} == {"sqlite": 8, "postgres": 8}


async def test_duplicates_of_duplicate_of_and_set_signature_hashes_alike(both_stores, make_doc):
    docs = documents(make_doc)
    await insert_nodes(both_stores, docs)
    module = signature_hash(docs[0]["signature"]["error"])
    keys = [(module, ["requests"]), (module, ("cv2",)), (module, ["numpy"]), ("0" * 64, []), (module, ["requests"])]
    results: dict[str, Any] = {}
    for name, store in both_stores.items():
        async with store.write() as tx:
            found = await tx.duplicates_of(iter(keys))
            duplicates = [await tx.duplicate_of(module, ["requests"]), await tx.duplicate_of(module, ["cv2"]),
                          await tx.duplicate_of(module, ["numpy"]), await tx.duplicate_of("0" * 64, [])]
            await tx.set_signature_hashes(iter([("f" * 64, docs[2]["id"]), ("f" * 64, docs[3]["id"])]))
            moved = await tx.duplicates_of([("f" * 64, quoted_values(d["signature"]["error"])) for d in docs[2:4]])
            nothing = await tx.duplicates_of([])
        results[name] = (found, duplicates, moved, nothing)
    assert results["sqlite"] == results["postgres"]
    found, duplicates, moved, nothing = results["postgres"]
    assert found == {(module, ("requests",)): "python/module-not-found-venv", (module, ("cv2",)): "python/no-module-cv2-opencv"}
    assert duplicates == ["python/module-not-found-venv", "python/no-module-cv2-opencv", None, None]
    assert sorted(moved.values()) == sorted([docs[2]["id"], docs[3]["id"]]) and nothing == {}


def as_set(matches: list[ChannelMatch]) -> set[ChannelMatch]:
    return set(matches)


async def test_channel_matches_alike_for_signatures_and_term_queries(both_stores, make_doc):
    docs = documents(make_doc)
    await insert_nodes(both_stores, docs)
    sqlite, postgres = both_stores["sqlite"], both_stores["postgres"]
    cases: list[tuple[list[str], list[str], int, list[TermQuery]]] = []
    for query in QUERIES:
        plan = QueryPlan.of(query)
        cases.append(([h for h, _ in plan.hashes], list(plan.quoted), 20, []))
        cases.append(([h for h, _ in plan.hashes], list(plan.quoted), 1, []))  # the limit keeps the same first node
        cases.append(([h for h, _ in plan.hashes] * 2, list(plan.quoted), 2, []))  # a hash twice is read once
        terms = [*plan.terms.decisive, *plan.terms.context, *plan.terms.words]
        grams = _grams(plan.mains[0])
        for limit in (2, 20):
            for ranked in (False, True):
                cases.append(([], [], 0, [
                    TermQuery("terms", "search", terms[:16], limit, ranked=ranked),
                    TermQuery("every", "search", terms[:2], limit, every=True, ranked=ranked),
                    TermQuery("heads", "heads", terms[:16], limit, ranked=ranked),
                    TermQuery("grams", "grams", grams[:24], limit, ranked=ranked),
                    TermQuery("all-grams", "grams", grams[:2], limit, every=True, ranked=ranked),
                ]))
            # the fallback over common terms: lowest pks, whichever way a backend walks to them
            cases.append(([], [], 0, [TermQuery("terms", "search", terms[:1], limit, density=1.0),
                                      TermQuery("every", "search", terms[:2], limit, every=True, density=1.0),
                                      TermQuery("heads", "heads", terms[:1], limit, density=1.0),
                                      TermQuery("grams", "grams", grams[:2], limit, every=True, density=1.0)]))
    cases.append(([], [], 0, [TermQuery("terms", "search", ["modul"], 20), TermQuery("every", "search", ["modul", "cv2"], 20, every=True),
                              TermQuery("heads", "heads", ["eaddrinus", "port"], 20), TermQuery("grams", "grams", ["le ", "pac"], 20),
                              TermQuery("none", "search", [], 20)]))
    found_any = 0
    for hashes, quoted, limit, queries in cases:
        on_sqlite = await sqlite.channel_matches(hashes, quoted, limit, queries)
        on_postgres = await postgres.channel_matches(hashes, quoted, limit, queries)
        unranked_or_all = all(not q.ranked for q in queries)
        if unranked_or_all:
            assert on_sqlite == on_postgres, (hashes, queries)  # same rows, same order
        else:
            # Ranked queries rank differently (bm25 against ts_rank); with a limit above the
            # match count both return every match.
            limited = any(q.limit < 20 for q in queries)
            if not limited:
                assert as_set(on_sqlite) == as_set(on_postgres), queries
            else:  # the top `limit` may differ, never how many each channel returns
                assert Counter(m.channel for m in on_sqlite) == Counter(m.channel for m in on_postgres), queries
        found_any += len(on_postgres)
    assert found_any > 100
    assert await postgres.channel_matches([], [], 20, []) == []


@pytest.mark.parametrize("span", [0.01, 0.2, 3])
async def test_dense_matches_walked_or_indexed_are_the_same_lowest_pks(both_stores, make_doc, monkeypatch, span):
    """PostgreSQL's walk of the primary key for dense terms reads a bounded span (here 1 row, a few,
    or all of them) and gives way to the index when it found too few: either way the rows are
    SQLite's."""
    from knowmesh_mcp.store.postgres import search as pg_search

    monkeypatch.setattr(pg_search, "WALK_SPAN", span)
    monkeypatch.setattr(pg_search, "WALK_REACH", span)
    docs = documents(make_doc)
    await insert_nodes(both_stores, docs)
    compared = 0
    for query in QUERIES:
        plan = QueryPlan.of(query)
        terms = [*plan.terms.decisive, *plan.terms.context]
        grams = _grams(plan.mains[0])
        for limit in (1, 3, 20):
            queries = [TermQuery("terms", "search", terms[:1], limit, density=1.0),
                       TermQuery("every", "search", terms[:2], limit, every=True, density=1.0),
                       TermQuery("heads", "heads", terms[-1:], limit, density=0.5),
                       TermQuery("grams", "grams", grams[:2], limit, every=True, density=1.0)]
            on_postgres = await both_stores["postgres"].channel_matches([], [], 0, queries)
            assert await both_stores["sqlite"].channel_matches([], [], 0, queries) == on_postgres, queries
            compared += len(on_postgres)
    assert compared > 50


def test_a_walk_reads_up_to_as_many_rows_as_the_index_would_visit():
    """At 1,000,000 nodes a term in 16,000 of them is walked (the index would visit all 16,000 rows
    to return the lowest 20), as far as ten times the rows expected to hold 20 matches; without
    that many matches to visit, the same density goes to the index; a rare term always does."""
    from knowmesh_mcp.store.postgres.search import _lowest_pks

    def plan(matches: int, density: float) -> str:
        return _lowest_pks(TermQuery("every", "search", ["ts2307"], 20, density=density, matches=matches),
                           "node_search", "t", "terms", "t.terms @@ x", ["ts2307"])[0]

    assert "LIMIT 12500) AS t" in plan(16_000, 0.016)
    assert "LIMIT 3000) AS t" in plan(1_000, 0.05)  # at most WALK_ROWS, or as many rows as matches
    assert plan(1_000, 0.016).startswith("SELECT")  # 3 x 1,250 rows > 3,000 > 1,000: the index
    assert plan(20, 0.00002).startswith("SELECT")
    assert plan(0, 0.0).startswith("SELECT")


async def test_whole_searches_find_and_rank_alike(both_stores, make_doc):
    docs = documents(make_doc)
    await insert_nodes(both_stores, docs)
    answered = 0
    for query in QUERIES:
        plan = QueryPlan.of(query)
        ranked = {name: [(c.text.id, sorted(c.channels)) for c in await find(store, plan)]
                  for name, store in both_stores.items()}
        assert ranked["sqlite"] == ranked["postgres"], query
        answered += bool(ranked["postgres"])
    assert answered >= len(QUERIES) - 2


async def test_candidate_texts_alike_and_read_again_for_a_new_version(both_stores, make_doc):
    docs = documents(make_doc)
    await insert_nodes(both_stores, docs)
    versions = {pk: f"v1-{d['id']}" for pk, d in reversed(list(enumerate(docs, start=1)))}
    versions[99] = "v1-missing"
    versions[3] = "an older version"
    texts = {name: await store.candidate_texts(versions) for name, store in both_stores.items()}
    assert texts["sqlite"] == texts["postgres"]
    assert [t.pk for t in texts["postgres"]] == [8, 7, 6, 5, 4, 2, 1]  # asked order; stale and missing left out
    again = await both_stores["postgres"].candidate_texts(versions)  # from the cache now
    assert again == texts["postgres"]

    edited = make_doc(**{**CORPUS[1], "title": "OpenCV wheels missing for the interpreter"})
    await rewrite(both_stores, [edited])
    await set_version(both_stores, edited["id"], "v2")
    versions[2] = "v2"
    texts = {name: await store.candidate_texts(versions) for name, store in both_stores.items()}
    assert texts["sqlite"] == texts["postgres"]
    (second,) = [t for t in texts["postgres"] if t.pk == 2]
    assert "opencv" in second.title.split() and second.title == index_row(edited).title


SYNTAX = ["a'b", "'", "''", "foo & bar", "x | y", "!python", "modul:*", "pack:*", "(modul", "modul)", "back\\slash", "\\",
          "a:A", "instal:B", "<->", "python <-> instal", "!", "&", "|", ":*", "()", "%", "_", "a%b", "_od", "\\%", "\x01"]


async def test_terms_with_tsquery_and_like_syntax_neither_error_nor_match_wrongly(both_stores, make_doc):
    docs = documents(make_doc)
    await insert_nodes(both_stores, docs)
    sqlite, postgres = both_stores["sqlite"], both_stores["postgres"]
    for term in SYNTAX:
        for queries in ([TermQuery("terms", "search", [term], 20)], [TermQuery("terms", "search", [term, "cv2"], 20)],
                        [TermQuery("every", "search", [term, "modul"], 20, every=True)],
                        [TermQuery("heads", "heads", [term], 20, ranked=True)],
                        [TermQuery("grams", "grams", [term], 20)], [TermQuery("grams", "grams", [term, "cv2"], 20, ranked=True)]):
            on_sqlite = as_set(await sqlite.channel_matches([], [], 0, queries))
            on_postgres = as_set(await postgres.channel_matches([], [], 0, queries))
            assert on_sqlite == on_postgres, (term, queries)
        frequencies = await postgres.document_frequencies([term], [term], [term])
        assert frequencies == await sqlite.document_frequencies([term], [term], [term]), term

    def ids(matches):
        return {docs[match.node_pk - 1]["id"] for match in matches}

    # Operators stay text: no negation, no prefix match, no OR/AND smuggled in, no LIKE wildcard.
    every_python = await postgres.channel_matches([], [], 0, [TermQuery("terms", "search", ["!python"], 20)])
    assert ids(every_python) == ids(await postgres.channel_matches([], [], 0, [TermQuery("terms", "search", ["python"], 20)]))
    assert await postgres.channel_matches([], [], 0, [TermQuery("terms", "search", ["pack:*"], 20)]) == []  # `packag` exists
    assert await postgres.channel_matches([], [], 0, [TermQuery("terms", "search", ["cv2 | eaddrinus"], 20)]) == []
    assert await postgres.channel_matches([], [], 0, [TermQuery("grams", "grams", ["_od"], 20)]) == []  # "mod" exists
    assert await postgres.channel_matches([], [], 0, [TermQuery("grams", "grams", ["n%e"], 20)]) == []
    assert await postgres.channel_matches([], [], 0, [TermQuery("every", "search", ["!", "modul"], 20, every=True)]) == []


async def test_a_ranked_channel_keeps_at_most_per_family_nodes_of_one_template(both_stores, make_doc):
    """Siblings of one template, each about its own user, read alike and would fill a ranked channel;
    capped per family, the node of another template that holds fewer of the words still comes back."""
    siblings = [make_doc(id=f"postgres/password-auth-failed-{user}", ecosystem="postgres",
                         title=f'password authentication failed for user "{user}"',
                         error=f'FATAL:  password authentication failed for user "{user}"')
                for user in ("erin", "judy", "ledger_app", "station_app", "initech_ro", "vertex_ro")]
    other = make_doc(id="postgres/password-authentication-failed", ecosystem="postgres",
                     title="Password authentication failed when connecting to the server",
                     error="psql: error: connection to server failed: password authentication failed")
    await insert_nodes(both_stores, [*siblings, other])
    terms = QueryPlan.of("password authentication failed for user").terms.words
    family = {f"postgres/password-auth-failed-{user}" for user in ("erin", "judy", "ledger_app", "station_app",
                                                                   "initech_ro", "vertex_ro")}
    for name, store in both_stores.items():
        ids = dict(await store._fetchall("SELECT pk, id FROM nodes"))

        async def found(**family_cap: int) -> list[str]:
            query = TermQuery("heads", "heads", list(terms), 3, ranked=True, weights=[1.0] * len(terms), **family_cap)
            return [ids[pk] for _, pk, _, _ in await store.channel_matches([], [], 0, [query])]

        assert set(await found()) <= family, name  # uncapped, the siblings fill the channel
        capped = await found(per_family=2, pool=20)
        assert len(capped) == 3 and len(set(capped) & family) == 2 and other["id"] in capped, (name, capped)


async def test_a_specific_node_found_by_a_term_channel_brings_the_generic_nodes_of_its_template(both_stores, make_doc):
    """A sibling about one user shares its template's hash with the generic node of that error: the
    `family` channel returns the generic one (and no node of another template), alike on both backends."""
    siblings = [make_doc(id=f"postgres/password-auth-failed-{user}", ecosystem="postgres",
                         title=f'password authentication failed for user "{user}"',
                         error=f'FATAL:  password authentication failed for user "{user}"') for user in ("erin", "judy")]
    generic = make_doc(id="postgres/password-authentication-failed", ecosystem="postgres",
                       title="Password authentication failed for a database user",
                       error='FATAL:  password authentication failed for user "app"')
    unrelated = make_doc(id="postgres/role-does-not-exist", ecosystem="postgres", title="Role does not exist",
                         error='FATAL:  role "app" does not exist')
    for document in (*siblings, generic, unrelated):
        document["signature"]["aliases"] = []  # make_doc's alias would make every node one family
    await insert_nodes(both_stores, [*siblings, generic, unrelated])
    erin = TermQuery("terms", "search", ["erin"], 5)
    found = {}
    for name, store in both_stores.items():
        ids = dict(await store._fetchall("SELECT pk, id FROM nodes"))
        rows = await store.channel_matches([], [], 0, [erin], 5)
        found[name] = rows
        assert [(channel, ids[pk]) for channel, pk, _, _ in rows] == [
            ("terms", "postgres/password-auth-failed-erin"), ("family", generic["id"])], name
        assert [ids[pk] for _, pk, _, _ in await store.channel_matches([], [], 0, [erin])] == [siblings[0]["id"]], name
        # a generic node found by a term channel has no family to bring
        role = TermQuery("terms", "search", ["role"], 5)
        assert [ids[pk] for _, pk, _, _ in await store.channel_matches([], [], 0, [role], 5)] == [unrelated["id"]], name
    assert found["sqlite"] == found["postgres"]


async def test_search_connections_plan_for_short_statements(both_stores):
    """Every pooled PostgreSQL connection plans for an index in memory, starts no parallel workers
    and compiles nothing for a search (docs/decisions.md: each was measured; settings of the
    session, so a team's database needs no configuration of its own)."""
    postgres = both_stores["postgres"]
    settings = await postgres._fetchall(
        "SELECT current_setting('random_page_cost'), current_setting('max_parallel_workers_per_gather'), "
        "current_setting('jit')")
    assert settings == [("1.1", "0", "off")]
