"""The evidence loop on a team's mesh, where who reported is proven by a token.

What a user relies on: an answer is `verified`, `known_failed` (hidden from reads and from
search's `solution`), `disputed` or `cleared` only because distinct agents *proven by their own
tokens* said so. Reports without a token on a mesh with auth `optional` are kept and shown
(`proven: false`, `counted: false`) but never move any of that, whatever ids they claim.

Every test runs a real uvicorn server over a real store, with real clients: httpx2 for `/v1`,
the `mcp` package's client over streamable HTTP for `/mcp` (one connection per token, since the
token belongs to the connection).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx2
import pytest

from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

from conftest import serving
from test_evidence import MAC_ENV, NODE, HttpAgent, McpAgent, play_the_loop, report
from test_identity import bearer, mcp_client, served

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

AGENTS = ("s1", "s2", "f1", "f2", "s3", "s4")  # the logical agents of play_the_loop
ERROR = "ModuleNotFoundError: No module named 'requests'"
TRANSPORTS = ("http", "mcp")


@pytest.fixture
async def node(service: Mesh, make_doc) -> Mesh:
    await service.creation.create_node(make_doc())
    return service


async def tokens_for(service: Mesh, *agents: str) -> dict[str, str]:
    return {agent: (await service.tokens.add_token(agent))["token"] for agent in agents}


@asynccontextmanager
async def connected(url: str, transport: str, token: str | None = None) -> AsyncIterator[Any]:
    """An HttpAgent or McpAgent on the real server, sending `token` (if any) on every request."""
    if transport == "http":
        async with httpx2.AsyncClient(base_url=url, timeout=10, headers=bearer(token) if token else None) as client:
            yield HttpAgent(client)
    else:
        async with mcp_client(url, token) as client:
            yield McpAgent(client)


class Team:
    """play_the_loop's agent, played by several proven agents: each report goes out on the
    connection of the agent its body names, under that agent's token. Half the bodies name no
    one (the token says who), half name the token's own agent. Reads and searches go out on a
    connection without a token: reads are open in every auth mode."""

    NAMED = ("s2", "f2", "s4")

    def __init__(self, reader: Any, members: dict[str, Any]):
        self.reader, self.members, self.receipts = reader, members, []

    async def report(self, body: dict) -> dict:
        name = body["agent"]["id"]
        receipt = await self.members[name].report(body if name in self.NAMED else {**body, "agent": None})
        assert (receipt["proven"], receipt["counted"], receipt["anonymous"]) == (True, True, False), receipt
        self.receipts.append(receipt)
        return receipt

    async def read(self) -> dict:
        return await self.reader.read()

    async def search(self, q: str) -> dict:
        return await self.reader.search(q)


@asynccontextmanager
async def team(url: str, transport: str, tokens: dict[str, str]) -> AsyncIterator[Team]:
    async with AsyncExitStack() as stack:
        reader = await stack.enter_async_context(connected(url, transport))
        members = {name: await stack.enter_async_context(connected(url, transport, token)) for name, token in tokens.items()}
        yield Team(reader, members)


async def feedback_rows(url: str) -> list[tuple[str, str, bool]]:
    async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
        rows = (await client.get(f"/v1/nodes/{NODE}/feedback")).json()["feedback"]
    return [(row["agent_id"], row["proof"], row["proven"]) for row in rows]


async def top_result(reader: Any) -> dict:
    top = (await reader.search(ERROR))["results"][0]
    assert top["id"] == NODE
    return top


# -- proven agents: the whole loop, as on a personal mesh ------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_loop_played_by_proven_agents(node: Mesh, transport: str):
    """Six agents, each with its own token, on a mesh that requires one: two solved make the macOS
    answer verified, two failures make it known_failed and hidden from reads and search, two more
    solved dispute then clear it. Every stored report says who proved it: the token's agent."""
    tokens = await tokens_for(node, *AGENTS)
    async with serving(build_app(service=node, auth="required", write_limit=0)) as url:
        async with team(url, transport, tokens) as players:
            await play_the_loop(players)
        rows = await feedback_rows(url)
    assert [r["failure_state"] for r in players.receipts] == [
        "ok", "ok", "reported_failed", "known_failed", "disputed", "cleared"]
    assert [tuple(r["counts"].values()) for r in players.receipts] == [(0, 1), (0, 2), (1, 2), (2, 2), (2, 3), (0, 4)]
    assert rows == [(agent, "token", True) for agent in AGENTS]


