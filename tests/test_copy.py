"""`copy --from A --to B`: a whole mesh moved SQLite -> PostgreSQL -> SQLite, on real databases, and
read back through the Mesh, which must answer exactly as the source does."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from knowmesh_mcp.services import copying
from knowmesh_mcp.services import importing
from knowmesh_mcp.cli.output import progress_bar
from knowmesh_mcp.services.copying import copy_mesh
from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.core.identity import Actor
from knowmesh_mcp.services.submission import Submission
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.store import open_store
from knowmesh_mcp.store.interface import COPIED_TABLES

from conftest import SEARCH_TABLES, fts5_segments, index_of, new_pg_database, opened, serving

pytestmark = pytest.mark.anyio

NODE = "python/copy-venv-mixup"
NODE_ERROR = "ModuleNotFoundError: No module named 'copytest_requests'"
MERGED = "python/copy-no-module-yaml"
OPEN = "python/copy-open-problem"
TEAM = "python/copy-team-node"
ENV = "linux,python-3.12,pip"
QUERIES = (NODE_ERROR, "No module named copytest_yaml in a venv", "ModuleNotFoundError: No module named 'requests'",
           "RuntimeError: the frobnicator refused to start", "pip installed into a different interpreter")
ANN = Actor("ann", "token")
BEN = Actor("ben", "token")
MIA = Actor("mia", "token", role="maintainer")


async def build_mesh(service: Mesh, make_doc) -> None:
    """A mesh with something in every table the service writes (but the sync tables)."""
    await service.creation.create_node(make_doc(id=NODE, error=NODE_ERROR), actor=ANN)
    await service.creation.create_node(make_doc(id=MERGED, error="ModuleNotFoundError: No module named 'copytest_yaml'",
                                       title="No module named copytest_yaml in a venv"), actor=BEN)
    problem = make_doc(id=OPEN, error="RuntimeError: the frobnicator refused to start",
                       title="The frobnicator refuses to start")
    problem["content"] = {**problem["content"], "solutions": []}
    await service.creation.create_node(problem, agent={"id": "cara"})
    for agent in ("ann", "ben"):
        await service.tokens.add_token(agent)
    await service.tokens.add_token("mia", role="maintainer")
    await service.tokens.add_token("gone")
    await service.tokens.revoke_tokens("gone")

    edited = await service.articles.patch_article(NODE, base_revision=1, ops=[{"op": "set", "path": "/title", "value": "A clearer title"}],
                                         agent=None, summary="clearer title", actor=ANN)
    undone = await service.articles.patch_article(NODE, base_revision=2, ops=[{"op": "set", "path": "/content/symptom",
                                                                       "value": "Import fails in the venv."}],
                                         agent=None, summary="symptom", actor=BEN)
    await service.articles.undo_edit(undone["revision_id"], undo_token=undone["undo_token"], agent=None, summary="undo it", actor=ANN)
    assert edited["undo_token"]  # left unspent: its hash is copied, used_at stays empty

    linux = {"os": "linux", "runtime": "python-3.12", "pkg_manager": "pip"}
    await service.outcomes.report_outcome({"node": NODE, "solution": "venv-linux", "outcome": "solved", "env": linux,
                                  "evidence": {"exit_code": 0}}, actor=ANN)
    await service.outcomes.report_outcome({"node": NODE, "solution": "venv-linux", "outcome": "failed", "env": linux,
                                  "reason": "still fails"}, actor=BEN)
    await service.outcomes.report_outcome({"node": NODE, "solution": "venv-linux", "outcome": "failed", "env": linux,
                                  "reason": "forged"}, actor=Actor("mallory", "unproven"), submission=Submission(ip_hash="ab" * 32))
    await service.outcomes.report_outcome({"node": MERGED, "solution": "venv-macos", "outcome": "solved",
                                  "env": {"os": "macos"}, "evidence": {"exit_code": 0}},
                                 actor=Actor(None, "claimed"), submission=Submission(ip_hash="cd" * 32))
    await service.failures.report_failed_attempt(OPEN, {"environment": linux, "summary": "reinstalled it", "reason": "same error",
                                               "steps": ["pip install frobnicator --force-reinstall"]}, actor=BEN)

    task = await service.dedupe.open_dedupe_task({"node": MERGED, "candidate": NODE, "reason": "same interpreter mix-up"}, actor=ANN)
    for voter in (ANN, BEN):
        await service.dedupe.vote_dedupe(task["task_id"], {"vote": "same", "canonical_id": NODE}, actor=voter)
    await service.maintenance.confirm_merge(task["task_id"], note="one problem", actor=MIA)
    await service.maintenance.set_status(OPEN, "deprecated", note="stale", actor=MIA)
    await service.maintenance.set_status(OPEN, "draft", note="not stale after all", actor=MIA)

    issue = await service.issues.file_issue({"title": "search misses yaml", "body": "a yaml error found nothing"}, actor=BEN)
    await service.issues.file_issue({"title": "slow", "body": "reads are slow"}, actor=Actor(None, "claimed"), submission=Submission(ip_hash="ef" * 32))
    await service.maintenance.resolve_issue(issue["issue_number"], "closed", note="fixed in the ranking", actor=MIA)


async def answers(service: Mesh) -> dict[str, Any]:
    """Everything a reader sees, through the Mesh."""
    ids = [document["id"] async for document in service.documents.export_documents()]
    seen: dict[str, Any] = {"ids": ids, "per_node": {}}
    for node_id in ids:
        try:
            read: Any = (await service.nodes.read_node(node_id, service.nodes.read_request(env=ENV))).body
        except KnowmeshError as error:
            read = (error.status, error.top_level.get("canonical", {}).get("id"))
        seen["per_node"][node_id] = {
            "read": read,
            "history": await service.articles.article_history(node_id, include="documents"),
            "feedback": await service.outcomes.list_feedback(node_id),
            "failures": await service.failures.list_failures(node_id),
        }
    found = {q: (await service.searching.search(q, env=ENV))["results"] for q in QUERIES}
    seen["search"] = {q: [r["id"] for r in results] for q, results in found.items()}
    seen["search_head"] = {q: [(r["id"], r["score"]) for r in results if r["score"] >= 0.01] for q, results in found.items()}
    seen["audit"] = await service.maintenance.audit_log()
    seen["tokens"] = await service.tokens.list_tokens()
    seen["changes"] = await service.feed.changes(limit=1000)
    seen["issues"] = await service.issues.list_issues()
    seen["dedupe"] = await service.store.dedupe_tasks(None, 100)
    seen["review"] = await service.review.review_queue()
    seen["conflicts"] = await service.store.sync_conflicts()
    return seen


async def rows_of(target: str) -> dict[str, list[tuple[Any, ...]]]:
    store = await open_store(target)
    try:
        return {table.name: await store.dump_table(table.name, None, 100_000) for table in COPIED_TABLES}
    finally:
        await store.close()


async def edit(service: Mesh, node_id: str, path: str, value: str, actor: Actor) -> None:
    base = (await service.articles.read_article(node_id)).body["revision"]
    await service.articles.patch_article(node_id, base_revision=base, ops=[{"op": "set", "path": path, "value": value}],
                                agent=None, summary=f"set {path}", actor=actor)


async def sync_with_a_conflict(service: Mesh, team: Mesh, make_doc) -> None:
    """sync_state, synced_nodes, a sync conflict with its moved revisions, and synced feedback."""
    await team.creation.create_node(make_doc(id=TEAM, error="ModuleNotFoundError: No module named 'copytest_team'"),
                           agent={"id": "team-agent"})
    async with serving(build_app(service=team, write_limit=0)) as url:
        await service.sync.sync_from(url)
        await edit(service, TEAM, "/content/root_cause", "My local root cause.", ANN)
        await edit(team, TEAM, "/content/root_cause", "Team root cause.", Actor("team-agent", "claimed"))
        await team.outcomes.report_outcome({"node": TEAM, "solution": "venv-macos", "outcome": "solved", "env": {"os": "macos"},
                                   "evidence": {"exit_code": 0}}, actor=Actor("team-agent", "claimed"))
        report = await service.sync.sync_from(url)
    assert len(report.conflicts) == 1 and report.evidence == 1


@pytest.fixture
async def source(tmp_path, make_doc) -> str:
    path = str(tmp_path / "source.db")
    async with opened(path, seed=True) as service, opened(tmp_path / "team.db") as team:  # the starter corpus too
        await build_mesh(service, make_doc)
        await sync_with_a_conflict(service, team, make_doc)
    return path


async def test_a_mesh_copied_to_postgresql_and_back_answers_exactly_as_the_source(source, pg_database, tmp_path):
    async with opened(source) as service:
        expected = await answers(service)
    assert expected["per_node"][MERGED]["read"] == (301, NODE)
    assert len(expected["per_node"][NODE]["feedback"]["feedback"]) == 3 and expected["audit"]["actions"]

    first = await copy_mesh(source, pg_database)
    assert first.copied["nodes"] == len(expected["ids"]) and first.copied["feedback"] == 5
    assert all(first.copied[name] for name in ("sync_state", "synced_nodes", "sync_conflicts", "moved_revisions",
                                               "undo_tokens", "node_stats", "dedupe_votes", "node_redirects"))
    assert first.summary().startswith(f"copied {len(expected['ids'])} nodes, ")
    async with opened(pg_database) as service:
        on_postgres = await answers(service)
    # Ranked term channels keep different tails on the two backends (docs/decisions.md, "Known
    # differences"): a search on PostgreSQL agrees on everything but results scored below 0.01.
    assert {**on_postgres, "search": None} == {**expected, "search": None}
    assert on_postgres["search_head"] == expected["search_head"]

    back = str(tmp_path / "back.db")
    await copy_mesh(pg_database, back)
    async with opened(back) as service:
        assert await answers(service) == expected
    assert await rows_of(back) == await rows_of(source), "row for row, ids and times included"


async def test_writes_after_a_copy_to_postgresql_continue_its_numbering(source, pg_database, make_doc):
    """Copied ids were explicit: PostgreSQL's identity sequences and change counter move past them."""
    await copy_mesh(source, pg_database)
    copied = await rows_of(pg_database)
    last = {name: max(row[0] for row in copied[name]) for name in ("feedback", "service_issues", "maintainer_actions")}
    async with opened(pg_database) as service:
        before = (await service.feed.changes(limit=1000))["changes"]
        linux = {"os": "linux", "runtime": "python-3.12", "pkg_manager": "pip"}
        report = await service.outcomes.report_outcome({"node": NODE, "solution": "venv-linux", "outcome": "solved", "env": linux,
                                               "evidence": {"exit_code": 0}}, actor=Actor("dan", "token"))
        issue = await service.issues.file_issue({"title": "after the copy", "body": "numbers go on"}, actor=BEN)
        action = await service.maintenance.set_status(NODE, "verified", actor=MIA)
        await service.creation.create_node(make_doc(id="python/copy-after", error="ModuleNotFoundError: No module named 'copytest_after'"))
        after = (await service.feed.changes(limit=1000))["changes"]
    assert (report["id"], issue["issue_number"], action["action_id"]) == (
        last["feedback"] + 1, last["service_issues"] + 1, last["maintainer_actions"] + 1)
    assert [c["id"] for c in after[-2:]] == [NODE, "python/copy-after"]
    assert [c["id"] for c in after[:-2]] == [c["id"] for c in before if c["id"] != NODE]
    pks = [row[0] for row in (await rows_of(pg_database))["nodes"]]
    assert len(set(pks)) == len(pks) and max(pks) == max(row[0] for row in copied["nodes"]) + 1


