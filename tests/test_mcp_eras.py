"""Both MCP eras under test (issue 49, point 4), against real servers started as a client starts them.

- The Python `mcp` client in `legacy` mode (the 2025 `initialize` handshake) and in `auto` mode
  (2026-07-28: `server/discover`, then `_meta` on every request), over stdio (`knowmesh-mcp serve
  --stdio`) and streamable HTTP (`knowmesh-mcp serve --http`, uvicorn, `/mcp`). Each of the four
  drives every tool the server lists in `tools/list` (a listed tool without a driving case here
  fails the suite) with valid arguments to a successful result. Writes act as the mesh's local
  agent on stdio and as a token's agent over HTTP (`--auth required`).
- Every result's `structuredContent` is validated with `jsonschema` against the `outputSchema`
  the tool lists, and, since that schema may be only `{"type": "object"}`, against the full
  result model of `knowmesh_mcp.wire.results` the server checks it with (and /v1/openapi.json shows).
- Raw JSON-RPC probes: `server/discover` over HTTP without `initialize` and after it, and over
  stdio as the first message and after an `initialize`; `tools/list` under 8 KB in both eras on
  both transports, measured as the bytes of the JSON-RPC response the client receives.
- The TypeScript SDK client from npm (2025 era), `tests/ts_client`, over both transports: run
  when `node` and `tests/ts_client/node_modules` are there (`scripts/install-test-tools` puts
  them there), skipped otherwise, unless KNOWMESH_REQUIRE_NODE=1 (CI), which makes their
  absence a failure.

Servers are shared per module: one HTTP server, one stdio server per era for the client matrix,
one raw stdio server per era for the probes, one for the TypeScript client.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import cache
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from conftest import BASE_DOCUMENT, free_port, opened
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from knowmesh_mcp.wire import results

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]
TS_CLIENT = REPO / "tests" / "ts_client"
ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}  # the Client's mode -> the protocol version it must reach
MATRIX = [f"{era}-{transport}" for era in ERAS for transport in ("stdio", "http")]
LIMIT = 8192  # bytes of the tools/list response (issue 49: "under 8 KB in both eras")
START_TIMEOUT = 90  # a server's first answer, its imports included, on a busy 2-core machine
CALL_TIMEOUT = 60
STDIO_AGENT = "eras-local-agent"
TOKEN_AGENT = "eras-alice"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
             "io.modelcontextprotocol/clientCapabilities": {},
             "io.modelcontextprotocol/clientInfo": {"name": "eras-probe", "version": "1"}}
INITIALIZE = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "eras-probe", "version": "1"}}}
HTTP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
LINUX = {"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"}
LINUX_ENV = "ubuntu-24.04,python-3.12,pip"

# The result model of each tool in `knowmesh_mcp.wire.results` (what the server validates a result with).
RESULT_MODELS = {
    "search": "SearchEnvelope", "read_article": "ArticleView", "article_history": "ArticleHistory",
    "review_queue": "ReviewQueue", "create_node": "CreatedNode", "patch_article": "PublishedEdit",
    "revise_article": "PublishedEdit", "undo_edit": "PublishedEdit", "report_outcome": "FeedbackReceipt",
    "report_failed_attempt": "FailedAttemptReceipt",
}



@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so the servers and clients below can be shared by the module's tests


# -- starting servers as a client does ---------------------------------------------------------


def server_command(*args: str) -> list[str]:
    """The installed `knowmesh-mcp` console script (module form where it is not on PATH)."""
    script = shutil.which("knowmesh-mcp")
    return [script, *args] if script else [sys.executable, "-m", "knowmesh_mcp.cli.main", *args]


def server_env(**extra: str) -> dict[str, str]:
    """This environment without KNOWMESH_* settings, with this checkout importable first."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("KNOWMESH_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *(path for path in sys.path if path)])
    return {**env, **extra}


