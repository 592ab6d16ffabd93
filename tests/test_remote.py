"""`serve --stdio --remote URL`: a stdio server answering every tool through a remote mesh's HTTP API.

The tool-by-tool equivalence with a local store is in the MCP tests, parametrized over
`mcp_connect` ("local" and "remote"); here: the real subprocess, and a remote that is down,
slow, or not a knowmesh server.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import anyio
import pytest
from conftest import free_port, remote_client, serving
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]


def error_of(result) -> dict:
    assert result.is_error
    return json.loads(result.content[0].text)["error"]


def stdio_command(*args: str) -> tuple[str, list[str]]:
    script = shutil.which("knowmesh-mcp")
    return (script, list(args)) if script else (sys.executable, ["-m", "knowmesh_mcp.cli.main", *args])


async def test_stdio_subprocess_fronts_a_remote_mesh(service, base_url, make_doc, tmp_path):
    command, args = stdio_command("serve", "--stdio", "--remote", base_url)
    env = {"PYTHONPATH": os.pathsep.join(sys.path), "KNOWMESH_AGENT_ID": "remote-agent",
           "KNOWMESH_DB": str(tmp_path / "never-made.db")}
    document = make_doc()
    async with Client(StdioServerParameters(command=command, args=args, env=env)) as client:
        created = await client.call_tool("create_node", {k: document[k] for k in ("id", "ecosystem", "title", "signature", "content")})
        assert not created.is_error, created.content
        read = await client.call_tool("read_article", {"id": document["id"], "env": "macos-15"})
        assert [s["id"] for s in read.structured_content["content"]["solutions"]] == ["venv-macos"]
        found = await client.call_tool("search", {"q": document["signature"]["error"]})
        assert found.structured_content["results"][0]["id"] == document["id"]
        missing = await client.call_tool("read_article", {"id": "python/missing"})
        assert error_of(missing)["code"] == "node_not_found"
        resource = await client.read_resource(f"knowmesh://nodes/{document['id']}")
        assert document["title"] in resource.contents[0].text
    history = await service.articles.article_history(document["id"])
    assert history["revisions"][0]["agent"]["id"] == "remote-agent", "the write landed on the remote, as its agent"
    assert not (tmp_path / "never-made.db").exists(), "a remote stdio server opens no local store"


async def test_knowmesh_url_selects_the_remote(base_url, tmp_path):
    command, args = stdio_command()
    env = {"PYTHONPATH": os.pathsep.join(sys.path), "KNOWMESH_URL": base_url, "KNOWMESH_DB": str(tmp_path / "k.db")}
    async with Client(StdioServerParameters(command=command, args=args, env=env)) as client:
        missing = await client.call_tool("read_article", {"id": "shell/bad-interpreter-crlf"})
    assert error_of(missing)["code"] == "node_not_found", "the empty remote answered, not a seeded local store"


async def test_a_remote_that_is_down_is_a_tool_error_and_the_session_survives():
    async with remote_client(f"http://127.0.0.1:{free_port()}", timeout=2) as client:
        down = await client.call_tool("search", {"q": "ModuleNotFoundError"})
        assert error_of(down)["code"] == "remote_unavailable"
        again = await client.call_tool("read_article", {"id": "python/x"})
        assert error_of(again)["code"] == "remote_unavailable"


async def test_a_remote_that_never_answers_times_out():
    with socket.socket() as listener:  # accepts connections (kernel backlog) and never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        async with remote_client(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.5) as client:
            with anyio.fail_after(10):
                slow = await client.call_tool("read_article", {"id": "python/x"})
        assert error_of(slow)["code"] == "remote_timeout"


async def test_a_server_that_is_not_knowmesh_gives_remote_error():
    async def proxy_error(request):
        return HTMLResponse("<h1>Bad gateway</h1>", status_code=502)

    app = Starlette(routes=[Route("/{path:path}", proxy_error)])
    async with serving(app) as url, remote_client(url) as client:
        result = await client.call_tool("search", {"q": "x"})
    assert error_of(result)["code"] == "remote_error"


async def test_an_id_cannot_steer_the_remote_url(base_url):
    async with remote_client(base_url) as client:
        result = await client.call_tool("read_article", {"id": "../v1/issues"})
    assert error_of(result)["code"] == "invalid_id"


async def test_review_queue_takes_reason_through_the_remote(service, base_url, make_doc):
    """`review_queue` with `reason` over `--remote` asks GET /v1/review?reason= (it was a bare
    "unexpected server error": the remote mesh took no `reason`)."""
    unsolved = make_doc(id="python/open-problem", error="OpenProblemError: nobody solved this")
    unsolved["content"]["solutions"] = []
    await service.creation.create_node(unsolved)
    await service.creation.create_node(make_doc())
    async with remote_client(base_url) as client:
        only = await client.call_tool("review_queue", {"reason": "unsolved"})
        none = await client.call_tool("review_queue", {"reason": "disputed"})
    assert not only.is_error, only.content
    assert only.structured_content["reason"] == "unsolved"
    assert [item["id"] for item in only.structured_content["items"]] == ["python/open-problem"]
    assert (none.structured_content["reason"], none.structured_content["items"]) == ("disputed", [])


@pytest.mark.parametrize("args", [["serve", "--http", "--remote", "http://127.0.0.1:1"],
                                  ["serve", "--stdio", "--remote", "ftp://example.invalid"]])
def test_bad_remote_usage_exits_2(args, tmp_path):
    result = subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", *args], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "KNOWMESH_DB": str(tmp_path / "x.db")}, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and ("remote" in result.stderr or "URL" in result.stderr), result.stderr
    assert result.stdout == ""
