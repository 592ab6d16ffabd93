"""Outcome evidence: the replay rules (property-tested), scores, and the whole loop through the
service, HTTP and MCP: verified, known-failed and hidden, disputed, cleared, and revisions."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.core.evidence import Report, replay, score, wilson_lower_bound
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

pytestmark = pytest.mark.backends("sqlite", "postgres")

NODE = "python/module-not-found-venv"
MAC = {"os": "macos-15", "runtime": "python-3.12", "pkg_manager": "pip"}
MAC_ENV = "macos-15,python-3.12,pip"

reports = st.lists(
    st.builds(
        Report,
        outcome=st.sampled_from(["solved", "failed", "env_mismatch", "dangerous"]),
        agent_id=st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d"])),
        created_at=st.sampled_from(["2026-01-01T00:00:00.000000Z", "2026-01-02T00:00:00.000000Z",
                                    "2026-01-03T00:00:00.000000Z"]),
    ),
    max_size=12,
)


# -- the replay ----------------------------------------------------------------------------------

def at(day: int) -> str:
    return f"2026-01-{day:02d}T00:00:00.000000Z"


def test_the_lifecycle_of_one_answer_in_one_cluster():
    history = [Report("solved", "a", at(1)), Report("solved", "b", at(2))]
    assert replay(history).answer_state == "verified"
    history += [Report("failed", "c", at(3))]
    assert (replay(history).failure_state, replay(history).answer_state) == ("reported_failed", "draft")
    history += [Report("failed", "c", at(4))]  # the same agent again is not a second vote
    assert replay(history).failure_state == "reported_failed"
    history += [Report("env_mismatch", "d", at(5))]  # never a failure
    assert replay(history).failure_state == "reported_failed"
    history += [Report("dangerous", "d", at(6))]
    assert (replay(history).failure_state, replay(history).failed_agents) == ("known_failed", 2)
    history += [Report("solved", "e", at(7))]
    assert (replay(history).failure_state, replay(history).answer_state) == ("disputed", "disputed")
    history += [Report("solved", "f", at(8))]
    assert (replay(history).failure_state, replay(history).answer_state) == ("cleared", "verified")
    history += [Report("failed", "g", at(9))]
    assert replay(history).failure_state == "reported_failed"


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(reports, st.randoms())
def test_replay_does_not_depend_on_the_order_of_simultaneous_reports(history, rng):
    shuffled = list(history)
    rng.shuffle(shuffled)
    assert replay(shuffled) == replay(history)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(reports, st.data())
def test_duplicate_reports_never_change_the_state(history, data):
    if not history:
        return
    repeated = data.draw(st.sampled_from(history))
    assert replay([*history, repeated]) == replay(history)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.builds(Report, outcome=st.sampled_from(["solved", "failed", "dangerous", "env_mismatch"]),
                          agent_id=st.none(), created_at=st.sampled_from([at(1), at(2), at(3)])), max_size=20))
def test_anonymous_reports_never_reach_known_failed(history):
    state = replay(history)
    assert state.failure_state != "known_failed" and state.answer_state != "verified"


def test_score_is_a_wilson_bound_with_prior_and_half_life():
    now = datetime(2026, 7, 1, tzinfo=UTC)
    assert score([], now).success_score == round(wilson_lower_bound(2, 3), 4)
    fresh = score([Report("solved", "a", "2026-07-01T00:00:00.000000Z")] * 3, now)
    old = score([Report("solved", "a", "2025-07-01T00:00:00.000000Z")] * 3, now)
    assert fresh.solved == 3.0 and 0.72 < old.solved < 0.75  # 3 x 0.5 ** (365 / 180)
    assert fresh.success_score > old.success_score
    dangerous = score([Report("dangerous", "a", "2026-07-01T00:00:00.000000Z")], now)
    assert dangerous.failed == 3.0 and dangerous.success_score < score([], now).success_score
    assert fresh.low_confidence is False and score([Report("solved", "a", "2026-07-01T00:00:00.000000Z")], now).low_confidence
    assert old.stale is False and score([Report("solved", "a", "2025-01-01T00:00:00.000000Z")], now).stale


# -- the loop through the service ----------------------------------------------------------------

@pytest.fixture
async def node(service: Mesh, make_doc) -> Mesh:
    await service.creation.create_node(make_doc())
    return service


def report(outcome: str, agent: str | None, **extra) -> dict:
    body = {"node": NODE, "solution": "venv-macos", "outcome": outcome, "env": MAC,
            "agent": {"id": agent} if agent else None}
    if outcome == "solved":
        body["evidence"] = {"verify": ".venv/bin/python -c 'import requests'", "exit_code": 0}
    if outcome in ("failed", "dangerous"):
        body["reason"] = "import still fails"
    return {**body, **extra}


async def read_mac(service: Mesh) -> dict:
    return (await service.nodes.read_node(NODE, service.nodes.read_request(env=MAC_ENV))).body


@pytest.mark.anyio
async def test_verified_then_known_failed_then_disputed_then_cleared(node: Mesh):
    for agent in ("s1", "s2"):
        await node.outcomes.report_outcome(report("solved", agent))
    assert (await read_mac(node))["answer_state"] == "verified"

    first = await node.outcomes.report_outcome(report("failed", "f1"))
    assert first["failure_state"] == "reported_failed" and "next" not in first
    second = await node.outcomes.report_outcome(report("failed", "f2"))
    assert second["failure_state"] == "known_failed" and second["next"]["report_failed_solution"]["tool"] == "report_outcome"

    blocked = await read_mac(node)
    assert blocked["content"]["solutions"] == [] and blocked["no_known_working_solution"] is True
    assert blocked["failed_solutions"] == [{"solution": "venv-macos", "revision": 1, "environment": "macos|python-3|pip",
                                            "state": "known_failed", "failed_agents": 2, "solved_agents": 2}]
    assert blocked["next"]["patch_article"]["body"]["ops"][0]["path"] == "/content/solutions/venv-macos/fix"
    assert blocked["next"]["patch_article"]["body"]["base_revision"] == 1
    assert blocked["next"]["candidate_state"] == "draft"
    assert "No usable answer for this environment." in (await node.nodes.read_node(NODE, node.nodes.read_request(env=MAC_ENV))).markdown()
    found = (await node.searching.search("ModuleNotFoundError: No module named 'requests'", env=MAC_ENV))["results"][0]
    assert found["id"] == NODE and found["solution"] is None and found["failed_solutions"][0]["state"] == "known_failed"
    # Another cluster is not affected.
    linux = await node.nodes.read_node(NODE, node.nodes.read_request(env="ubuntu-24.04,python-3.12,pip"))
    assert [s["id"] for s in linux.body["content"]["solutions"]] == ["venv-linux"]

    disputed = await node.outcomes.report_outcome(report("solved", "s3"))
    assert disputed["failure_state"] == "disputed" and disputed["next"]["reason"] == "disputed_answer"
    shown = await read_mac(node)
    assert shown["content"]["solutions"][0]["evidence"] == {"failure_state": "disputed", "solved_agents": 3,
                                                           "failed_agents": 2, "cluster": "macos|python-3|pip"}
    cleared = await node.outcomes.report_outcome(report("solved", "s4"))
    assert (cleared["failure_state"], cleared["answer_state"]) == ("cleared", "verified")
    assert [s["id"] for s in (await read_mac(node))["content"]["solutions"]] == ["venv-macos"]


@pytest.mark.anyio
async def test_a_new_fix_starts_clean_while_a_title_edit_keeps_the_failure(node: Mesh):
    for agent in ("f1", "f2"):
        await node.outcomes.report_outcome(report("failed", agent))
    retitled = await node.articles.patch_article(NODE, base_revision=1, agent={"id": "e"}, summary="title",
                                        ops=[{"op": "set", "path": "/content/solutions/venv-macos/title", "value": "New"}])
    assert retitled["solutions"]["venv-macos"] == 1
    assert (await read_mac(node))["no_known_working_solution"] is True  # still attached
    fixed = await node.articles.patch_article(NODE, base_revision=2, agent={"id": "e"}, summary="new fix", ops=[
        {"op": "set", "path": "/content/solutions/venv-macos/fix/0", "value": "/opt/homebrew/bin/python3 -m venv .venv"}])
    assert fixed["solutions"]["venv-macos"] == 2
    fresh = await read_mac(node)
    assert [(s["id"], s["revision"], s["answer_state"]) for s in fresh["content"]["solutions"]] == [("venv-macos", 2, "draft")]
    again = await node.outcomes.report_outcome(report("failed", "f1"))  # the same agent may judge the new revision
    assert (again["revision"], again["failure_state"]) == (2, "reported_failed")


@pytest.mark.anyio
async def test_report_validation(node: Mesh):
    async def refused(body: dict, status: int, code: str) -> None:
        with pytest.raises(KnowmeshError) as caught:
            await node.outcomes.report_outcome(body)
        assert (caught.value.status, caught.value.code) == (status, code), caught.value.to_body()

    await refused(report("solved", "a", evidence={"exit_code": 1}), 400, "invalid_feedback")
    await refused(report("solved", "a", evidence={}), 400, "invalid_feedback")
    await refused(report("failed", "a", reason=None), 400, "invalid_feedback")
    await refused(report("failed", None), 400, "invalid_feedback")
    await refused(report("failed", "a", env={}), 400, "invalid_feedback")
    await refused(report("dangerous", "a", reason=" "), 400, "invalid_feedback")
    await refused(report("maybe", "a"), 400, "invalid_outcome")
    await refused(report("solved", "a", node="python/nope"), 404, "node_not_found")
    await refused(report("solved", "a", solution="nope"), 404, "solution_not_found")
    await refused(report("solved", "a", revision=7), 404, "revision_not_found")
    await refused(report("solved", "a", node_version="sha256:" + "0" * 64), 404, "version_not_found")
    await node.outcomes.report_outcome(report("solved", "a"))
    await refused(report("solved", "a"), 409, "duplicate_report")
    anonymous = await node.outcomes.report_outcome(report("solved", None))
    assert anonymous["anonymous"] is True


@pytest.mark.anyio
async def test_stats_on_reads(node: Mesh):
    before = (await read_mac(node))["stats"]
    assert before["sample_size"] == 0 and before["stale"] is True and before["success_score"] > 0
    await node.outcomes.report_outcome(report("solved", "a"))
    after = (await read_mac(node))["stats"]
    assert after["sample_size"] == 1 and after["stale"] is False and after["success_score"] > before["success_score"]
    assert after["last_verified"] is not None


@pytest.mark.anyio
async def test_feedback_over_http_and_mcp(node: Mesh, mcp_connect):
    app = build_app(service=node, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        accepted = await client.post("/v1/feedback", json=report("failed", "f1"))
        assert accepted.status_code == 202 and accepted.json()["failure_state"] == "reported_failed"
        anonymous = await client.post("/v1/feedback", json=report("solved", None))
        assert anonymous.status_code == 202
        bad = await client.post("/v1/feedback", json=report("solved", "x", evidence={"exit_code": 2}))
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "evidence.exit_code"
        assert (await client.post("/v1/feedback", json=report("failed", "f1"))).status_code == 409
    async with node.store.write() as tx:  # the address hash is never served: read the row itself
        rows = await tx._all("SELECT agent_id, ip_hash FROM feedback ORDER BY id")
    assert rows[0][1] is None and rows[1][0] is None
    assert rows[1][1] and "127.0.0.1" not in rows[1][1] and len(rows[1][1]) == 64  # keyed hash, never the address
    async with mcp_connect(node, mode="legacy") as client:
        result = await client.call_tool("report_outcome", {"node": NODE, "solution": "venv-macos", "outcome": "failed",
                                                           "env": MAC, "reason": "still fails", "agent": {"id": "f2"}})
        assert not result.is_error and result.structured_content["failure_state"] == "known_failed"
        assert result.structured_content["next"]["patch_article"]["tool"] == "patch_article"
        wrong = await client.call_tool("report_outcome", {"node": NODE, "solution": "venv-macos", "outcome": "solved", "env": MAC})
        assert wrong.is_error and json.loads(wrong.content[0].text)["error"]["code"] == "invalid_feedback"


# -- failed attempts ----------------------------------------------------------------------------

def attempt(**extra) -> dict:
    return {"environment": {"os": "windows-11", "runtime": "python-3.12", "pkg_manager": "pip"},
            "summary": "Reinstalled with the system pip.", "steps": ["pip install requests", "python app.py"],
            "reason": "Installed into another interpreter.", "agent": {"id": "agent-w"}, **extra}


@pytest.mark.anyio
async def test_failed_attempts_while_no_answer_applies_then_archived_by_one(node: Mesh):
    refused = pytest.raises(KnowmeshError)
    with refused as caught:
        await node.failures.report_failed_attempt(NODE, attempt(environment=MAC))
    assert (caught.value.status, caught.value.code) == (409, "answer_exists")
    assert caught.value.details["solution"] == "venv-macos"

    accepted = await node.failures.report_failed_attempt(NODE, attempt())
    assert accepted["archived"] is False
    windows = (await node.nodes.read_node(NODE, node.nodes.read_request(env="windows-11,python-3.12"))).body
    assert [f["summary"] for f in windows["failures"]] == ["Reinstalled with the system pip."]
    assert "failures" not in (await read_mac(node))  # a usable answer: no dead ends shown

    answer = {"id": "venv-windows", "env": ["windows"], "fix": ["py -m venv .venv", r".venv\Scripts\python -m pip install requests"],
              "verify": {"command": r'.venv\Scripts\python -c "import requests"'}}
    edit = await node.articles.patch_article(NODE, base_revision=1, agent={"id": "agent-w"}, summary="Windows answer",
                                    ops=[{"op": "set", "path": "/content/solutions/-", "value": answer}])
    listed = (await node.failures.list_failures(NODE))["failures"]
    assert listed[0]["archived"] is True and listed[0]["archived_by_revision"] == edit["revision_id"]
    plain = (await node.nodes.read_node(NODE, node.nodes.read_request(env="windows-11,python-3.12"))).body
    assert "failures" not in plain
    restored = (await node.nodes.read_node(NODE, node.nodes.read_request(env="windows-11", include="archived_failures"))).body
    assert restored["failures"][0]["archived"] is True

    for bad in (attempt(steps=[]), attempt(summary=" "), attempt(environment={}), attempt(reason=None), [1]):
        with pytest.raises(KnowmeshError) as caught:
            await node.failures.report_failed_attempt(NODE, bad)
        assert caught.value.status == 400


@pytest.mark.anyio
async def test_failures_and_rate_limit_over_http(node: Mesh):
    app = build_app(service=node, with_mcp=False, write_limit=3)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        posted = await client.post(f"/v1/nodes/{NODE}/failures", json=attempt())
        assert posted.status_code == 202, posted.text
        listed = await client.get(f"/v1/nodes/{NODE}/failures")
        assert listed.status_code == 200 and len(listed.json()["failures"]) == 1
        # Refused input never uses up the allowance; accepted submissions do.
        for _ in range(5):
            assert (await client.post("/v1/feedback", json=report("solved", "agent-w", evidence={}))).status_code == 400
        assert (await client.post("/v1/feedback", json=report("solved", "agent-w"))).status_code == 202
        third = report("failed", "agent-w", solution="venv-linux", env={"os": "linux"})
        assert (await client.post("/v1/feedback", json=third)).status_code == 202
        limited = await client.post("/v1/feedback", json=report("solved", "agent-w", solution="venv-linux",
                                                                env={"os": "ubuntu-22.04", "runtime": "python-3.11"}))
        assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
        other_agent = await client.post("/v1/feedback", json=report("failed", "agent-z"))
        assert other_agent.status_code == 202


@pytest.mark.anyio
async def test_simultaneous_submissions_never_pass_the_write_limit(node: Mesh):
    """The allowance is counted in each submission's own transaction: twelve reports of one agent
    at once under a limit of 3 store exactly 3 (a check before the write and a count after it let
    every one of them pass the check)."""
    import asyncio

    app = build_app(service=node, with_mcp=False, write_limit=3)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        answers = await asyncio.gather(*(
            client.post("/v1/feedback", json=report("failed", "agent-burst", env={"os": "linux", "runtime": f"python-{n + 1}"}))
            for n in range(12)))
        stored = (await client.get(f"/v1/nodes/{NODE}/feedback")).json()["feedback"]
    assert sorted(a.status_code for a in answers) == [202] * 3 + [429] * 9
    assert len(stored) == 3


async def refuse_write_counts(service: Mesh) -> Callable[[], None]:
    """A database fault at the last statement of a submission: the write counter's table refuses
    rows (a trigger), as a full disk or a lost connection would at that moment. Returns the undo."""
    if service.store.shared:
        import psycopg

        url = service.store.url  # type: ignore[attr-defined]
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                               "$$ BEGIN RAISE EXCEPTION 'refused'; END $$")
            connection.execute("CREATE TRIGGER refuse BEFORE INSERT ON write_counts FOR EACH ROW EXECUTE FUNCTION refuse()")

        def undo() -> None:
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute("DROP TRIGGER refuse ON write_counts")
        return undo
    import sqlite3

    with sqlite3.connect(service.store.path) as connection:
        connection.execute("CREATE TRIGGER refuse BEFORE INSERT ON write_counts BEGIN SELECT RAISE(ABORT, 'refused'); END")

    def undo_sqlite() -> None:
        with sqlite3.connect(service.store.path) as connection:
            connection.execute("DROP TRIGGER refuse")
    return undo_sqlite


@pytest.mark.anyio
async def test_a_submission_that_fails_to_commit_stores_nothing_and_its_retry_is_accepted(node: Mesh):
    """An error answer means nothing written: the count is part of the report's transaction. It was
    a second transaction after the report committed, so a fault there answered a stored report
    with a 500, and the retry with 409 duplicate_report."""
    app = build_app(service=node, with_mcp=False, write_limit=10)
    undo = await refuse_write_counts(node)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app, raise_app_exceptions=False),
                                  base_url="http://127.0.0.1") as client:
        failed = await client.post("/v1/feedback", json=report("failed", "agent-fault"))
        assert failed.status_code == 500 and failed.json()["error"]["code"] == "internal_error"
        assert (await client.get(f"/v1/nodes/{NODE}/feedback")).json()["feedback"] == [], "nothing written"
        undo()
        retried = await client.post("/v1/feedback", json=report("failed", "agent-fault"))
        assert retried.status_code == 202, retried.text


# -- review queue -------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_review_queue_orders_reasons_and_carries_requests(node: Mesh, make_doc, mcp_connect):
    open_problem = make_doc(id="python/open-one", error="RuntimeError: zq open problem")
    open_problem["content"]["solutions"] = []
    await node.creation.create_node(open_problem)
    for agent in ("f1", "f2"):
        await node.outcomes.report_outcome(report("failed", agent))
    await node.outcomes.report_outcome(report("solved", "s1", solution="venv-linux", env={"os": "linux", "runtime": "python-3.12"}))
    queue = await node.review.review_queue(limit=10)
    reasons = [item["reason"] for item in queue["items"]]
    assert reasons[:2] == ["failed_answer", "unsolved"]
    assert reasons == sorted(reasons, key=queue["reasons"].index)
    failed = queue["items"][0]
    assert (failed["id"], failed["solution"], failed["revision"], failed["environment"], failed["reports"]) == \
        (NODE, "venv-macos", 1, "macos|python-3|pip", 2)
    assert failed["next"]["report_outcome"]["path"] == "/v1/feedback"
    assert failed["next"]["patch_article"]["body"]["base_revision"] == 1
    unsolved = queue["items"][1]
    assert unsolved["id"] == "python/open-one" and list(unsolved["next"]) == ["patch_article"]
    assert unsolved["next"]["patch_article"]["body"]["ops"][0]["path"] == "/content/solutions/-"
    with pytest.raises(KnowmeshError):
        await node.review.review_queue(limit=0)
    app = build_app(service=node, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        as_json = await client.get("/v1/review", params={"limit": 2})
        assert as_json.status_code == 200 and len(as_json.json()["items"]) == 2
        assert (await client.get("/v1/review", params={"limit": 500})).status_code == 400
        markdown = await client.get("/review.md")
        assert markdown.status_code == 200 and "**failed_answer**" in markdown.text
    async with mcp_connect(node, mode="auto") as client:
        result = await client.call_tool("review_queue", {"limit": 3})
        assert [i["reason"] for i in result.structured_content["items"]][:2] == ["failed_answer", "unsolved"]


# -- dedupe -------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_dedupe_votes_flag_or_close_a_pair(node: Mesh, make_doc):
    await node.creation.create_node(make_doc(id="python/requests-missing", error="ImportError: No module named requests here"))
    await node.creation.create_node(make_doc(id="python/numpy-missing", error="ImportError: numpy is gone"))
    app = build_app(service=node, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        task = (await client.post("/v1/dedupe/tasks", json={"node": "python/requests-missing", "candidate": NODE,
                                                            "agent": {"id": "a"}})).json()
        again = (await client.post("/v1/dedupe/tasks", json={"node": NODE, "candidate": "python/requests-missing"})).json()
        assert again["task_id"] == task["task_id"] and again["created"] is False
        votes = f"/v1/dedupe/tasks/{task['task_id']}/votes"
        first = await client.post(votes, json={"vote": "same", "canonical_id": NODE, "agent": {"id": "a"}})
        assert first.json()["status"] == "open"
        assert (await client.post(votes, json={"vote": "same", "canonical_id": NODE, "agent": {"id": "a"}})).status_code == 409
        flagged = await client.post(votes, json={"vote": "same", "canonical_id": NODE, "agent": {"id": "b"}})
        assert (flagged.json()["status"], flagged.json()["canonical_id"]) == ("flagged", NODE)
        assert (await node.nodes.read_node("python/requests-missing")).body["id"] == "python/requests-missing"  # never merged

        other = (await client.post("/v1/dedupe/tasks", json={"node": "python/numpy-missing", "candidate": NODE})).json()
        other_votes = f"/v1/dedupe/tasks/{other['task_id']}/votes"
        for agent in ("c", "d"):
            closed = await client.post(other_votes, json={"vote": "different", "agent": {"id": agent}})
        assert closed.json()["status"] == "closed"
        assert (await client.post(other_votes, json={"vote": "different", "agent": {"id": "e"}})).status_code == 409
        bad = await client.post(votes.replace(str(task["task_id"]), "999"), json={"vote": "same", "canonical_id": NODE,
                                                                                    "agent": {"id": "x"}})
        assert bad.status_code == 404
        assert (await client.post("/v1/dedupe/tasks", json={"node": NODE, "candidate": NODE})).status_code == 400
        assert (await client.get("/dedupe.md")).status_code == 200


# -- the whole loop, played by several agents over HTTP and over MCP ------------------------------

class HttpAgent:
    def __init__(self, client: httpx2.AsyncClient):
        self.client = client

    async def report(self, body: dict) -> dict:
        response = await self.client.post("/v1/feedback", json=body)
        assert response.status_code == 202, response.text
        return response.json()

    async def read(self) -> dict:
        return (await self.client.get(f"/v1/nodes/{NODE}", params={"env": MAC_ENV})).json()

    async def search(self, q: str) -> dict:
        return (await self.client.get("/v1/search", params={"q": q, "env": MAC_ENV})).json()


class McpAgent:
    def __init__(self, client: Client):
        self.client = client

    async def report(self, body: dict) -> dict:
        arguments = {key: value for key, value in body.items() if value is not None}
        result = await self.client.call_tool("report_outcome", arguments)
        assert not result.is_error, result.content
        return result.structured_content

    async def read(self) -> dict:
        return (await self.client.call_tool("read_article", {"id": NODE, "env": MAC_ENV, "max_bytes": 100_000})).structured_content

    async def search(self, q: str) -> dict:
        return (await self.client.call_tool("search", {"q": q, "env": MAC_ENV, "max_bytes": 100_000})).structured_content


async def play_the_loop(agent) -> None:
    for name in ("s1", "s2"):
        await agent.report(report("solved", name))
    assert (await agent.read())["answer_state"] == "verified"
    await agent.report(report("failed", "f1"))
    flipped = await agent.report(report("failed", "f2"))
    assert flipped["failure_state"] == "known_failed" and "report_failed_solution" in flipped["next"]
    hidden = await agent.read()
    assert hidden["no_known_working_solution"] is True and hidden["content"]["solutions"] == []
    top = (await agent.search("ModuleNotFoundError: No module named 'requests'"))["results"][0]
    assert top["id"] == NODE and top["solution"] is None and top["next"]["patch_article"]["tool"] == "patch_article"
    assert (await agent.report(report("solved", "s3")))["failure_state"] == "disputed"
    cleared = await agent.report(report("solved", "s4"))
    assert (cleared["failure_state"], cleared["answer_state"]) == ("cleared", "verified")
    assert [s["id"] for s in (await agent.read())["content"]["solutions"]] == ["venv-macos"]


@pytest.mark.anyio
async def test_the_loop_over_http(node: Mesh):
    app = build_app(service=node, with_mcp=False, write_limit=0)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        await play_the_loop(HttpAgent(client))


@pytest.mark.anyio
async def test_the_loop_over_mcp(node: Mesh, mcp_connect):
    async with mcp_connect(node, mode="legacy") as client:
        await play_the_loop(McpAgent(client))