def node_document(node_id: str, module: str, *, solved: bool = True) -> dict[str, Any]:
    """A valid node document of its own signature (the HTTP sessions share a mesh: no duplicates)."""
    document = copy.deepcopy(BASE_DOCUMENT)
    document["id"] = node_id
    document["title"] = f"ModuleNotFoundError for {module} although it is installed"
    document["signature"] = {"error": f"ModuleNotFoundError: No module named '{module}'", "environment": ["python>=3.8"]}
    if not solved:
        document["content"]["solutions"] = []
    return document


def document_arguments(document: dict[str, Any]) -> dict[str, Any]:
    return {key: document[key] for key in ("id", "ecosystem", "title", "signature", "content")}


@dataclass
class Meshes:
    folder: Path
    token: str
    http_db: Path
    ts_db: Path


@pytest.fixture(scope="module")
async def meshes(tmp_path_factory) -> Meshes:
    """The HTTP server's mesh (a token for TOKEN_AGENT, the base document for the TypeScript client)
    and the TypeScript client's stdio mesh (the base document)."""
    folder = tmp_path_factory.mktemp("eras")
    http_db, ts_db = folder / "http.db", folder / "ts-stdio.db"
    async with opened(http_db, seed=False) as service:
        token = (await service.tokens.add_token(TOKEN_AGENT))["token"]
        await service.creation.create_node(copy.deepcopy(BASE_DOCUMENT))
    async with opened(ts_db, seed=False) as service:
        await service.creation.create_node(copy.deepcopy(BASE_DOCUMENT))
    return Meshes(folder, token, http_db, ts_db)


@pytest.fixture(scope="module")
async def http_url(meshes: Meshes) -> AsyncIterator[str]:
    """`knowmesh-mcp serve --http` as a team runs it (writes need a token), on a free loopback port."""
    port = free_port()
    log_path = meshes.folder / "http-server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            server_command("serve", "--http", "--host", "127.0.0.1", "--port", str(port), "--db", str(meshes.http_db),
                           "--empty", "--write-limit", "0", "--auth", "required"),
            env=server_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx2.AsyncClient(base_url=base, timeout=5) as http:
            with anyio.fail_after(START_TIMEOUT):
                while True:
                    assert server.poll() is None, f"the HTTP server exited: {log_path.read_text(errors='replace')[-3000:]}"
                    try:
                        if (await http.get("/v1/health")).status_code == 200:
                            break
                    except httpx2.HTTPError:
                        pass
                    await anyio.sleep(0.1)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)


# -- the client matrix -------------------------------------------------------------------------


class ToolFailed(AssertionError):
    pass


@dataclass
class Session:
    """One real `mcp.Client` of one era on one transport, and what its cases made."""

    client: Client
    era: str
    transport: str
    tools: dict[str, Any]
    made: dict[str, Any] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    @property
    def tag(self) -> str:
        return f"{self.era}-{self.transport}"

    def arg(self, tool: str, *names: str) -> str:
        """The first of `names` that the tool takes (a renamed parameter keeps its cases working)."""
        properties = self.tools[tool].input_schema.get("properties", {})
        for name in names:
            if name in properties:
                return name
        raise ToolFailed(f"{tool} takes none of {names}: its parameters are {sorted(properties)}")

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a listed tool; its result must be a success whose structured content fits the tool's
        `outputSchema` and its result model, with the marks of this session's era."""
        if tool not in self.tools:
            raise ToolFailed(f"{tool} is not in tools/list over {self.tag}: {sorted(self.tools)}")
        with anyio.fail_after(CALL_TIMEOUT):
            result = await self.client.call_tool(tool, arguments)
        self.calls.append(tool)
        text = result.content[0].text if result.content and hasattr(result.content[0], "text") else None
        if result.is_error or result.structured_content is None:
            raise ToolFailed(f"{tool} over {self.tag} failed: {text}")
        body = result.structured_content
        check_structured(tool, body, self.tools[tool].output_schema, where=self.tag)
        assert text is not None and json.loads(text) == body, f"{tool}: the text copy is the structured content"
        if self.era == "auto":
            assert result.meta and result.meta[SERVER_INFO]["name"] == "knowmesh", (tool, result.meta)
        return body

    # What several cases need, made once per session through the tools themselves.

    async def base_node(self) -> str:
        if "base" not in self.made:
            node_id = f"python/eras-{self.tag}-base"
            self.made["base_module"] = module = f"eras_{self.era}_{self.transport}_base"
            created = await self.call("create_node", document_arguments(node_document(node_id, module)))
            assert created["id"] == node_id
            self.made["base"] = node_id
        return self.made["base"]

    async def open_node(self) -> str:
        if "open" not in self.made:
            node_id = f"python/eras-{self.tag}-open"
            await self.call("create_node", document_arguments(
                node_document(node_id, f"eras_{self.era}_{self.transport}_open", solved=False)))
            self.made["open"] = node_id
        return self.made["open"]

    async def revision(self, node_id: str) -> int:
        return (await self.call("read_article", {"id": node_id, "fields": "symptom"}))["revision"]

    async def patch(self, node_id: str, text: str) -> dict[str, Any]:
        edit = await self.call("patch_article", {
            "id": node_id, "base_revision": await self.revision(node_id), "summary": f"symptom, {self.tag}",
            "ops": [{"op": "set", "path": "/content/symptom", "value": text}],
        })
        assert edit["kind"] == "edit" and edit["undo_token"] and edit["changes"], edit
        return edit


