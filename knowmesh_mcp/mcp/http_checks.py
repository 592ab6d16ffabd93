"""`POST /mcp` answers a body that is no single JSON-RPC message as the stdio server does.

The SDK's 2025-era streamable HTTP transport reads a request whose id is no request id (an
object, null, an array, a boolean) as a notification: 202 and no answer, where JSON-RPC 2.0
wants Invalid Request (-32600) with id null. It answers a batch (no longer part of MCP since
2025-06-18) or a bare JSON value with -32602 and a dump of pydantic's union errors. Its
2026-07-28 path answers -32600 with a generic message. `SingleMessageCheck` sits in front of
the SDK's `/mcp` endpoint and reads the body with stdio's reader (`stdio_transport.decode_line`),
so both transports and both eras refuse the same messages with the same words (broken JSON,
too, is stdio's -32700 with the id recovered from the text). Everything else, including every
valid message, reaches the SDK with its body replayed byte for byte.

It answers only what the SDK would have read: a body over the SDK's size bound, a refused Host,
Origin or Content-Type, and an unacceptable Accept header go on to the SDK, which refuses them
itself (413, 421, 403, 400, 406) before it reads the body.

Depends on the `mcp` SDK, starlette and `stdio_transport` only.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from knowmesh_mcp.mcp.stdio import decode_line, encode_message

log = logging.getLogger("knowmesh.mcp")


def checked_mcp_routes(routes: Sequence[BaseRoute]) -> list[BaseRoute]:
    """The routes of the SDK's `streamable_http_app()`, its MCP endpoint behind `SingleMessageCheck`.

    Raises if there is no such endpoint: a later SDK that builds its routes otherwise must not
    silently lose the check."""
    checked: list[BaseRoute] = []
    wrapped = 0
    for route in routes:
        manager = getattr(getattr(route, "endpoint", None), "session_manager", None)
        if isinstance(route, Route) and isinstance(manager, StreamableHTTPSessionManager):
            route = Route(
                route.path,
                endpoint=SingleMessageCheck(route.endpoint, manager),
                methods=route.methods,
                name=route.name,
                include_in_schema=route.include_in_schema,
            )
            wrapped += 1
        checked.append(route)
    if not wrapped:
        raise RuntimeError("no streamable HTTP endpoint among the MCP routes: the SDK's route layout changed")
    return checked


class SingleMessageCheck:
    """ASGI in front of the SDK's MCP endpoint: a POST whose body is no single valid JSON-RPC
    message gets the stdio server's JSON-RPC error (HTTP 400) instead of the SDK's answer."""

    def __init__(self, app: ASGIApp, manager: StreamableHTTPSessionManager):
        self.app = app
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not await self.read_by_the_sdk(scope):
            await self.app(scope, receive, send)
            return
        read = await bounded_body(scope, receive, self.manager.max_request_body_size)
        error = refusal(read.body) if read.body is not None else None
        if error is None:
            await self.app(scope, read.receive, send)
            return
        response = Response(encode_message(error).encode("utf-8"), status_code=400, media_type="application/json")
        await response(scope, read.receive, send)

    async def read_by_the_sdk(self, scope: Scope) -> bool:
        """Whether the SDK would read this POST's body: its Host, Origin and Content-Type checks
        (`TransportSecurityMiddleware`, headers only) and its Accept check pass, in both eras alike."""
        request = Request(scope)
        security = TransportSecurityMiddleware(self.manager.security_settings)
        if await security.validate_request(request, is_post=True) is not None:
            return False
        has_json, has_sse = check_accept_headers(request)
        return has_json and (self.manager.json_response or has_sse)


def refusal(body: bytes) -> dict[str, object] | None:
    """The JSON-RPC error stdio would answer this body with, or None to leave it to the SDK (a
    valid message, an empty body, a malformed response)."""
    try:
        decoded = decode_line(body)
    except Exception:  # a bug here must not take /mcp down: the SDK still answers
        log.exception("could not check an MCP request body")
        return None
    return decoded if isinstance(decoded, dict) else None


class BoundedBody(NamedTuple):
    """A request body as `bounded_body` reads it."""

    body: bytes | None  # the whole body, or None when it is longer than the limit or did not arrive whole
    receive: Receive  # replays every message read, then goes on with the client's


async def bounded_body(scope: Scope, receive: Receive, limit: int) -> BoundedBody:
    """The whole body, if it is within `limit`, and a `receive` that replays what was read.

    Bounded as the SDK bounds it (`RequestBodyLimitMiddleware`, which still runs after this):
    a longer body is never held, only handed on for the SDK to answer 413."""
    read: deque[Message] = deque()
    declared = Headers(scope=scope).get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return BoundedBody(None, receive)
    body = bytearray()
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            whole = None
            break
        body += message.get("body", b"")
        if len(body) > limit:
            whole = None
            break
        if not message.get("more_body", False):
            whole = bytes(body)
            read = deque([{"type": "http.request", "body": whole, "more_body": False}])
            break

    async def replay() -> Message:
        if read:
            return read.popleft()
        return await receive()

    return BoundedBody(whole, replay)
