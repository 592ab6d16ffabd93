"""MCP over stdio that answers every line.

The SDK's own stdio transport drops a line its parser refuses (a lone surrogate, JSON nested
past about 200 levels, a request of the wrong shape) without a word, and reads a request whose
id is null or a fraction as a notification. `answering_stdio` keeps its descriptor handling and
its fast parser, and answers everything else with a JSON-RPC error carrying the request's id.

Depends on the `mcp` SDK and `limits` only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, BinaryIO, NamedTuple

import anyio
import mcp_types
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from knowmesh_mcp.core.limits import MAX_DEPTH

log = logging.getLogger("knowmesh.mcp")


def compact_json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def shown(text: str, limit: int = 60) -> str:
    """Client text fit to quote in a message: bounded, and a lone surrogate written as its escape."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


MAX_LINE_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE  # the SDK's bound on an HTTP request body (4 MiB)
_STRUCTURE = re.compile(r'["{}\[\],:]')
_SURROGATE = re.compile("[\ud800-\udfff]")


@contextmanager
def claimed_stdio() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """The protocol's stdin and stdout on private descriptors. Meanwhile fd 0 reads the null
    device and fd 1 writes to stderr, as under the SDK's own stdio transport: a stray print, or a
    child process reading stdin, cannot touch the wire. Restored on exit."""
    try:
        wire_in, wire_out = os.dup(0), os.dup(1)
    except OSError:  # nothing to divert: serve the streams in place
        yield sys.stdin.buffer, sys.stdout.buffer
        return
    with suppress(AttributeError, OSError, ValueError):
        sys.stdout.flush()
    try:
        with open(os.devnull, "rb") as null:
            os.dup2(null.fileno(), 0)
        os.dup2(2, 1)
        # Never closed: a reader thread may still block on the descriptor after the transport exits.
        yield os.fdopen(wire_in, "rb", closefd=False), os.fdopen(wire_out, "wb", closefd=False)
    finally:
        with suppress(OSError):
            os.dup2(wire_in, 0)
            os.dup2(wire_out, 1)


@asynccontextmanager
async def answering_stdio(
    stdin: BinaryIO | None = None, stdout: BinaryIO | None = None, *, lines: PolledLines | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """MCP over stdio, like the SDK's `stdio_server()`, except that no line goes unanswered.

    The SDK parses each line with its message union and drops whatever fails, without a word:
    lone surrogates and JSON nested past about 200 levels (its parser refuses both), a request
    of the wrong shape, and (read as a notification) a request whose id is null or a fraction.
    Here a line the SDK cannot parse is parsed again by `json` and handed on if it is a valid
    message (so the tool's own checks answer it), and anything else that is not a notification
    or a response gets a JSON-RPC error with its id (recovered from the raw text when the JSON
    itself is broken, too deep or too long; null when there is none). Replies the SDK cannot
    serialize (a lone surrogate echoed back) are written with U+FFFD in its place.

    Lines are read in the event loop when stdin is a pipe, socket or terminal (`PolledLines`), so
    Ctrl-C ends the server at once; else, and for streams passed in, by a worker thread.
    """
    if stdin is None or stdout is None:
        with claimed_stdio() as (wire_in, wire_out):
            lines = pollable_lines(wire_in) if stdin is None else None
            async with answering_stdio(stdin or wire_in, stdout or wire_out, lines=lines) as streams:
                yield streams
        return
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage | dict[str, Any]](0)
    answers = write_send.clone()

    async def readline(limit: int) -> bytes:
        if lines is not None:
            return await lines.readline(limit)
        return await anyio.to_thread.run_sync(stdin.readline, limit, abandon_on_cancel=True)

    def write(line: bytes) -> None:
        stdout.write(line)
        stdout.flush()

    async def reader() -> None:
        async with read_send, answers:
            while line := await readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    while (rest := await readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                        pass
                    given = top_level_id(line.decode("utf-8", errors="replace"))
                    await answers.send(
                        rpc_error(
                            given.value if given.found else None,
                            mcp_types.INVALID_REQUEST,
                            f"the message is longer than {MAX_LINE_BYTES} bytes",
                        )
                    )
                    continue
                try:
                    decoded = decode_line(line)
                except Exception:  # a bug here must not end the session
                    log.exception("could not read a line from stdin")
                    decoded = rpc_error(None, mcp_types.INTERNAL_ERROR, "the server could not read this message")
                if isinstance(decoded, SessionMessage):
                    await read_send.send(decoded)
                elif decoded is not None:
                    await answers.send(decoded)

    async def writer() -> None:
        broken = False
        async with write_receive:
            async for item in write_receive:
                if broken:
                    continue  # the client is gone: keep draining so the server can wind down
                try:
                    await anyio.to_thread.run_sync(write, encode_message(item).encode("utf-8") + b"\n")
                except OSError:
                    log.info("stdout is closed; dropping further replies")
                    broken = True

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        yield read_receive, write_send


class PolledLines:
    """`readline(limit)` of a pipe, socket or terminal, waiting in the event loop instead of a thread.

    A thread blocked in `read()` cannot be cancelled: on Ctrl-C the server stopped answering but the
    process lived on until the client (or Ctrl-D) closed stdin. Here the wait is cancellable, and a
    read happens only once the descriptor is readable, so it returns at once with what is there
    (the descriptor stays blocking: it may be a terminal shared with the user's shell)."""

    CHUNK = 1 << 16

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = bytearray()
        self.scanned = 0  # bytes of the buffer known to hold no newline
        self.ended = False

    async def readline(self, limit: int) -> bytes:
        """Up to `limit` bytes, through the first newline if it comes sooner; b"" at the end."""
        while True:
            end = self.buffer.find(b"\n", self.scanned, limit)
            if end >= 0 or len(self.buffer) >= limit or self.ended:
                size = end + 1 if end >= 0 else min(limit, len(self.buffer))
                line = bytes(self.buffer[:size])
                del self.buffer[:size]
                self.scanned = 0
                return line
            self.scanned = len(self.buffer)
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, self.CHUNK)
            except BlockingIOError:  # someone else made it non-blocking and took the data first
                continue
            except OSError:  # a terminal that hung up (EIO): the input has ended
                chunk = b""
            if chunk:
                self.buffer += chunk
            else:
                self.ended = True