@pytest.fixture
def second_pg_database(postgres_server: str) -> Iterator[str]:
    """Another empty database on the test server, for a copy from PostgreSQL to PostgreSQL."""
    with new_pg_database(postgres_server) as url:
        yield url


async def test_postgresql_to_postgresql_and_sqlite_to_sqlite(source, pg_database, second_pg_database, tmp_path):
    await copy_mesh(source, pg_database)
    async with opened(pg_database) as service:
        expected = await answers(service)
    await copy_mesh(pg_database, second_pg_database)
    async with opened(second_pg_database) as service:
        assert await answers(service) == expected, "the same backend answers identically, search included"
    assert await rows_of(second_pg_database) == await rows_of(pg_database)

    async with opened(source) as service:
        expected = await answers(service)
    copy = str(tmp_path / "copy.db")
    await copy_mesh(source, copy)
    async with opened(copy) as service:
        assert await answers(service) == expected
    assert await rows_of(copy) == await rows_of(source)


async def test_a_second_copy_changes_nothing(source, pg_database, tmp_path):
    await copy_mesh(source, pg_database)
    before = await rows_of(pg_database)
    again = await copy_mesh(source, pg_database)
    assert not again.changed and again.summary().endswith("(nothing to change)")
    assert await rows_of(pg_database) == before

    back = str(tmp_path / "back.db")
    await copy_mesh(pg_database, back)
    assert (await copy_mesh(pg_database, back)).summary().endswith("(nothing to change)")


