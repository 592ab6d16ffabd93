"""What the MCP server costs an agent's context, and serving a chosen subset of its tools.

`tools/list` is read into every session of every client; issue 14 bounds it at 8 KB (it was
55 KB with the full output schemas, 14.4 KB without them). Measured as the real `mcp` client
receives it: the JSON of its `tools/list` result.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from knowmesh_mcp.mcp.server import READ_TOOLS, TOOL_NAMES, WRITE_TOOLS, build_mcp_server

pytestmark = pytest.mark.anyio

LIMIT = 8000  # bytes


def wire_bytes(result) -> int:
    """The result as JSON, the way the server writes it (unset and null fields left out)."""
    return max(len(result.model_dump_json(by_alias=True, exclude_none=True).encode()),
               len(result.model_dump_json(by_alias=True, exclude_unset=True).encode()))


def sizes(result) -> str:
    return ", ".join(f"{tool.name} {len(tool.model_dump_json(by_alias=True, exclude_none=True))}" for tool in result.tools)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("read_only", [False, True])
async def test_tools_list_fits_in_8_kb(mode, read_only):
    async with Client(build_mcp_server(lambda: None, read_only=read_only), mode=mode) as client:
        result = await client.list_tools()
    assert len(result.tools) == (4 if read_only else 10)
    assert wire_bytes(result) <= LIMIT, f"tools/list is {wire_bytes(result)} bytes: {sizes(result)}"


async def test_every_tool_still_tells_an_agent_what_it_needs():
    async with Client(build_mcp_server(lambda: None)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name, tool in tools.items():
        assert tool.title and tool.description, name
        assert tool.output_schema == {"type": "object"}, f"{name} returns structured content"
        schema = tool.input_schema
        assert schema["additionalProperties"] is False and "title" not in schema, name
        for parameter, spec in schema["properties"].items():
            assert "title" not in spec and "anyOf" not in spec and spec.get("default", "unset") is not None, (name, parameter)
            assert "type" in spec, (name, parameter)
    for name in READ_TOOLS:
        assert tools[name].annotations.read_only_hint is True and tools[name].annotations.idempotent_hint is True
    for name in WRITE_TOOLS:
        assert not tools[name].annotations.read_only_hint and tools[name].annotations.destructive_hint is False
    # When to call it, and what comes back: the words the loop turns on are still there.
    assert "FIRST" in tools["search"].description and "guidance" in tools["search"].description
    assert "verify" in tools["read_article"].description and "untrusted" in tools["read_article"].description
    assert "verify" in tools["report_outcome"].description
    assert "undo_token" in tools["patch_article"].description and "409" in tools["patch_article"].description
    assert "solutions []" in tools["create_node"].description
    described = {name: spec.get("description", "") for name, spec in tools["read_article"].input_schema["properties"].items()}
    assert "archived_failures" in described["include"] and "provenance" in described["fields"]


async def test_tool_names_are_the_servers_tools():
    async with Client(build_mcp_server(lambda: None)) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == set(TOOL_NAMES)
    async with Client(build_mcp_server(lambda: None, read_only=True)) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == set(READ_TOOLS)


async def test_a_chosen_subset_is_all_that_is_served(service):
    async with Client(build_mcp_server(lambda: service, tools=["search", "report_outcome"])) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"search", "report_outcome"}
        assert not (await client.call_tool("search", {"q": "ModuleNotFoundError"})).is_error
        assert (await client.call_tool("read_article", {"id": "python/x"})).is_error
    with pytest.raises(ValueError, match="no tool named serch"):
        build_mcp_server(lambda: service, tools=["serch"])


async def test_the_llms_txt_resource_is_described():
    async with Client(build_mcp_server(lambda: None)) as client:
        (llms,) = [r for r in (await client.list_resources()).resources if r.uri == "knowmesh://llms.txt"]
    assert llms.description and "search" in llms.description


# -- serve --tools, as a client starts it ------------------------------------------------------

def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_")}
    return {**env, "PYTHONPATH": os.pathsep.join(sys.path), **extra}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "knowmesh_mcp.cli.main", *args]


async def test_serve_stdio_tools_lists_only_those(tmp_path):
    command, *args = cli("serve", "--stdio", "--tools", "search, read_article", "--db", str(tmp_path / "t.db"), "--empty")
    async with Client(StdioServerParameters(command=command, args=args, env=clean_env())) as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == ["search", "read_article"]
        assert wire_bytes(listed) < 2500, "two tools cost a quarter of the ten"
        assert not (await client.call_tool("search", {"q": "ModuleNotFoundError"})).is_error
        refused = await client.call_tool("create_node", {"id": "python/x"})
        assert refused.is_error


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_serve_http_tools_limits_mcp_and_leaves_the_api(tmp_path):
    port = free_port()
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(cli("serve", "--http", "--port", str(port), "--db", str(tmp_path / "h.db"), "--empty",
                                  "--tools", "search,review_queue"), env=clean_env(), stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx2.AsyncClient(base_url=base, timeout=5) as http:
            with anyio.fail_after(60):
                while True:
                    assert server.poll() is None, Path(tmp_path / "server.log").read_text()
                    try:
                        if (await http.get("/v1/health")).status_code == 200:
                            break
                    except httpx2.HTTPError:
                        pass
                    await anyio.sleep(0.2)
            assert (await http.get("/v1/search", params={"q": "x"})).status_code == 200, "the HTTP API is all there"
        async with Client(f"{base}/mcp") as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {"search", "review_queue"}
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.mark.parametrize(("args", "says"), [
    (["--tools", "search,serch"], "no tool named 'serch'; the tools are search, read_article"),
    (["--read-only", "--tools", "search,create_node"], "create_node can write, and --read-only serves only search"),
    (["--http", "--tools", "nope"], "no tool named 'nope'"),
])
def test_a_tool_that_cannot_be_served_is_a_usage_error(tmp_path, args, says):
    done = subprocess.run(cli("serve", *args, "--db", str(tmp_path / "u.db")), env=clean_env(), input="",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and says in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == "" and not (tmp_path / "u.db").exists(), "refused before anything opens"


def test_tools_list_over_stdio_is_the_size_measured_in_process(tmp_path):
    """The bytes on the wire, not a re-serialization: one tools/list line from a real server."""
    server = subprocess.Popen(cli("serve", "--stdio", "--db", str(tmp_path / "w.db"), "--empty"), env=clean_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
                        {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}):
            server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()
        server.stdout.readline()
        line = server.stdout.readline()
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
    reply = json.loads(line)
    assert reply["id"] == 2 and len(reply["result"]["tools"]) == 10
    assert len(json.dumps(reply["result"], ensure_ascii=False, separators=(",", ":")).encode()) <= LIMIT
