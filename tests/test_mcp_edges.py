"""MCP edge cases of issue 47, point 10, against real servers: uvicorn for `POST /mcp` (raw httpx2
requests, in the 2025 era after an `initialize` and in the 2026-07-28 era with `_meta`), and a
`knowmesh-mcp serve --stdio` subprocess.

- A request whose id is no request id (an object, null, an array, a boolean) is Invalid Request
  (-32600, id null), never a silent 202; a batch or a bare JSON value is -32600 too, not -32602.
- `prompts/get` of an unknown prompt, or with missing or unknown arguments, is -32602 naming
  what is known, and leaves no traceback in the log.
- `article_history` carries the untrusted-data mark, as every other read does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import serving
from jsonschema import Draft202012Validator
from mcp import Client
from test_stdio_fuzz import START_TIMEOUT, StdioServer

from knowmesh_mcp.wire import results
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

pytestmark = pytest.mark.anyio

ERAS = ["2025", "2026"]
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
             "io.modelcontextprotocol/clientCapabilities": {},
             "io.modelcontextprotocol/clientInfo": {"name": "edges", "version": "1"}}
INITIALIZE = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "edges", "version": "1"}}}


class McpPoster:
    """Raw JSON-RPC POSTs to /mcp as a client of one protocol era sends them: the 2025 era after an
    `initialize` (stateless: no session id comes back) with its version header; the 2026-07-28
    era with its headers and `_meta` in every request's params."""

    def __init__(self, client: httpx2.AsyncClient, era: str):
        self.client = client
        self.era = era

    async def start(self) -> None:
        if self.era == "2025":
            hello = self.reply(await self.client.post("/mcp", json=INITIALIZE, headers=HEADERS))
            assert hello["result"]["serverInfo"]["name"] == "knowmesh", hello

    def message(self, method: str, params: dict[str, Any] | None = None, **envelope: Any) -> dict[str, Any]:
        """A request of this era: `envelope` holds `id` (any JSON value, or left out)."""
        params = dict(params or {})
        if self.era == "2026":
            params["_meta"] = META_2026
        return {"jsonrpc": "2.0", **envelope, "method": method, "params": params}

    def headers(self, method: str | None, name: str | None = None, **extra: str) -> dict[str, str]:
        headers = {**HEADERS, **extra}
        if self.era == "2025":
            headers["mcp-protocol-version"] = "2025-11-25"
        else:
            headers["mcp-protocol-version"] = "2026-07-28"
            if method is not None:
                headers["mcp-method"] = method
            if name is not None:
                headers["mcp-name"] = name
        return headers

    async def post(self, body: Any, *, method: str | None = None, name: str | None = None, **extra: str) -> httpx2.Response:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.client.post("/mcp", content=content, headers=self.headers(method, name, **extra))

    @staticmethod
    def reply(response: httpx2.Response) -> dict[str, Any]:
        """The JSON-RPC message of a response, whether sent as JSON or as one SSE event."""
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
            messages = [json.loads(line) for line in data if line]
            return next(m for m in messages if "result" in m or "error" in m)
        return response.json()


@pytest.fixture
async def mcp_http(service: Mesh) -> AsyncIterator[httpx2.AsyncClient]:
    async with serving(build_app(service=service)) as url, httpx2.AsyncClient(base_url=url, timeout=20) as client:
        yield client


@pytest.fixture(params=ERAS)
async def poster(request, mcp_http: httpx2.AsyncClient) -> McpPoster:
    poster = McpPoster(mcp_http, request.param)
    await poster.start()
    return poster


def invalid_request(response: httpx2.Response, *, request_id: Any = None) -> str:
    """The message of a -32600 Invalid Request answer (HTTP 400, a JSON body) with `request_id`."""
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == request_id and "result" not in body, body
    assert body["error"]["code"] == -32600, body
    return body["error"]["message"]


# -- point 1: an id that is no request id ------------------------------------------------


