"""Guidance that cannot publish placeholders: the ready-made requests of search and read carry
`<...>` fill-ins; sent on unchanged they are refused with 400 naming the field, and the no-match
guidance's `create_node` carries only what the search knew."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.mcp.server import build_mcp_server
from knowmesh_mcp.core.placeholders import FILL_IN_RE

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

UNSEEN_ERROR = "Kotlin: kotlinx.coroutines.JobCancellationException: Job was cancelled"


def refused_field(caught: pytest.ExceptionInfo[KnowmeshError]) -> tuple[int, str, str, str]:
    error = caught.value
    return error.status, error.code, error.details["field"], error.details["problems"][0]["rule"]


async def test_no_match_guidance_holds_no_placeholder_and_publishes_what_was_known(service):
    envelope = await service.searching.search(UNSEEN_ERROR, env="linux,java-21,gradle")
    body = envelope["guidance"]["create_node"]["body"]
    assert FILL_IN_RE.search(json.dumps(body)) is None
    assert body["content"]["context"] == "Seen on OS linux, runtime java-21, package manager gradle."
    created = await service.creation.create_node(body)
    read = await service.nodes.read_view(created["id"])
    assert read["content"]["context"] == "Seen on OS linux, runtime java-21, package manager gradle."


async def test_no_match_guidance_without_env_says_it_was_not_given(service):
    body = (await service.searching.search(UNSEEN_ERROR))["guidance"]["create_node"]["body"]
    assert body["content"]["context"] == "Seen in an environment the search did not state."
    assert (await service.creation.create_node(body))["status"] == "draft"


async def test_a_fill_in_left_in_a_new_node_is_400_naming_its_field(service, make_doc):
    document = make_doc()
    document["content"]["context"] = "Ubuntu 24.04. <what you were doing when it happened>"
    with pytest.raises(KnowmeshError) as caught:
        await service.creation.create_node(document)
    assert refused_field(caught) == (400, "invalid_node", "/content/context", "placeholder")
    assert "<what you were doing when it happened>" in caught.value.message
    assert (await service.nodes.list_nodes())["nodes"] == []  # nothing written


async def test_the_ready_requests_of_a_read_sent_unchanged_are_400(service, make_doc):
    created = await service.creation.create_node(make_doc(content={**make_doc()["content"], "solutions": []}))
    read = await service.nodes.read_view(created["id"])
    add_answer = read["next"]["patch_article"]["arguments"]
    with pytest.raises(KnowmeshError) as caught:
        await service.articles.patch_article(created["id"], base_revision=add_answer["base_revision"], ops=add_answer["ops"],
                                    agent={"id": "agent-a"}, summary=add_answer["summary"])
    problems = {(p["field"], p["rule"]) for p in caught.value.details["problems"]}
    assert ("/content/solutions/0/fix/0", "placeholder") in problems
    assert ("/content/solutions/0/verify/command", "placeholder") in problems
    with pytest.raises(KnowmeshError) as caught:  # its agent too
        await service.articles.patch_article(created["id"], base_revision=add_answer["base_revision"], ops=add_answer["ops"],
                                    agent=add_answer["agent"], summary=add_answer["summary"])
    assert (caught.value.status, caught.value.details["field"]) == (400, "agent.id")
    edit = {"op": "set", "path": "/content/context", "value": "<improved context>"}
    with pytest.raises(KnowmeshError) as caught:
        await service.articles.patch_article(created["id"], base_revision=read["revision"], ops=[edit],
                                    agent={"id": "agent-a"}, summary="Clearer context")
    assert refused_field(caught) == (400, "invalid_node", "/content/context", "placeholder")
    assert (await service.nodes.read_view(created["id"]))["revision"] == read["revision"]  # nothing written


async def test_our_fill_ins_only_and_not_real_angle_bracket_text(service, make_doc):
    document = make_doc(error='File "<stdin>", line 1, in <module>')
    document["content"]["symptom"] = "no module named '<*>' at <path>: line <n>"
    assert (await service.creation.create_node(document))["status"] == "draft"


async def test_the_mcp_tool_and_the_http_route_refuse_a_placeholder(service, make_doc, http):
    document = make_doc()
    document["content"]["solutions"][0]["fix"] = ["<first command>"]
    response = await http.post("/v1/nodes", json=document)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_node"
    assert response.json()["error"]["field"] == "/content/solutions/0/fix/0"
    async with Client(build_mcp_server(lambda: service)) as client:
        result = await client.call_tool("create_node", document)
    assert result.is_error
    assert json.loads(result.content[0].text)["error"]["field"] == "/content/solutions/0/fix/0"
