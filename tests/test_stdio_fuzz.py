"""`knowmesh-mcp serve --stdio` answers everything: one real server process fed raw lines.

Every request that carries an id gets exactly one response with that id, whatever the line holds
(lone surrogates, JSON nested thousands deep, envelopes of the wrong shape, garbage, oversized
lines), and the process keeps serving. The SDK's own stdio transport drops such lines silently.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 5.0  # seconds a response may take
START_TIMEOUT = 60.0  # the first one waits for the server's imports too, on a busy machine
TOOLS = ["search", "read_article", "article_history", "review_queue", "create_node", "patch_article",
         "revise_article", "undo_edit", "report_outcome", "report_failed_attempt"]
METHODS = ["ping", "tools/list", "tools/call", "resources/read", "resources/templates/list", "resources/list",
           "prompts/list", "prompts/get", "initialize", "notifications/cancelled", "completion/complete"]
ARGUMENT_NAMES = ["q", "env", "ecosystem", "limit", "max_bytes", "id", "fields", "include", "solution",
                  "from_revision", "to_revision", "base_revision", "ops", "summary", "agent", "node", "outcome"]


class StdioServer:
    """A `knowmesh-mcp serve --stdio` subprocess spoken to in raw lines."""

    def __init__(self, db: Path, log: Path):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "KNOWMESH_AGENT_ID": "fuzz-agent"}
        env.pop("KNOWMESH_URL", None)
        self.log_path = log
        self.log = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "knowmesh_mcp.cli.main", "serve", "--stdio", "--db", str(db), "--empty"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, cwd=REPO, env=env,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.ids = itertools.count(1)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next_id(self, prefix: str = "") -> Any:
        number = next(self.ids)
        return f"{prefix}{number}" if prefix else number

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def send(self, message: Any, *, ascii_only: bool = True) -> None:
        """`ascii_only=False` writes strings as UTF-8, so a lone surrogate goes out as its (invalid) bytes."""
        self.send_raw(json.dumps(message, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))

    def collect_until(self, request_id: Any, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
        """Every message the server writes until (and including) the response with `request_id`."""
        seen = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no response with id {request_id!r} within {timeout} s{self.tail()}") from None
            assert line is not None, f"the server closed stdout{self.tail()}"
            message = json.loads(line)  # every line the server writes is JSON
            assert message.get("jsonrpc") == "2.0", message
            seen.append(message)
            if "id" in message and type(message["id"]) is type(request_id) and message["id"] == request_id:
                return seen

    def request(self, message: dict[str, Any], *, timeout: float = TIMEOUT, **options: Any) -> dict[str, Any]:
        self.send(message, **options)
        replies = [m for m in self.collect_until(message["id"], timeout) if m.get("id") == message["id"]]
        assert len(replies) == 1, replies
        return replies[0]

    def ping(self) -> None:
        request_id = self.next_id("ping-")
        assert self.request({"jsonrpc": "2.0", "id": request_id, "method": "ping"}) == {"jsonrpc": "2.0", "id": request_id, "result": {}}

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self) -> str:
        self.log.flush()
        return "\nserver stderr:\n" + self.log_path.read_text(errors="replace")[-3000:]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Any:
    folder = tmp_path_factory.mktemp("stdio-fuzz")
    peer = StdioServer(folder / "fuzz.db", folder / "server.log")
    try:
        hello = peer.request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}},
            timeout=START_TIMEOUT)
        assert hello["result"]["serverInfo"]["name"] == "knowmesh", hello
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        peer.ping()
        yield peer
        assert peer.alive(), peer.tail()
    finally:
        peer.close()


def call(server: StdioServer, tool: str, arguments: Any, **options: Any) -> dict[str, Any]:
    return server.request({"jsonrpc": "2.0", "id": server.next_id(), "method": "tools/call",
                           "params": {"name": tool, "arguments": arguments}}, **options)


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def invalid_argument(reply: dict[str, Any], field: str) -> str:
    result = reply["result"]
    assert result["isError"] is True, reply
    error = result["structuredContent"]["error"]
    assert error["code"] == "invalid_argument" and error["field"] == field, error
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return error["message"]


def rpc_error(reply: dict[str, Any], code: int) -> str:
    assert "result" not in reply and reply["error"]["code"] == code, reply
    return reply["error"]["message"]


# -- the three inputs the SDK drops ------------------------------------------------------


def test_a_lone_surrogate_in_an_argument_is_an_invalid_argument_result(server):
    message = invalid_argument(call(server, "search", {"q": "\ud800"}), "q")  # sent as the escape \ud800
    assert message.startswith("q") and "surrogate" in message
    nested_key = invalid_argument(call(server, "search", {"q": "x", "env": {"os\udfff": 1}}), "env")
    assert "surrogate" in nested_key
    # Sent as raw (invalid UTF-8) bytes, the surrogate becomes U+FFFD like any undecodable byte: a normal search.
    raw = call(server, "search", {"q": "zq\ud800"}, ascii_only=False)
    assert raw["result"].get("isError") is not True and raw["result"]["structuredContent"]["query"].startswith("zq\ufffd")
    server.ping()


def test_json_nested_past_the_sdk_parser_is_answered(server):
    message = invalid_argument(call(server, "search", {"q": "x", "env": nested(250)}), "env")
    assert "nested deeper than 32 levels" in message
    assert "nested deeper" in invalid_argument(call(server, "create_node", {
        "id": "python/deep", "ecosystem": "python", "title": "t", "signature": {"error": "e"}, "content": nested(300, {})}), "content")
    deep_id = server.next_id()  # too deep even for `json`: refused, with the id read from the raw text
    server.send_raw(b'{"jsonrpc":"2.0","id":' + str(deep_id).encode() + b',"method":"tools/call","params":{"name":"search",'
                    b'"arguments":{"q":"x","env":' + b"[" * 50_000 + b"]" * 50_000 + b"}}}")
    too_deep = [m for m in server.collect_until(deep_id) if m.get("id") == deep_id]
    assert len(too_deep) == 1 and "nested too deeply" in rpc_error(too_deep[0], -32600)
    deep_last = server.next_id()  # the id after the deep part: recovered from the raw text
    server.send_raw(b'{"jsonrpc":"2.0","method":"ping","params":{"x":' + b"[" * 20_000 + b"]" * 20_000
                    + b'},"id":' + str(deep_last).encode() + b"}")
    replies = [m for m in server.collect_until(deep_last) if m.get("id") == deep_last]
    assert len(replies) == 1 and replies[0]["error"]["code"] == -32600
    server.ping()


@pytest.mark.parametrize(("envelope", "code", "words"), [
    ({"method": "tools/call", "params": "x"}, -32602, "params of tools/call must be an object"),
    ({"method": "tools/call", "params": ["search"]}, -32602, "params of tools/call must be an object"),
    ({"method": "tools/call", "params": {"arguments": {"q": "x"}}}, -32602, "params.name is required"),
    ({"method": "tools/call", "params": {"name": 5}}, -32602, "params.name must be a string"),
    ({"method": "tools/call", "params": {"name": "search", "arguments": ["x"]}}, -32602, "params.arguments must be an object"),
    ({"method": "resources/read", "params": {}}, -32602, "params.uri is required"),
    ({"method": 5}, -32600, "method must be a string"),
    ({"jsonrpc": "1.0", "method": "ping"}, -32600, 'jsonrpc must be "2.0"'),
    ({"jsonrpc": None, "method": "ping"}, -32600, 'jsonrpc must be "2.0"'),
    ({"params": {}}, -32600, "a request needs a method"),
    ({"method": "nope/nothing"}, -32601, "Method not found"),
])
def test_an_envelope_of_the_wrong_shape_gets_an_error_with_its_id(server, envelope, code, words):
    request_id = server.next_id("shape-")
    reply = server.request({"jsonrpc": "2.0", "id": request_id, **envelope})
    assert words in rpc_error(reply, code)
    server.ping()


@pytest.mark.parametrize("request_id", [None, 1.5, -0.25, True, {}, [1]])
def test_an_id_that_is_no_request_id_is_refused_not_dropped(server, request_id):
    """The SDK reads these as notifications (extra keys ignored) and never answers."""
    server.send({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    echoed = request_id if isinstance(request_id, float) else None
    reply = next(m for m in server.collect_until(echoed) if "error" in m)
    assert reply["id"] == echoed and "id must be a string or an integer" in rpc_error(reply, -32600)
    server.ping()


def test_broken_json_gets_a_parse_error_with_the_id_it_had(server):
    server.send_raw(b'{"jsonrpc":"2.0","id":"cut-1","method":"tools/call","params":{"name":"sea')
    assert rpc_error(server.collect_until("cut-1")[-1], -32700).startswith("not valid JSON")
    server.send_raw(b'{"jsonrpc":"2.0","id":"cut-2","method":"ping","params":{"x":1}')
    assert rpc_error(server.collect_until("cut-2")[-1], -32700).startswith("not valid JSON")
    server.send_raw(b"this is not json")
    garbage = server.collect_until(None)[-1]
    assert garbage["id"] is None and garbage["error"]["code"] == -32700
    server.send_raw(b'[{"jsonrpc":"2.0","id":"batch-1","method":"ping"}]')
    assert "batches are not supported" in rpc_error(server.collect_until(None)[-1], -32600)
    server.send_raw(b"   ")  # a blank line is nothing to answer
    server.ping()


def test_a_line_past_the_size_bound_is_refused_with_its_id(server):
    from knowmesh_mcp.mcp.stdio import MAX_LINE_BYTES

    request_id = server.next_id("big-")
    head = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call"})[:-1].encode()
    server.send_raw(head + b',"params":{"name":"search","arguments":{"q":"' + b"a" * (MAX_LINE_BYTES + 10) + b'"}}}')
    reply = [m for m in server.collect_until(request_id) if m.get("id") == request_id]
    assert len(reply) == 1 and "longer than" in rpc_error(reply[0], -32600)
    server.ping()


def test_replies_echoing_a_lone_surrogate_are_still_written(server):
    """The SDK echoes an unknown tool's name and an unknown method; a lone surrogate there would fail
    its serializer (and end the server): it is written as U+FFFD instead."""
    unknown_tool = call(server, "se\ud800arch", {"q": "x"})
    assert unknown_tool["result"]["isError"] is True and "\ufffd" in unknown_tool["result"]["content"][0]["text"]
    method_id = server.next_id()
    unknown = server.request({"jsonrpc": "2.0", "id": method_id, "method": "nope/\udc80"})
    assert unknown["error"]["code"] == -32601
    server.ping()


def test_a_malformed_response_from_the_client_is_not_answered(server):
    """Answering it with an error could resolve one of the client's own pending requests."""
    server.send({"jsonrpc": "2.0", "id": "mine-1", "result": "not an object"})
    server.send({"jsonrpc": "2.0", "id": "mine-2", "error": {"code": "x"}})
    request_id = server.next_id("after-")
    server.send({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert [message["id"] for message in server.collect_until(request_id)] == [request_id]


def test_argument_errors_over_stdio_are_plain_words(server):
    assert invalid_argument(call(server, "search", {"query": "x"}), "query") == "unknown argument 'query'; did you mean 'q'?"
    assert invalid_argument(call(server, "search", {"q": "x", "limit": 1000}), "limit") == "limit must be an integer between 1 and 20"
    text = call(server, "search", {})["result"]["content"][0]["text"]
    assert "pydantic" not in text and json.loads(text)["error"]["message"].startswith("q is required")
    listed = server.request({"jsonrpc": "2.0", "id": server.next_id(), "method": "tools/list"})["result"]
    assert all(tool["outputSchema"] == {"type": "object"} for tool in listed["tools"]), "structured output, declared"
    assert len(json.dumps(listed, ensure_ascii=False, separators=(",", ":")).encode()) <= 8000, "tools/list within 8 KB"
    server.ping()


# -- anything at all ---------------------------------------------------------------------

TEXT = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.characters(exclude_characters="\n\r"),
               max_size=30)
SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=15)
DEEP = st.integers(0, 400).map(nested)
ARGUMENTS = st.dictionaries(st.sampled_from(ARGUMENT_NAMES) | TEXT, JSON | DEEP, max_size=5)
PARAMS = (st.fixed_dictionaries({"name": st.sampled_from(TOOLS) | TEXT}, optional={"arguments": ARGUMENTS | JSON})
          | st.dictionaries(TEXT, JSON, max_size=4) | JSON)