def check_structured(tool: str, body: Any, output_schema: dict[str, Any] | None, *, where: str) -> None:
    """`body` fits the tool's published outputSchema and its full result model."""
    assert isinstance(body, dict), (tool, where, body)
    assert output_schema, f"{tool} lists no outputSchema over {where}"
    Draft202012Validator.check_schema(output_schema)
    published = [error.message for error in Draft202012Validator(output_schema).iter_errors(body)]
    assert not published, f"{tool} over {where}: structuredContent does not fit its outputSchema: {published[:3]}"
    name = RESULT_MODELS.get(tool)
    assert name and hasattr(results, name), f"no result model in knowmesh_mcp.wire.results for {tool} (RESULT_MODELS)"
    full = [f"/{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in model_validator(name).iter_errors(body)]
    assert not full, f"{tool} over {where}: structuredContent does not fit results.{name}: {full[:3]}"


@cache
def model_validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(getattr(results, name).model_json_schema())


@asynccontextmanager
async def matrix_client(target: Any, era: str, transport: str) -> AsyncIterator[Session]:
    # No cancel scope around the handshake: the client's own task groups stay open past it; its
    # read timeout bounds every request, the first included.
    async with Client(target, mode=era, read_timeout_seconds=START_TIMEOUT) as client:
        listed = await client.list_tools()
        yield Session(client, era, transport, {tool.name: tool for tool in listed.tools})


@pytest.fixture(scope="module", params=MATRIX)
async def session(request, meshes: Meshes, http_url: str) -> AsyncIterator[Session]:
    """A client of one era on one transport, shared by the module's tests of that pair."""
    era, transport = request.param.split("-")
    if transport == "stdio":
        command, *args = server_command("serve", "--stdio", "--db", str(meshes.folder / f"stdio-{era}.db"), "--empty")
        target = StdioServerParameters(command=command, args=args, env=server_env(KNOWMESH_AGENT_ID=STDIO_AGENT))
        async with matrix_client(target, era, transport) as session:
            yield session
        return
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {meshes.token}"}, timeout=CALL_TIMEOUT) as http:
        async with matrix_client(streamable_http_client(f"{http_url}/mcp", http_client=http), era, transport) as session:
            yield session


# Each case drives one tool to a successful result (Session.call checks every result it gets).


async def drive_search(s: Session) -> None:
    node_id = await s.base_node()
    found = await s.call("search", {"q": f"ModuleNotFoundError: No module named '{s.made['base_module']}'", "env": LINUX_ENV})
    assert found["results"] and found["results"][0]["id"] == node_id, found


async def drive_read_article(s: Session) -> None:
    node_id = await s.base_node()
    read = await s.call("read_article", {"id": node_id, "env": LINUX_ENV})
    assert read["id"] == node_id and [answer["id"] for answer in read["content"]["solutions"]] == ["venv-linux"], read


async def drive_article_history(s: Session) -> None:
    node_id = await s.base_node()
    history = await s.call("article_history", {"id": node_id})
    assert history["id"] == node_id and history["revisions"][0]["revision"] == 1, history


async def drive_review_queue(s: Session) -> None:
    await s.open_node()
    queue = await s.call("review_queue", {"limit": 5})
    assert queue["total"] >= 1 and queue["items"], queue


async def drive_create_node(s: Session) -> None:
    node_id = f"python/eras-{s.tag}-created"
    created = await s.call("create_node", document_arguments(node_document(node_id, f"eras_{s.era}_{s.transport}_created")))
    assert created["id"] == node_id and created["revision"] == 1 and created["status"] == "draft", created


async def drive_patch_article(s: Session) -> None:
    node_id = await s.base_node()
    edit = await s.patch(node_id, f"Import fails although pip installed it ({s.tag}, patched).")
    assert edit["id"] == node_id and edit["revision"] == edit["parent_revision"] + 1, edit


async def drive_revise_article(s: Session) -> None:
    node_id = await s.base_node()
    read = await s.call("read_article", {"id": node_id, "fields": "article"})
    article = copy.deepcopy(read["article"])
    article["content"]["root_cause"] = f"pip installed into another interpreter ({s.tag}, revised)."
    edit = await s.call("revise_article", {"id": node_id, "base_revision": read["revision"], "article": article,
                                           "summary": f"root cause, {s.tag}"})
    assert edit["revision"] == read["revision"] + 1 and edit["kind"] == "edit", edit


async def drive_undo_edit(s: Session) -> None:
    node_id = await s.base_node()
    edit = await s.patch(node_id, f"Import fails although pip installed it ({s.tag}, to be undone).")
    undone = await s.call("undo_edit", {"revision_id": edit["revision_id"], "undo_token": edit["undo_token"],
                                        "summary": f"undo, {s.tag}"})
    assert undone["kind"] == "undo" and undone["revision"] == edit["revision"] + 1, undone


async def drive_report_outcome(s: Session) -> None:
    node_id = await s.base_node()
    receipt = await s.call("report_outcome", {
        s.arg("report_outcome", "id", "node"): node_id, "solution": "venv-linux", "outcome": "solved",
        s.arg("report_outcome", "env", "environment"): LINUX,
        "evidence": {"verify": ".venv/bin/python -c 'import requests'", "exit_code": 0},
    })
    # Proven: by the token over HTTP, as the mesh's own local agent over stdio.
    assert receipt["accepted"] is True and receipt["anonymous"] is False and receipt["proven"] is True, receipt


async def drive_report_failed_attempt(s: Session) -> None:
    node_id = await s.base_node()  # its answers are for macOS and Linux: on Windows no answer applies
    receipt = await s.call("report_failed_attempt", {
        s.arg("report_failed_attempt", "id", "node"): node_id,
        s.arg("report_failed_attempt", "env", "environment"): {"os": "windows-11", "runtime": "python-3.12", "pkg_manager": "pip"},
        "summary": "Reinstalled requests with pip", "steps": ["pip install --force-reinstall requests"],
        "reason": "the interpreter on PATH is still another one",
    })
    assert receipt["accepted"] is True, receipt


CASES: dict[str, Callable[[Session], Any]] = {
    "search": drive_search, "read_article": drive_read_article, "article_history": drive_article_history,
    "review_queue": drive_review_queue, "create_node": drive_create_node, "patch_article": drive_patch_article,
    "revise_article": drive_revise_article, "undo_edit": drive_undo_edit, "report_outcome": drive_report_outcome,
    "report_failed_attempt": drive_report_failed_attempt,
}


async def test_each_client_speaks_the_era_it_asked_for(session: Session):
    assert session.client.protocol_version == ERAS[session.era], session.tag
    assert session.client.server_info is not None and session.client.server_info.name == "knowmesh"


async def test_every_listed_tool_has_a_driving_case(session: Session):
    """A tool added to the server fails here until a case below drives it."""
    assert session.tools, f"tools/list over {session.tag} is empty"
    assert sorted(set(session.tools) - set(CASES)) == [], f"listed over {session.tag} with no case in CASES"
    assert sorted(set(session.tools) - set(RESULT_MODELS)) == [], "listed with no result model in RESULT_MODELS"


@pytest.mark.parametrize("tool", list(CASES))
async def test_every_tool_in_every_era(session: Session, tool: str):
    if tool not in session.tools:
        pytest.fail(f"a case drives {tool}, which tools/list over {session.tag} does not name: {sorted(session.tools)}")
    await CASES[tool](session)
    assert tool in session.calls


# -- raw JSON-RPC probes: server/discover, and tools/list as received ---------------------------


def check_discover(result: dict[str, Any], where: str) -> None:
    """A DiscoverResult as mcp-2026-07-28.md describes it: supported versions, capabilities and
    identity, `resultType`, the cache hints, the server's identity in `_meta`."""
    assert "2026-07-28" in result["supportedVersions"], (where, result)
    assert "tools" in result["capabilities"] and "resources" in result["capabilities"], (where, result)
    assert result["resultType"] == "complete", (where, result)
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0 and result["cacheScope"] in ("public", "private")
    assert result["_meta"][SERVER_INFO]["name"] == "knowmesh", (where, result)
    assert "search" in result.get("instructions", ""), where


def check_tools_list(message: dict[str, Any], era: str, where: str) -> None:
    result = message["result"]
    assert {tool["name"] for tool in result["tools"]} >= set(CASES), where
    if era == "auto":
        assert result["resultType"] == "complete" and "ttlMs" in result and "cacheScope" in result, where
        assert result["_meta"][SERVER_INFO]["name"] == "knowmesh", where
    else:
        assert "resultType" not in result or result["resultType"] == "complete", where


def record_size(key: str, size: int) -> None:
    print(f"tools/list over {key}: {size} bytes as received (limit {LIMIT})")
    assert size < LIMIT, f"tools/list over {key} is {size} bytes, over {LIMIT}"


class RawStdio:
    """`knowmesh-mcp serve --stdio` spoken to in raw JSON-RPC lines."""

    def __init__(self, process: Process, log: Path):
        assert process.stdout is not None and process.stdin is not None
        self.process = process
        self.log = log
        self.lines = BufferedByteReceiveStream(process.stdout)

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def request(self, message: dict[str, Any], timeout: float = CALL_TIMEOUT) -> tuple[dict[str, Any], int]:
        """The reply to `message`, and its size in bytes as it came (the line without its newline)."""
        await self.send(message)
        with anyio.fail_after(timeout):
            while True:
                try:
                    line = await self.lines.receive_until(b"\n", 4 * 1024 * 1024)
                except (anyio.IncompleteRead, anyio.EndOfStream):
                    raise AssertionError(f"the server closed stdout: {self.log.read_text(errors='replace')[-3000:]}") from None
                reply = json.loads(line)
                if reply.get("id") == message["id"]:
                    return reply, len(line)


@asynccontextmanager
async def raw_stdio(folder: Path, name: str) -> AsyncIterator[RawStdio]:
    log = folder / f"{name}.log"
    with open(log, "wb") as errors:
        process = await anyio.open_process(server_command("serve", "--stdio", "--db", str(folder / f"{name}.db"), "--empty"),
                                           env=server_env(KNOWMESH_AGENT_ID=STDIO_AGENT), stderr=errors)
    try:
        yield RawStdio(process, log)
    finally:
        assert process.stdin is not None
        await process.stdin.aclose()
        try:
            with anyio.fail_after(30):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
        await process.aclose()


async def test_stdio_opened_in_the_2026_era(meshes: Meshes):
    """A stdio server whose first message is a 2026-07-28 `server/discover` answers it (and again),
    serves `tools/list` in that era, and refuses a late `initialize` naming the version it serves."""
    async with raw_stdio(meshes.folder, "raw-2026") as server:
        discover = {"jsonrpc": "2.0", "id": "discover", "method": "server/discover", "params": {"_meta": META_2026}}
        first, _ = await server.request(discover, timeout=START_TIMEOUT)
        assert "result" in first, first
        check_discover(first["result"], "stdio, first message")
        again, _ = await server.request({**discover, "id": "discover-again"})
        check_discover(again["result"], "stdio, again")
        listed, size = await server.request({"jsonrpc": "2.0", "id": "list", "method": "tools/list",
                                             "params": {"_meta": META_2026}})
        check_tools_list(listed, "auto", "stdio")
        record_size("2026-07-28 over stdio", size)
        late, _ = await server.request({**INITIALIZE, "id": "late-init"})
        assert late["error"]["code"] == -32022 and "2026-07-28" in late["error"]["data"]["supported"], late


async def test_stdio_server_discover_before_and_after_initialize(meshes: Meshes):
    """A client that opens with a plain `server/discover` (no 2026 `_meta`) gets -32601 and falls
    back to `initialize`, which selects the 2025 era for the whole process (the revision's
    versioning page: legacy semantics "scoped to the stdio process"). A 2026 `server/discover`
    after that is answered with an Invalid Request error saying the connection serves the
    handshake era; a plain one with -32601 again. The connection goes on serving its era."""
    async with raw_stdio(meshes.folder, "raw-2025") as server:
        plain = {"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": {}}
        before, _ = await server.request(plain, timeout=START_TIMEOUT)
        assert before["error"]["code"] == -32601, before
        hello, _ = await server.request(INITIALIZE)
        assert hello["result"]["protocolVersion"] == "2025-11-25" and hello["result"]["serverInfo"]["name"] == "knowmesh", hello
        await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed, size = await server.request({"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {}})
        check_tools_list(listed, "legacy", "stdio")
        record_size("2025-11-25 over stdio", size)
        modern, _ = await server.request({**plain, "id": "discover-2026", "params": {"_meta": META_2026}})
        assert "result" not in modern and modern["error"]["code"] == -32600, modern
        assert "handshake" in modern["error"]["message"], modern
        after, _ = await server.request({**plain, "id": "discover-plain"})
        assert after["error"]["code"] == -32601, after
        still, _ = await server.request({"jsonrpc": "2.0", "id": "still", "method": "tools/list", "params": {}})
        check_tools_list(still, "legacy", "stdio after the probes")


def jsonrpc_messages(response: httpx2.Response) -> list[tuple[dict[str, Any], int]]:
    """The JSON-RPC messages of a /mcp response and the bytes of each as received: the JSON body,
    or each SSE event's data."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].lstrip() for line in response.text.splitlines() if line.startswith("data:")]
        return [(json.loads(line), len(line.encode())) for line in data if line]
    return [(response.json(), len(response.content))]


async def post(http: httpx2.AsyncClient, message: dict[str, Any], era: str) -> tuple[httpx2.Response, dict[str, Any], int]:
    """One POST to /mcp as a client of `era` sends it; the reply to it and its size."""
    headers = dict(HTTP_HEADERS)
    if era == "auto":
        message = {**message, "params": {**message.get("params", {}), "_meta": META_2026}}
        headers |= {"mcp-protocol-version": "2026-07-28", "mcp-method": message["method"]}
    elif message["method"] != "initialize":
        headers["mcp-protocol-version"] = "2025-11-25"
    response = await http.post("/mcp", content=json.dumps(message).encode(), headers=headers)
    assert response.status_code == 200, (response.status_code, response.text[:500])
    replies = [(reply, size) for reply, size in jsonrpc_messages(response) if reply.get("id") == message["id"]]
    assert len(replies) == 1, response.text[:500]
    return response, *replies[0]


async def test_http_server_discover_without_and_after_initialize(http_url: str):
    """Streamable HTTP is stateless here: `server/discover` is answered before any `initialize`,
    and after one just the same; a discover without the 2026 marks is a 2025-era request, which
    has no such method (-32601: the answer a dual-era client falls back on)."""
    async with httpx2.AsyncClient(base_url=http_url, timeout=CALL_TIMEOUT) as http:
        discover = {"jsonrpc": "2.0", "id": "discover", "method": "server/discover", "params": {}}
        response, before, _ = await post(http, discover, "auto")
        assert "mcp-session-id" not in response.headers
        check_discover(before["result"], "HTTP, without initialize")
        _, hello, _ = await post(http, INITIALIZE, "legacy")
        assert hello["result"]["protocolVersion"] == "2025-11-25", hello
        older = {**INITIALIZE, "id": "init-2025-06-18", "params": {**INITIALIZE["params"], "protocolVersion": "2025-06-18"}}
        _, codex, _ = await post(http, older, "legacy")  # what Codex sends
        assert codex["result"]["protocolVersion"] == "2025-06-18", codex
        _, after, _ = await post(http, {**discover, "id": "discover-after"}, "auto")
        check_discover(after["result"], "HTTP, after initialize")
        _, plain, _ = await post(http, {**discover, "id": "discover-plain"}, "legacy")
        assert plain["error"]["code"] == -32601, plain


@pytest.mark.parametrize("era", list(ERAS))
async def test_tools_list_over_http_is_under_8_kb(http_url: str, era: str):
    async with httpx2.AsyncClient(base_url=http_url, timeout=CALL_TIMEOUT) as http:
        if era == "legacy":
            await post(http, INITIALIZE, "legacy")
        _, reply, size = await post(http, {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {}}, era)
    check_tools_list(reply, era, "HTTP")
    record_size(f"{ERAS[era]} over HTTP", size)


# -- the TypeScript SDK's client (npm, 2025 era) ------------------------------------------------


def node_or_skip() -> str:
    node = shutil.which("node")
    missing = ("node is not installed" if node is None
               else None if (TS_CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir()
               else "tests/ts_client/node_modules is missing")
    if missing is None:
        return str(node)
    message = f"{missing}: run scripts/install-test-tools (installs Node.js and npm, then npm ci in tests/ts_client)"
    if os.environ.get("KNOWMESH_REQUIRE_NODE") == "1":
        pytest.fail(message + " (KNOWMESH_REQUIRE_NODE=1)")
    pytest.skip(message)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_typescript_sdk_client_in_the_2025_era(meshes: Meshes, http_url: str, transport: str):
    node = node_or_skip()
    document = BASE_DOCUMENT
    query = [document["signature"]["error"], document["id"], LINUX_ENV, "--"]
    if transport == "stdio":
        target = server_command("serve", "--stdio", "--db", str(meshes.ts_db), "--empty")
        env = server_env(KNOWMESH_AGENT_ID=STDIO_AGENT)
    else:
        target = [f"{http_url}/mcp"]
        env = server_env()
    with anyio.fail_after(START_TIMEOUT + CALL_TIMEOUT):
        done = await anyio.run_process([node, str(TS_CLIENT / "client.mjs"), transport, *query, *target],
                                       env=env, cwd=TS_CLIENT, check=False)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"the TypeScript client over {transport} failed:\n{stderr[-4000:]}"
    out = json.loads(done.stdout)
    assert out["protocolVersion"] == "2025-11-25" and out["server"] == "knowmesh", out
    assert {"search", "read_article"} <= set(out["tools"]), out["tools"]
    where = f"TypeScript SDK over {transport}"
    for tool, result in (("search", out["search"]), ("read_article", out["read"])):
        assert not result.get("isError"), (tool, result)
        check_structured(tool, result["structuredContent"], out["outputSchemas"][tool], where=where)
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"], tool
    assert out["search"]["structuredContent"]["results"][0]["id"] == document["id"], out["search"]
    answers = out["read"]["structuredContent"]["content"]["solutions"]
    assert [answer["id"] for answer in answers] == ["venv-linux"], answers
