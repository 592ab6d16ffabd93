"""`sync --from URL`: a personal mesh pulling a team mesh over real HTTP, two servers in one test."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import AsyncIterator

import anyio
import httpx2
import pytest
from conftest import new_pg_database, opened, serving
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from knowmesh_mcp.cli.output import progress_bar
from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.core.identity import Actor
from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

AGENT = {"id": "team-agent"}
LOCAL = {"id": "my-agent"}


@pytest.fixture
async def team(service) -> Mesh:
    """The team's mesh, on each backend (conftest's `service`): the personal mesh syncs from either alike."""
    return service


@pytest.fixture
async def team_url(team) -> AsyncIterator[str]:
    async with serving(build_app(service=team, write_limit=0)) as url:
        yield url


@pytest.fixture
async def personal(tmp_path) -> AsyncIterator[Mesh]:
    async with opened(tmp_path / "personal.db") as service:
        yield service


def node(make_doc, n: int) -> dict:
    return make_doc(id=f"python/team-{n}", error=f"ModuleNotFoundError: No module named 'team_pkg_{n}'",
                    title=f"Team problem {n}")


async def edit(service: Mesh, node_id: str, path: str, value, agent=AGENT) -> dict:
    base = (await service.articles.read_article(node_id)).body["revision"]
    return await service.articles.patch_article(node_id, base_revision=base, ops=[{"op": "set", "path": path, "value": value}],
                                       agent=agent, summary=f"set {path}")


async def history(service: Mesh, node_id: str) -> list[dict]:
    return (await service.articles.article_history(node_id, include="documents"))["revisions"]


async def test_a_personal_mesh_mirrors_the_team_and_a_second_sync_changes_nothing(team, team_url, personal, make_doc):
    for n in range(3):
        await team.creation.create_node(node(make_doc, n), agent=AGENT)
    await edit(team, "python/team-1", "/title", "Team problem 1, clearer")
    await personal.creation.create_node(make_doc(id="python/mine-only", error="ModuleNotFoundError: No module named 'mine'"),
                               agent=LOCAL)

    first = await personal.sync.sync_from(team_url)
    assert sorted(first.created) == ["python/team-0", "python/team-1", "python/team-2"] and not first.conflicts
    for n in range(3):
        assert await history(personal, f"python/team-{n}") == await history(team, f"python/team-{n}")
        mine, theirs = (await personal.nodes.read_node(f"python/team-{n}")).body, (await team.nodes.read_node(f"python/team-{n}")).body
        assert (mine["version"], mine["revision"], mine["created_at"]) == (theirs["version"], theirs["revision"], theirs["created_at"])
    found = await personal.searching.search("ModuleNotFoundError: No module named 'team_pkg_2'")
    assert found["results"][0]["id"] == "python/team-2", "synced nodes are searchable at once"
    assert (await personal.nodes.read_node("python/mine-only")).body["revision"] == 1, "local-only nodes are untouched"

    exported = [d async for d in personal.documents.export_documents()]
    second = await personal.sync.sync_from(team_url)
    assert (second.created, second.updated, second.unchanged, second.conflicts) == ([], [], 0, [])
    assert second.cursor == first.cursor
    assert [d async for d in personal.documents.export_documents()] == exported

    await edit(team, "python/team-2", "/content/symptom", "Edited on the team after the first sync.")
    await team.creation.create_node(node(make_doc, 3), agent=AGENT)
    third = await personal.sync.sync_from(team_url)
    assert (third.updated, third.created) == (["python/team-2"], ["python/team-3"]), "only what changed since the cursor"

    async with serving(build_app(service=personal)) as personal_url:  # the second server: the personal mesh
        async with httpx2.AsyncClient(timeout=10) as client:
            for n in range(4):
                path = f"/v1/nodes/python/team-{n}"
                mine, theirs = await client.get(personal_url + path), await client.get(team_url + path)
                assert mine.headers["x-knowmesh-node-version"] == theirs.headers["x-knowmesh-node-version"]
                assert mine.headers["x-knowmesh-article-revision"] == theirs.headers["x-knowmesh-article-revision"]
                revisions = [await client.get(url + path + "/article/revisions", params={"include": "documents"})
                             for url in (personal_url, team_url)]
                assert revisions[0].json()["revisions"] == revisions[1].json()["revisions"]


async def test_an_interrupted_sync_resumes_from_its_saved_cursor(team, team_url, personal, make_doc):
    for n in range(5):
        await team.creation.create_node(node(make_doc, n), agent=AGENT)

    class Stop(Exception):
        pass

    def stop_at_third(done: int, total: int) -> None:
        assert total == 5
        if done == 3:
            raise Stop

    with pytest.raises(Stop):
        await personal.sync.sync_from(team_url, progress=stop_at_third, page_size=2)
    # The first page landed with its cursor; the interrupted second page left nothing half written.
    assert await personal.store.count_nodes() == 2
    resumed = await personal.sync.sync_from(team_url, page_size=2)
    assert resumed.created == ["python/team-2", "python/team-3", "python/team-4"]
    assert resumed.unchanged == 0, "the first page is not read again"
    assert await personal.store.count_nodes() == 5
    assert [len(await personal.store.revisions(f"python/team-{n}")) for n in range(5)] == [1] * 5


async def test_a_personal_mesh_on_postgres_syncs_a_page_at_a_time_as_one_on_sqlite(team, team_url, postgres_server, make_doc):
    for n in range(5):
        await team.creation.create_node(node(make_doc, n), agent=AGENT)
    await team.outcomes.report_outcome({"node": "python/team-4", "solution": "venv-macos", "outcome": "solved",
                               "env": {"os": "macos"}, "evidence": {"exit_code": 0}}, actor=Actor("team-a", "claimed"))

    def stop_at_third(done: int, total: int) -> None:
        if done == 3:
            raise KeyboardInterrupt

    with new_pg_database(postgres_server) as url:
        async with opened(url) as personal:
            with pytest.raises(KeyboardInterrupt):
                await personal.sync.sync_from(team_url, progress=stop_at_third, page_size=2)
            assert await personal.store.count_nodes() == 2, "the interrupted page left nothing half written"
            report = await personal.sync.sync_from(team_url, page_size=2)
            assert report.created == ["python/team-2", "python/team-3", "python/team-4"] and report.evidence == 1
            for n in range(5):
                assert await history(personal, f"python/team-{n}") == await history(team, f"python/team-{n}")
            found = await personal.searching.search("ModuleNotFoundError: No module named 'team_pkg_3'")
            assert found["results"][0]["id"] == "python/team-3", "a page's index rows are written with it"
            again = await personal.sync.sync_from(team_url)
            assert (again.created, again.updated, again.evidence) == ([], [], 0)


async def test_edits_on_both_sides_keep_the_local_edit_on_top_and_report_it(team, team_url, personal, make_doc):
    await team.creation.create_node(node(make_doc, 0), agent=AGENT)
    await personal.sync.sync_from(team_url)
    await edit(personal, "python/team-0", "/title", "My local title", agent=LOCAL)
    await edit(personal, "python/team-0", "/content/root_cause", "My local root cause.", agent=LOCAL)
    await edit(team, "python/team-0", "/content/symptom", "Team symptom.")
    await edit(team, "python/team-0", "/content/root_cause", "Team root cause.")

    report = await personal.sync.sync_from(team_url)
    [conflict] = report.conflicts
    assert conflict["base_revision"] == 1 and conflict["remote_revision"] == 3 and conflict["moved_revisions"] == [2, 3]
    assert conflict["both_changed"] == ["/content/root_cause"] and conflict["kept_revision"] == 4

    mine = await history(personal, "python/team-0")
    assert mine[:3] == await history(team, "python/team-0"), "the team's revisions, identical, under their numbers"
    assert mine[3]["kind"] == "sync" and mine[3]["agent"]["id"] == LOCAL["id"] and "both changed" in mine[3]["summary"]
    current = (await personal.nodes.read_node("python/team-0")).body
    assert current["title"] == "My local title" and current["content"]["root_cause"] == "My local root cause."
    assert current["content"]["symptom"] == "Team symptom.", "the team's other change is kept too"
    [stored] = await personal.store.sync_conflicts("python/team-0")
    assert [r["document"]["title"] for r in stored["local_revisions"]] == ["My local title", "My local title"]

    again = await personal.sync.sync_from(team_url)
    assert again.conflicts == [] and again.updated == [], "a kept local edit is not a new conflict until the team moves"


async def test_a_mesh_seeded_alike_shares_its_first_revisions(tmp_path, make_doc):
    async with opened(tmp_path / "team-seeded.db", seed=True) as team, \
            opened(tmp_path / "personal-seeded.db", seed=True) as personal:  # both get the starter corpus
        async with serving(build_app(service=team, write_limit=0)) as url:
            report = await personal.sync.sync_from(url)
        assert (report.created, report.updated, report.conflicts) == ([], [], [])
        assert report.unchanged == await team.store.count_nodes()


async def test_history_with_documents_over_http(team, team_url, make_doc):
    await team.creation.create_node(node(make_doc, 0), agent=AGENT)
    await edit(team, "python/team-0", "/title", "Second title")
    async with httpx2.AsyncClient(base_url=team_url, timeout=10) as client:
        later = await client.get("/v1/nodes/python/team-0/article/revisions", params={"after": 1, "include": "documents"})
        bad = await client.get("/v1/nodes/python/team-0/article/revisions", params={"include": "secrets"})
        changes = await client.get("/v1/changes", params={"limit": 1})
        await client.post("/v1/feedback", json=failed_on_mac("team-a"))
        feedback = await client.get("/v1/nodes/python/team-0/feedback")
        bad_after = await client.get("/v1/nodes/python/team-0/feedback", params={"after": "x"})
        missing = await client.get("/v1/nodes/python/nope/feedback")
    assert later.status_code == 200
    [revision] = later.json()["revisions"]
    assert revision["revision"] == 2 and revision["document"]["title"] == "Second title"
    assert revision["solution_revisions"] == {"venv-macos": 1, "venv-linux": 1}
    assert bad.status_code == 400
    assert changes.json()["remaining"] == 0 and changes.json()["has_more"] is False
    [row] = feedback.json()["feedback"]
    assert row["agent_id"] == "team-a" and row["outcome"] == "failed" and "ip_hash" not in row
    assert feedback.json()["next_after"] == row["id"] and feedback.json()["has_more"] is False
    assert bad_after.status_code == 400 and missing.status_code == 404


async def test_cli_sync_prints_a_summary_and_a_second_run_changes_nothing(team, team_url, make_doc, tmp_path):
    await team.creation.create_node(node(make_doc, 0), agent=AGENT)
    command = [sys.executable, "-m", "knowmesh_mcp.cli.main", "sync", "--from", team_url, "--db", str(tmp_path / "cli.db"), "--empty"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    first = await anyio.run_process(command, env=env, check=False)
    assert first.returncode == 0, first.stderr
    assert first.stdout.decode().strip() == f"synced {team_url}: created 1, updated 0, unchanged 0, conflicts 0, outcome reports 0"
    assert first.stderr == b"", "no progress bar when stderr is not a terminal"
    second = await anyio.run_process([*command, "--json"], env=env, check=False)
    report = json.loads(second.stdout)
    assert (report["created"], report["updated"], report["unchanged"]) == ([], [], 0)
    mine = await Mesh.open(tmp_path / "cli.db", seed=False)
    try:
        await edit(mine, "python/team-0", "/title", "My title", agent=LOCAL)
    finally:
        await mine.close()
    await edit(team, "python/team-0", "/title", "Team title")
    conflicted = await anyio.run_process(command, env=env, check=False)
    assert conflicted.stdout.decode().splitlines() == [
        "conflict python/team-0: local revision 2 moved aside, the local edit kept as revision 3 on top of remote "
        "revision 2; both changed /title",
        f"synced {team_url}: created 0, updated 1, unchanged 0, conflicts 1, outcome reports 0",
    ]
    await team.maintenance.set_status("python/team-0", "verified", actor=Actor("mia", "token", role="maintainer"))
    promoted = await anyio.run_process(command, env=env, check=False)
    assert promoted.stdout.decode().splitlines() == [
        "status python/team-0: draft -> verified, as on the remote",
        f"synced {team_url}: created 0, updated 0, unchanged 0, conflicts 0, outcome reports 0",
    ]
    down = await anyio.run_process([*command[:5], "http://127.0.0.1:9", *command[6:]], env=env, check=False)
    assert down.returncode == 1 and b"remote_unavailable" in down.stderr


def test_progress_bar_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress_bar(io.StringIO()) is None
    screen = Terminal()
    show = progress_bar(screen)
    show(1, 4)
    show(4, 4)
    assert screen.getvalue() == "\r[#######.......................] 1/4 nodes\r[##############################] 4/4 nodes"


def failed_on_mac(agent: str) -> dict:
    return {"node": "python/team-0", "solution": "venv-macos", "outcome": "failed", "reason": "import still fails",
            "env": {"os": "macos-15", "runtime": "python-3.12", "pkg_manager": "pip"}, "agent": {"id": agent}}


async def test_team_evidence_arrives_and_a_known_failed_answer_is_withheld_here_too(team, team_url, personal, make_doc):
    await team.creation.create_node(node(make_doc, 0), agent=AGENT)
    await personal.sync.sync_from(team_url)
    mac = "macos-15,python-3.12,pip"
    assert [s["id"] for s in (await personal.nodes.read_view("python/team-0", env=mac))["content"]["solutions"]] == ["venv-macos"]

    await team.outcomes.report_outcome(failed_on_mac("team-a"))
    await team.outcomes.report_outcome(failed_on_mac("team-b"))  # two independent agents: known failed on the team
    pulled = await personal.sync.sync_from(team_url)
    assert pulled.evidence == 2 and (pulled.created, pulled.updated, pulled.unchanged) == ([], [], 0)
    mine = await personal.nodes.read_view("python/team-0", env=mac)
    assert mine["no_known_working_solution"] is True and mine["content"]["solutions"] == []
    assert mine["content"]["solutions"] == (await team.nodes.read_view("python/team-0", env=mac))["content"]["solutions"]

    with pytest.raises(KnowmeshError) as caught:
        await personal.outcomes.report_outcome(failed_on_mac("team-a"))
    assert caught.value.code == "duplicate_report", "one agent is one vote, whichever mesh it reported to"
    await team.outcomes.report_outcome({**failed_on_mac("team-a"), "env": {"os": "ubuntu-24.04"}})  # another cluster
    await personal.outcomes.report_outcome({**failed_on_mac("me"), "env": {"os": "ubuntu-24.04"}})
    again = await personal.sync.sync_from(team_url)
    assert again.evidence == 1
    history = await personal.outcomes.list_feedback("python/team-0")
    assert sorted(row["agent_id"] for row in history["feedback"]) == ["me", "team-a", "team-a", "team-b"]
    last = await personal.sync.sync_from(team_url)
    assert (last.evidence, last.unchanged) == (0, 0) and last.created == last.updated == []


async def test_a_maintainers_promotion_and_merge_on_the_team_reach_a_mesh_that_synced_before(team, team_url, personal, make_doc,
                                                                                             tmp_path, monkeypatch):
    """Neither writes a revision: the feed's status, `merged_from` and `merged_into` carry them."""
    monkeypatch.setenv("KNOWMESH_AGENT_ID", "my-agent")
    for n in range(3):
        await team.creation.create_node(node(make_doc, n), agent=AGENT)
    await personal.sync.sync_from(team_url)
    mia, alice, bob = Actor("mia", "token", role="maintainer"), Actor("alice", "token"), Actor("bob", "token")
    await team.maintenance.set_status("python/team-0", "verified", note="works everywhere", actor=mia)
    task = await team.dedupe.open_dedupe_task({"node": "python/team-1", "candidate": "python/team-2"}, actor=alice)
    for voter in (alice, bob):
        await team.dedupe.vote_dedupe(task["task_id"], {"vote": "same", "canonical_id": "python/team-2"}, actor=voter)
    await team.maintenance.confirm_merge(task["task_id"], note="one problem", actor=mia)

    report = await personal.sync.sync_from(team_url)
    assert report.statuses == [{"id": "python/team-0", "from": "draft", "to": "verified"}]
    assert report.merged == [{"id": "python/team-1", "canonical": "python/team-2"}]  # deprecated by the merge
    assert (report.created, report.updated, report.unchanged) == ([], [], 1)  # team-2's entry: merged at team-1's
    assert (await personal.nodes.read_node("python/team-0")).body["status"] == "verified"
    read = await personal.nodes.read_view("python/team-1")
    assert (read["id"], read["merged_from"]) == ("python/team-2", "python/team-1")
    found = await personal.searching.search("ModuleNotFoundError: No module named 'team_pkg_1'")
    assert "python/team-1" not in [r["id"] for r in found["results"]]
    async with serving(build_app(service=personal)) as personal_url, httpx2.AsyncClient(timeout=10) as client:
        for url in (team_url, personal_url):
            moved = await client.get(url + "/v1/nodes/python/team-1", follow_redirects=False)
            assert moved.status_code == 301 and moved.headers["location"].endswith("/v1/nodes/python/team-2")
    log = (await personal.maintenance.audit_log())["actions"]
    assert [(a["action"], a["target"], a["synced_from"], a["maintainer"]["id"]) for a in log] == [
        ("set_status", "python/team-0", team_url, "my-agent"), ("merge", "python/team-1", team_url, "my-agent")]

    again = await personal.sync.sync_from(team_url)
    assert (again.statuses, again.merged, again.unchanged) == ([], [], 0)

    async with team.store.write() as tx:  # the merged node written after the merge: the feed brings it last
        await tx.touch_node("python/team-1")
    async with opened(tmp_path / "late.db") as late:
        first = await late.sync.sync_from(team_url)
        assert first.merged == [{"id": "python/team-1", "canonical": "python/team-2"}]
        assert (await late.nodes.read_view("python/team-1"))["id"] == "python/team-2"


@pytest.mark.parametrize("merges", [{"merged_from": [123]}, {"merged_from": "python/a"}, {"merged_into": 7}])
async def test_a_feed_naming_its_merges_malformed_is_a_remote_error_and_writes_nothing(personal, merges):
    entry = {"id": "python/team-0", "change": "updated", "status": "draft", "revision": 1, "evidence_seq": 0, **merges}

    async def changes(request):
        return JSONResponse({"changes": [entry], "next_cursor": "eyJhZnRlciI6IjEifQ", "has_more": False, "remaining": 0})

    async with serving(Starlette(routes=[Route("/v1/changes", changes)])) as url:
        with pytest.raises(KnowmeshError) as refused:
            await personal.sync.sync_from(url)
    assert refused.value.status == 502 and refused.value.code == "remote_error" and "merges" in refused.value.message
    assert await personal.store.sync_cursor(url) is None