ENVELOPE = st.fixed_dictionaries(
    {"method": st.sampled_from(METHODS) | TEXT},
    optional={"params": PARAMS, "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0"]) | JSON, "extra": JSON},
)
ITEM = st.one_of(
    st.tuples(st.just("request"), ENVELOPE, st.booleans()),  # an envelope with a fresh id (ASCII-escaped or raw UTF-8)
    st.tuples(st.just("notification"), ENVELOPE, st.booleans()),  # the same without an id
    st.tuples(st.just("cut"), ENVELOPE, st.floats(0, 1)),  # a request cut short: at most one answer
    st.tuples(st.just("text"), TEXT, st.just(False)),
    st.tuples(st.just("bytes"), st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")), st.just(False)),
)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(items=st.lists(ITEM, min_size=1, max_size=5))
def test_every_request_with_an_id_gets_exactly_one_response(server, items):
    asked: list[Any] = []  # ids that must be answered exactly once
    cut: list[Any] = []  # ids of truncated requests: answered at most once
    replies: list[dict[str, Any]] = []
    for kind, value, option in items:
        if kind == "request":
            request_id = server.next_id("fz-") if len(asked) % 2 else server.next_id() + 10**9
            server.send({"jsonrpc": "2.0", **value, "id": request_id}, ascii_only=option)
            asked.append(request_id)
            replies += server.collect_until(request_id)
        elif kind == "notification":
            server.send({"jsonrpc": "2.0", **value}, ascii_only=option)
        elif kind == "cut":
            request_id = server.next_id("cut-")
            text = json.dumps({"jsonrpc": "2.0", "id": request_id, **value})
            server.send_raw(text[: max(1, int(len(text) * option))].encode("utf-8", "surrogatepass"))
            cut.append(request_id)
        elif kind == "text":
            server.send_raw(value.encode("utf-8", "surrogatepass"))
        else:
            server.send_raw(value)
    final = server.next_id("end-")
    server.send({"jsonrpc": "2.0", "id": final, "method": "ping"})
    replies += server.collect_until(final)
    counts = Counter(json.dumps(reply.get("id")) for reply in replies)
    for request_id in asked:
        assert counts[json.dumps(request_id)] == 1, (request_id, replies)
    for request_id in cut:
        assert counts[json.dumps(request_id)] <= 1, (request_id, replies)
    known = {json.dumps(i) for i in [*asked, *cut, final]} | {"null"}
    assert set(counts) <= known, f"responses to ids nobody sent: {set(counts) - known}"
    for reply in replies:
        assert ("result" in reply) != ("error" in reply), reply
    assert server.alive(), server.tail()