async def test_the_copy_goes_on_where_the_source_went_on(source, tmp_path, make_doc):
    """A target copied earlier takes the source's later writes: new rows, and moved current versions."""
    target = str(tmp_path / "target.db")
    await copy_mesh(source, target)
    async with opened(source) as service:
        base = (await service.articles.read_article(OPEN)).body["revision"]
        await service.articles.patch_article(OPEN, base_revision=base, ops=[{"op": "set", "path": "/title", "value": "Frobnicator"}],
                                    agent=None, summary="shorter", actor=BEN)
        await service.creation.create_node(make_doc(id="python/copy-later", error="ModuleNotFoundError: No module named 'copytest_later'"))
        expected = await answers(service)
    later = await copy_mesh(source, target)
    assert later.copied["nodes"] == 1 and later.updated["nodes"] >= 1 and later.reindexed == 2
    async with opened(target) as service:
        assert await answers(service) == expected
        assert (await service.searching.search("Frobnicator"))["results"][0]["id"] == OPEN


@pytest.mark.slow
async def test_a_big_copy_indexes_in_a_process_pool_exactly_as_a_small_one(source, tmp_path, make_doc, monkeypatch):
    """Past PARALLEL_FROM nodes a copy's index rows come from worker processes, a page at a time,
    while the copy writes the pages already indexed: the index is the one indexing in-process writes."""
    serial, parallel = str(tmp_path / "serial.db"), str(tmp_path / "parallel.db")
    await copy_mesh(source, serial)
    pooled_pages = []
    pooled = importing.pooled

    async def counting(chunks, task):
        async for result in pooled(chunks, task):
            pooled_pages.append(len(result[1]))
            yield result

    monkeypatch.setattr(importing, "PARALLEL_FROM", 1)
    monkeypatch.setattr(copying, "PAGE", 40)
    monkeypatch.setattr(importing, "pooled", counting)
    first = await copy_mesh(source, parallel)
    assert len(pooled_pages) > 3 and sum(pooled_pages) == first.reindexed == first.copied["nodes"]
    assert index_of(parallel) == index_of(serial)

    async with opened(source) as service:  # moved nodes are reindexed in the pool too
        await edit(service, OPEN, "/title", "Frobnicator refuses", BEN)
        await service.creation.create_node(make_doc(id="python/copy-later", error="ModuleNotFoundError: No module named 'copytest_later'"))
        expected = await answers(service)
    pooled_pages.clear()
    assert (await copy_mesh(source, parallel)).reindexed == 2 and pooled_pages == [1, 1]
    monkeypatch.undo()
    await copy_mesh(source, serial)
    assert index_of(parallel) == index_of(serial)
    async with opened(parallel) as service:
        assert await answers(service) == expected