# -- forged ids: kept and shown, never a vote ------------------------------------------------

FORGED = [("solved", "s1"), ("solved", "s2"), ("failed", "f1"), ("failed", "f2"),
          *[("failed", f"sybil-{n}") for n in range(1, 5)], ("solved", "s3"), ("solved", "s4")]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_forged_ids_change_nothing_a_reader_relies_on(node: Mesh, transport: str):
    """One client without a token sends the whole loop under the ids s1..s4, f1, f2 and four more
    sybils, on a mesh with auth optional. Every report is accepted and kept under its claimed id,
    marked unproven; but after each one the macOS answer is still served (never known_failed, still
    search's `solution`), never `verified`, and no count reaches the two a state change needs."""
    async with serving(build_app(service=node, auth="optional", write_limit=0)) as url:
        async with connected(url, transport) as forger:
            for outcome, claimed in FORGED:
                receipt = await forger.report(report(outcome, claimed))  # asserts 202 / no tool error
                assert (receipt["proven"], receipt["counted"]) == (False, False), receipt
                assert receipt["failure_state"] in ("ok", "reported_failed") and "next" not in receipt
                assert receipt["counts"]["failed_agents"] <= 1 and receipt["counts"]["solved_agents"] == 0
                read = await forger.read()
                assert (read["no_known_working_solution"], served(read)) == (False, "venv-macos"), claimed
                assert read["answer_state"] != "verified" and read["failed_solutions"] == []
                top = await top_result(forger)
                assert top["solution"]["id"] == "venv-macos" and top["answer_state"] != "verified"
        rows = await feedback_rows(url)
    assert rows == [(claimed, "unproven", False) for _, claimed in FORGED], "kept and shown under the claimed id"


async def test_a_token_cannot_carry_someone_elses_id(node: Mesh):
    """alice's token with a body naming sybil-1 is refused (403 agent_mismatch) over /v1 and /mcp,
    even where writes without a token are accepted, and nothing is stored."""
    token = (await tokens_for(node, "alice"))["alice"]
    async with serving(build_app(service=node, auth="optional", write_limit=0)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
            refused = await client.post("/v1/feedback", json=report("failed", "sybil-1"), headers=bearer(token))
        async with mcp_client(url, token) as alice:
            via_mcp = await alice.call_tool("report_outcome", {k: v for k, v in report("solved", "sybil-1").items() if v})
    assert refused.status_code == 403, refused.text
    assert (refused.json()["error"]["code"], refused.json()["error"]["field"]) == ("agent_mismatch", "agent.id")
    assert via_mcp.is_error and '"agent_mismatch"' in via_mcp.content[0].text
    assert (await node.outcomes.list_feedback(NODE))["feedback"] == []


# -- mixed: the unproven are one voice at most, beside the proven ----------------------------


async def test_many_unproven_failures_beside_one_proven_are_still_one_vote(node: Mesh):
    """One proven failure and six unproven ones leave the answer reported_failed and served; a
    second proven agent's failure makes it known_failed and hides it from reads and search."""
    tokens = await tokens_for(node, "f1", "f2")
    async with serving(build_app(service=node, auth="optional", write_limit=0)) as url:
        async with connected(url, "http") as anyone, connected(url, "http", tokens["f1"]) as f1, \
                connected(url, "http", tokens["f2"]) as f2:
            first = await f1.report(report("failed", None))
            sybils = [await anyone.report(report("failed", f"sybil-{n}")) for n in range(1, 7)]
            still = await anyone.read()
            assert (await top_result(anyone))["solution"]["id"] == "venv-macos"
            second = await f2.report(report("failed", "f2"))
            hidden = await anyone.read()
            top = await top_result(anyone)
        rows = await feedback_rows(url)
    assert (first["failure_state"], first["proven"], first["counted"]) == ("reported_failed", True, True)
    assert {(r["failure_state"], r["counts"]["failed_agents"], r["counted"]) for r in sybils} == {("reported_failed", 1, False)}
    assert served(still) == "venv-macos" and still["no_known_working_solution"] is False
    assert (second["failure_state"], second["counts"]["failed_agents"]) == ("known_failed", 2)
    assert hidden["no_known_working_solution"] is True and served(hidden) is None
    assert top["solution"] is None and top["failed_solutions"][0]["state"] == "known_failed"
    assert [proof for _, proof, _ in rows] == ["token", *["unproven"] * 6, "token"]