@pytest.mark.parametrize("request_id", [{"a": 1}, None, [1], True], ids=["object", "null", "array", "boolean"])
async def test_a_request_whose_id_is_no_request_id_is_invalid_request_with_id_null(poster, request_id):
    """The 2025 transport read these as notifications: 202 and no answer at all."""
    response = await poster.post(poster.message("tools/list", id=request_id), method="tools/list")
    assert "id must be a string or an integer" in invalid_request(response)


async def test_a_fractional_id_is_refused_with_its_id_as_over_stdio(poster):
    response = await poster.post(poster.message("tools/list", id=1.5), method="tools/list")
    assert "id must be a string or an integer" in invalid_request(response, request_id=1.5)


async def test_a_tool_call_with_a_null_id_runs_nothing(poster, service, make_doc):
    document = make_doc()
    arguments = {key: document[key] for key in ("id", "ecosystem", "title", "signature", "content")}
    call = poster.message("tools/call", {"name": "create_node", "arguments": arguments}, id=None)
    invalid_request(await poster.post(call, method="tools/call", name="create_node"))
    assert (await service.nodes.list_nodes())["nodes"] == [], "the refused call created nothing"


# -- point 2: batches and other bodies that are no single message ---------------------------


@pytest.mark.parametrize("body", [
    pytest.param("batch", id="batch"),
    pytest.param([], id="empty-batch"),
    pytest.param(42, id="number"),
    pytest.param("a string", id="string"),
    pytest.param(None, id="null"),
])
async def test_a_body_that_is_no_single_message_is_invalid_request(poster, body):
    """The 2025 transport answered -32602 with a dump of pydantic's union errors."""
    if body == "batch":
        body = [poster.message("tools/list", id=1), poster.message("prompts/list", id=2)]
    message = invalid_request(await poster.post(body, method="tools/list"))
    assert "one JSON object" in message
    if isinstance(body, list):
        assert "batches are not supported" in message


async def test_valid_requests_still_pass_and_a_long_body_is_replayed_whole(poster, service, make_doc):
    """The check reads the body first: the SDK must still get every byte of it, however it arrived."""
    await service.creation.create_node(make_doc())
    listed = poster.reply(await poster.post(poster.message("tools/list", id="list-1"), method="tools/list"))
    assert listed["id"] == "list-1" and "search" in {tool["name"] for tool in listed["result"]["tools"]}
    long_query = "ModuleNotFoundError: No module named 'requests' " + "x" * 300_000  # many receive() chunks
    call = poster.message("tools/call", {"name": "search", "arguments": {"q": long_query, "limit": 1}}, id=7)
    found = poster.reply(await poster.post(call, method="tools/call", name="search"))
    assert found["id"] == 7 and "structuredContent" in found["result"], str(found)[:300]


async def test_the_sdk_still_answers_first_for_size_host_and_content_type(poster):
    """The check only answers what the SDK's own transport checks would let through."""
    batch = json.dumps([poster.message("tools/list", id=1)]).encode()
    too_long = await poster.post(batch + b" " * (4 * 1024 * 1024 + 1), method="tools/list")
    assert too_long.status_code == 413
    foreign = await poster.post(batch, method="tools/list", host="evil.example:80")
    assert foreign.status_code == 421
    not_json = await poster.post(batch, method="tools/list", **{"content-type": "text/plain"})
    assert not_json.status_code in (400, 415) and "-32600" not in not_json.text


async def test_broken_json_is_a_parse_error_with_the_id_it_had_as_over_stdio(poster):
    """The SDK said -32700 with id null; stdio's reader recovers the id from the broken text."""
    response = await poster.post(b'{"jsonrpc":"2.0","id":1,"method":"tools/li', method="tools/list")
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["id"] == 1 and body["error"]["code"] == -32700 and body["error"]["message"].startswith("not valid JSON")
    empty = await poster.post(b"", method="tools/list")  # nothing to read: left to the SDK
    assert empty.status_code == 400 and empty.json()["error"]["code"] == -32700