def pollable_lines(stream: BinaryIO) -> PolledLines | None:
    """A `PolledLines` over a fresh stream's descriptor when the event loop can wait on it: a pipe,
    socket or terminal on POSIX (never a regular file or /dev/null, which epoll refuses)."""
    if os.name != "posix":
        return None
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    return PolledLines(fd) if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd) else None


def decode_line(raw: bytes) -> SessionMessage | dict[str, Any] | None:
    """One stdio line: the message to dispatch, the error to answer with, or None (nothing to say)."""
    text = raw.decode("utf-8", errors="replace").strip()  # undecodable bytes become U+FFFD, as in the SDK
    if not text:
        return None
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError:
        return decode_slowly(text)
    if isinstance(message, mcp_types.JSONRPCNotification) and '"id"' in text:
        given = top_level_id(text)
        if given.found:  # the union read a request with a null, fractional or boolean id as a notification
            return rpc_error(given.value, mcp_types.INVALID_REQUEST, ID_RULE)
    return SessionMessage(message)


ID_RULE = "id must be a string or an integer"


def decode_slowly(text: str) -> SessionMessage | dict[str, Any] | None:
    """A line the SDK's parser refused: a valid message after all (lone surrogates, deep nesting),
    or the error that says what is wrong with it."""
    try:
        value = json.loads(text)
    except RecursionError:
        given = top_level_id(text)
        return rpc_error(
            given.value if given.found else None,
            mcp_types.INVALID_REQUEST,
            f"the message is nested too deeply to read (arguments may nest {MAX_DEPTH} levels)",
        )
    except ValueError as error:
        given = top_level_id(text)
        return rpc_error(given.value if given.found else None, mcp_types.PARSE_ERROR, f"not valid JSON: {error}")
    if not isinstance(value, dict):
        batch = " (batches are not supported)" if isinstance(value, list) else ""
        return rpc_error(None, mcp_types.INVALID_REQUEST, f"a message must be one JSON object{batch}")
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as error:
        return envelope_error(value, error)
    if isinstance(message, mcp_types.JSONRPCNotification) and "id" in value:
        return rpc_error(value["id"], mcp_types.INVALID_REQUEST, ID_RULE)
    return SessionMessage(message)