async def test_a_target_holding_another_mesh_is_refused_and_left_alone(source, tmp_path, pg_database, make_doc):
    for target in (str(tmp_path / "other.db"), pg_database):
        async with opened(target) as service:
            await service.creation.create_node(make_doc(id=NODE, error=NODE_ERROR), agent={"id": "someone-else"})  # another history
        before = await rows_of(target)
        with pytest.raises(KnowmeshError) as refused:
            await copy_mesh(source, target)
        assert refused.value.code == "copy_refused" and "different mesh" in refused.value.message
        assert f"node {NODE!r} has another history there" in refused.value.message
        assert "Nothing was written" in refused.value.message
        assert await rows_of(target) == before


async def test_the_starter_corpus_of_a_separately_seeded_target_is_another_mesh(source, tmp_path):
    target = str(tmp_path / "seeded.db")
    async with opened(target, seed=True):
        pass
    with pytest.raises(KnowmeshError, match="different mesh"):
        await copy_mesh(source, target)


async def test_the_copy_of_a_mesh_without_a_starter_corpus_never_gets_one(tmp_path, pg_database, make_doc):
    """A mesh made before `starter_corpus` existed has no such key: its copy (a new database, its
    starter corpus pending) must not be seeded by the first service that opens it."""
    old = str(tmp_path / "old.db")
    async with opened(old) as service:
        await service.creation.create_node(make_doc(id=NODE, error=NODE_ERROR))
    with sqlite3.connect(old) as connection:
        connection.execute("DELETE FROM meta WHERE key = 'starter_corpus'")
    for target in (pg_database, str(tmp_path / "copy.db")):
        await copy_mesh(old, target)
        async with opened(target, seed=True) as service:
            assert await service.store.count_nodes() == 1