# -- point 3: prompts/get with an unknown prompt or the wrong arguments -------------------


def test_prompts_get_errors_over_stdio_are_invalid_params_without_a_traceback(tmp_path: Path):
    server = StdioServer(tmp_path / "edges.db", tmp_path / "server.log")
    try:
        hello = server.request(INITIALIZE, timeout=START_TIMEOUT)
        assert hello["result"]["serverInfo"]["name"] == "knowmesh", hello
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        def prompts_get(request_id: str, params: dict[str, Any]) -> dict[str, Any]:
            reply = server.request({"jsonrpc": "2.0", "id": request_id, "method": "prompts/get", "params": params})
            assert "result" not in reply and reply["error"]["code"] == -32602, reply
            return reply["error"]

        unknown = prompts_get("unknown", {"name": "no-such-prompt"})
        assert "no-such-prompt" in unknown["message"] and "fix-error" in unknown["message"], unknown
        missing = prompts_get("missing", {"name": "fix-error"})
        assert "error" in missing["message"] and "required" in missing["message"], missing
        extra = prompts_get("extra", {"name": "fix-error", "arguments": {"error": "boom", "bogus": "1"}})
        assert "bogus" in extra["message"], extra
        good = server.request({"jsonrpc": "2.0", "id": "good", "method": "prompts/get",
                               "params": {"name": "fix-error", "arguments": {"error": "boom"}}})
        assert "boom" in good["result"]["messages"][0]["content"]["text"], good
        server.ping()
    finally:
        server.close()
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]


async def test_prompts_get_of_an_unknown_prompt_over_http_is_invalid_params(poster, caplog):
    message = poster.message("prompts/get", {"name": "no-such-prompt"}, id="prompt-1")
    reply = poster.reply(await poster.post(message, method="prompts/get", name="no-such-prompt"))
    assert reply["id"] == "prompt-1" and reply["error"]["code"] == -32602, reply
    assert "fix-error" in reply["error"]["message"]
    assert not [record for record in caplog.records if record.exc_info], "a caller's mistake logs no traceback"


# -- point 4: article_history is marked untrusted data ------------------------------------


def test_the_article_history_result_model_requires_the_untrusted_data_mark():
    schema = results.ArticleHistory.model_json_schema()
    marked_like_a_read = results.ArticleView.model_json_schema()["properties"]["trust"]
    assert "trust" in schema["required"] and schema["properties"].get("trust") == marked_like_a_read, schema


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_article_history_is_marked_untrusted_over_mcp_and_http(service, make_doc, mode):
    document = make_doc()
    await service.creation.create_node(document)
    await service.articles.patch_article(document["id"], base_revision=1, agent={"id": "edges-agent"}, summary="sharper",
                                ops=[{"op": "set", "path": "/title", "value": "ModuleNotFoundError after pip install"}])
    validator = Draft202012Validator(results.ArticleHistory.model_json_schema())
    async with serving(build_app(service=service)) as url:
        async with Client(f"{url}/mcp", mode=mode) as client:
            listed = await client.call_tool("article_history", {"id": document["id"]})
            diff = await client.call_tool("article_history", {"id": document["id"], "from_revision": 1, "to_revision": 2})
        async with httpx2.AsyncClient(base_url=url, timeout=10) as http:
            path = f"/v1/nodes/{document['id']}/article/revisions"
            over_http = [(await http.get(path)).json(), (await http.get(path, params={"from_revision": 1})).json()]
    for body in [listed.structured_content, diff.structured_content, *over_http]:
        assert body["trust"] == "untrusted-data", body
        assert not list(validator.iter_errors(body)), body
    assert [r["revision"] for r in listed.structured_content["revisions"]] == [1, 2]
    assert diff.structured_content["changes"]
