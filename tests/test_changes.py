"""The change feed a sync loop follows (protocol section 9)."""

from __future__ import annotations

import json

import httpx2
import pytest

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]


async def test_cursor_pages_and_stays_put_when_nothing_changed(service: Mesh, make_doc):
    first = await service.feed.changes()
    assert first["changes"] == [] and first["has_more"] is False
    assert (await service.feed.changes(since=first["next_cursor"]))["next_cursor"] == first["next_cursor"]

    for index in range(5):
        await service.creation.create_node(make_doc(id=f"python/c{index}", error=f"KeyError: 'c{index}' in feed{index}x"))
    page = await service.feed.changes(since=first["next_cursor"], limit=3)
    assert [e["id"] for e in page["changes"]] == ["python/c0", "python/c1", "python/c2"] and page["has_more"] is True
    rest = await service.feed.changes(since=page["next_cursor"], limit=3)
    assert [e["id"] for e in rest["changes"]] == ["python/c3", "python/c4"] and rest["has_more"] is False
    idle = await service.feed.changes(since=rest["next_cursor"])
    assert idle["changes"] == [] and idle["next_cursor"] == rest["next_cursor"]

    await service.articles.patch_article("python/c1", base_revision=1, agent={"id": "a"}, summary="edit",
                                ops=[{"op": "set", "path": "/title", "value": "Edited"}])
    edited = (await service.feed.changes(since=rest["next_cursor"]))["changes"]
    assert [(e["id"], e["change"], e["revision"]) for e in edited] == [("python/c1", "updated", 2)]
    assert set(edited[0]) >= {"id", "change", "version", "status", "title", "updated_at", "path", "answer_state",
                              "needs_review"}
    with pytest.raises(KnowmeshError):
        await service.feed.changes(since="not-a-cursor")


async def test_review_flags_in_the_feed(service: Mesh, make_doc):
    open_problem = make_doc(id="python/open", error="RuntimeError: nobody knows")
    open_problem["content"]["solutions"] = []
    await service.creation.create_node(open_problem)
    entry = (await service.feed.changes())["changes"][0]
    assert entry["needs_review"] is True and entry["review_reasons"] == ["unsolved"]


async def test_jsonl_route_with_cursor_headers(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    app = build_app(service=service, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        response = await client.get("/v1/changes.jsonl")
        assert response.status_code == 200 and response.headers["x-knowmesh-has-more"] == "false"
        lines = [json.loads(line) for line in response.text.splitlines()]
        assert [line["id"] for line in lines] == ["python/module-not-found-venv"]
        again = await client.get("/v1/changes", params={"since": response.headers["x-knowmesh-next-cursor"]})
        assert again.json()["changes"] == []
