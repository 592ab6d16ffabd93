"""No request, however malformed, produces a 500 (property-based, through the ASGI app)."""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowmesh_mcp.api.app import build_app

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres"), pytest.mark.slow]  # fuzzers: 150 generated requests a test

segments = st.text(min_size=0, max_size=20)
# Percent-encoded so that any text, control characters included, makes a request the client will send.
paths = st.lists(segments, min_size=1, max_size=6).map(lambda parts: "/v1/nodes/" + "/".join(quote(p, safe=".-_~") for p in parts))
queries = st.dictionaries(
    st.sampled_from(["env", "fields", "include", "solution", "limit", "cursor", "ecosystem", "x"]),
    st.text(max_size=40), max_size=4,
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(path=paths, query=queries)
async def test_any_get_is_never_a_500(service, make_doc, path, query):
    app = build_app(service=service, with_mcp=False, write_limit=0)  # this test is about input, not limits
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        for target in (path, path + ".md", "/v1/nodes"):
            response = await client.get(target, params=query)
            assert response.status_code < 500, (target, query, response.text)
            if response.status_code >= 400:
                assert response.json()["error"]["code"]


@FUZZ
@given(body=json_values, document_patch=st.dictionaries(st.sampled_from(["id", "title", "ecosystem", "signature", "content", "status"]), json_values, max_size=3))
async def test_any_post_is_never_a_500_and_invalid_input_writes_nothing(service, make_doc, body, document_patch):
    app = build_app(service=service, with_mcp=False, write_limit=0)  # this test is about input, not limits
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        before = await service.store.count_nodes()
        for payload in (body, {**make_doc(), **document_patch}):
            response = await client.post("/v1/nodes", content=json.dumps(payload), headers={"content-type": "application/json"})
            assert response.status_code in {201, 400, 409}, response.text
            if response.status_code != 201:
                assert await service.store.count_nodes() == before
            before = await service.store.count_nodes()


authorization = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80),  # what a client can send
    st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=80).map(lambda t: "Bearer " + t),
    st.sampled_from(["Bearer", "Bearer ", "bearer km_", "Basic YWxpY2U6cHc=", "Bearer km_" + "x" * 4000]),
)


@FUZZ
@given(header=authorization, body=json_values)
async def test_any_authorization_header_is_never_a_500(service, make_doc, header, body):
    """A team's mesh meets every kind of Authorization header: each is a clear 4xx (or passes for reads)."""
    app = build_app(service=service, with_mcp=False, write_limit=0, auth="required")
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1",
                                  headers={"authorization": header}) as client:
        for method, target in (("GET", "/v1/search?q=KeyError"), ("POST", "/v1/feedback"),
                               ("POST", "/v1/article-revisions/r1/undo"), ("POST", "/v1/nodes/python/x/status")):
            response = await client.request(method, target, content=json.dumps(body),
                                            headers={"content-type": "application/json"})
            assert response.status_code < 500, (method, target, header, response.text)
            if method == "POST" and target == "/v1/feedback":
                assert response.status_code in (400, 401), response.text