async def test_a_missing_source_or_the_same_database_twice_is_refused(source, tmp_path):
    with pytest.raises(KnowmeshError, match="no such database file"):
        await copy_mesh(str(tmp_path / "missing.db"), str(tmp_path / "t.db"))
    assert not (tmp_path / "missing.db").exists() and not (tmp_path / "t.db").exists()
    with pytest.raises(KnowmeshError, match="same database"):
        await copy_mesh(source, source)


async def test_progress_is_shown_on_a_terminal_only(source, tmp_path):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    await copy_mesh(source, str(tmp_path / "a.db"), progress=progress_bar(screen))
    shown = screen.getvalue().split("\r")
    assert shown[-1].startswith("[" + "#" * 30 + "]") and len(shown) > 2
    assert progress_bar(io.StringIO()) is None  # piped: no bar, nothing extra


@pytest.mark.slow
async def test_a_big_copy_into_sqlite_merges_each_search_table_into_one_segment(tmp_path, make_doc):
    """A copy writes its target's index in one transaction, and FTS5 flushes a segment each megabyte:
    800 nodes of 300 words each left 7, 10 and 10 segments before the copy ran inside `bulk_import`."""
    words = [f"w{i:05d}" for i in range(20_000)]
    documents = []
    for i in range(800):
        document = make_doc(id=f"python/long-{i}", error=f"KeyError: 'long{i}'")
        document["content"]["context"] = " ".join(words[(i * 7919 + j * 104_729) % len(words)] for j in range(300))
        documents.append((f"{i}.json", document))
    service = await Mesh.open(tmp_path / "source.db", seed=False)
    try:
        assert len((await service.documents.import_documents(documents)).created) == 800
    finally:
        await service.close()
    await copy_mesh(str(tmp_path / "source.db"), str(tmp_path / "target.db"))
    assert [fts5_segments(tmp_path / "target.db", table) for table in SEARCH_TABLES] == [1, 1, 1]
    copied = await Mesh.open(tmp_path / "target.db", seed=False)
    try:
        assert (await copied.searching.search("KeyError: 'long417'"))["results"][0]["id"] == "python/long-417"
    finally:
        await copied.close()
