"""Reports about the service itself: POST /v1/issues, /issues as Markdown and as escaped HTML."""

from __future__ import annotations

import httpx2
import pytest

from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

ISSUE = {
    "title": "/v1/search returns 500 for queries with a colon",
    "body": "Searching for a raw error containing a colon returns a 500.",
    "endpoint": "/v1/search", "request": "GET /v1/search?q=Error%3A+boom", "expected": "200", "actual": "500",
    "labels": ["bug", "search"], "agent": {"id": "agent-a1", "model": "m"},
}


async def test_file_list_and_read_issues(service: Mesh):
    app = build_app(service=service, with_mcp=False, write_limit=2)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        filed = await client.post("/v1/issues", json=ISSUE)
        assert filed.status_code == 202
        assert filed.json() == {"ok": True, "issue_number": 1, "status": "open", "url": "http://127.0.0.1/issues/1"}
        hostile = {**ISSUE, "title": "<script>alert(1)</script>", "agent": {"id": "agent-b"}}
        assert (await client.post("/v1/issues", json=hostile)).status_code == 202
        for bad in ({**ISSUE, "title": "x" * 201}, {**ISSUE, "body": ""}, {**ISSUE, "labels": "bug"}, [1]):
            assert (await client.post("/v1/issues", json=bad)).status_code == 400
        assert (await client.post("/v1/issues", json=ISSUE)).status_code == 202
        assert (await client.post("/v1/issues", json=ISSUE)).status_code == 429  # write limit 2 for agent-a1
        markdown = await client.get("/issues")
        assert markdown.headers["content-type"].startswith("text/markdown") and "#1 [open]" in markdown.text
        page = await client.get("/issues", headers={"accept": "text/html"})
        assert page.headers["content-type"].startswith("text/html")
        assert "<script>" not in page.text  # the page shows the Markdown, HTML-escaped
        assert "<script>" not in markdown.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown.text
        one = await client.get("/issues/1")
        assert one.status_code == 200 and "- endpoint: /v1/search" in one.text
        assert (await client.get("/issues/99")).status_code == 404