def envelope_error(value: dict[str, Any], error: ValidationError) -> dict[str, Any] | None:
    """The answer to an object that is no JSON-RPC message, in plain words; None for a malformed
    response (answering it could resolve one of the client's own requests)."""
    request_id = value.get("id")
    usable_id = request_id if isinstance(request_id, int | str | float) and not isinstance(request_id, bool) else None
    method, params = value.get("method"), value.get("params")
    if "method" not in value and ("result" in value or "error" in value):
        log.warning("dropped a malformed response from the client (id %r)", shown(str(request_id)))
        return None
    if value.get("jsonrpc") != "2.0":
        problem, code = 'jsonrpc must be "2.0"', mcp_types.INVALID_REQUEST
    elif "method" not in value:
        problem, code = "a request needs a method", mcp_types.INVALID_REQUEST
    elif not isinstance(method, str):
        problem, code = "method must be a string", mcp_types.INVALID_REQUEST
    elif "id" in value and (usable_id is None or isinstance(request_id, float)):
        problem, code = ID_RULE, mcp_types.INVALID_REQUEST
    elif params is not None and not isinstance(params, dict):
        problem, code = f"params of {shown(method)} must be an object", mcp_types.INVALID_PARAMS
    else:
        first = error.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"][1:]) or "message"
        problem, code = f"{shown(field)}: {first['msg'][:1].lower()}{first['msg'][1:]}", mcp_types.INVALID_REQUEST
    return rpc_error(usable_id, code, problem)


def rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error for a request the SDK never sees (its id may be one the SDK's types refuse)."""
    if not isinstance(request_id, int | str | float) or isinstance(request_id, bool):
        request_id = None
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def encode_message(item: SessionMessage | dict[str, Any]) -> str:
    """One message as a line of JSON. Text that is not valid Unicode (a lone surrogate the client
    sent, echoed in a reply) is written as U+FFFD rather than failing the write; a reply that
    cannot be written at all becomes an internal error for its request."""
    if isinstance(item, dict):
        return _SURROGATE.sub("\ufffd", compact_json(item))
    with suppress(PydanticSerializationError):
        return item.message.model_dump_json(by_alias=True, exclude_unset=True)
    try:
        dumped = item.message.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return _SURROGATE.sub("\ufffd", json.dumps(dumped, ensure_ascii=False, separators=(",", ":"), default=str))
    except Exception:
        log.exception("could not write a reply")
        request_id = getattr(item.message, "id", None)
        return compact_json(rpc_error(request_id, mcp_types.INTERNAL_ERROR, "the server could not write its reply"))


class TopLevelId(NamedTuple):
    """The top-level "id" member of a message's text, as `top_level_id` reads it."""

    found: bool  # the text has one
    value: Any  # its value; None when absent or unreadable


def top_level_id(text: str) -> TopLevelId:
    """The top-level "id" member of a JSON object's text, read without parsing the whole: the text
    may be broken, cut short, or nested too deeply for `json`."""
    depth, key, expect_key, position = 0, None, False, 0
    while match := _STRUCTURE.search(text, position):
        token, position = match.group(), match.end()
        if token == '"':
            end = string_end(text, match.start())
            if end < 0:
                break
            if depth == 1 and expect_key:
                key, expect_key = text[match.start() : end], False
            position = end
        elif token in "{[":
            depth += 1
            expect_key = depth == 1 and token == "{"
        elif token in "}]":
            depth -= 1
            if depth <= 0:
                break
        elif token == ",":
            expect_key = depth == 1
        elif depth == 1 and key is not None:  # ":" after a top-level key
            if key == '"id"':
                try:
                    value, _ = json.JSONDecoder().raw_decode(text, len(text) - len(text[position:].lstrip()))
                except (ValueError, RecursionError):
                    return TopLevelId(found=True, value=None)
                return TopLevelId(found=True, value=value)
            key = None
    return TopLevelId(found=False, value=None)


def string_end(text: str, start: int) -> int:
    """The index after the quote that closes the JSON string opening at `start`, or -1."""
    position = start + 1
    while (quote := text.find('"', position)) >= 0:
        backslashes = 0
        while text[quote - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return quote + 1
        position = quote + 1
    return -1
