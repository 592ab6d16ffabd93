"""Who may write to this server from a browser: the cross-site policy of the HTTP app.

A web page can make a browser send a "simple" request (form-encoded or `text/plain`, no
preflight) to any address, a local knowmesh server included, and a DNS-rebinding page can even
read the answers. So `/v1` writes take `application/json` only (415 otherwise: a JSON body
forces a CORS preflight), and a server on a loopback address answers only requests whose `Host` is
a loopback name (a rebound page reads and writes under its own name) and refuses writes whose
`Origin` is another site (403), as `/mcp` does with its own check. CORS is off unless origins are
allowed by flag; then those origins get their preflight answered and their responses readable.
Pure ASGI, no dependency on the service.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import urlsplit

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON_TYPES = ("application/json",)  # `application/json; charset=utf-8` too


def is_loopback(host: str) -> bool:
    """`localhost`, or an address of 127.0.0.0/8 or ::1 (bracketed or not), exactly: a name that only
    starts like one (`127.0.0.1.attacker.example`) is any site's."""
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str:
    """The name part of a Host header or an origin's netloc (`[::1]:8765` -> `[::1]`)."""
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Refusal(NamedTuple):
    """Why a write is refused: the status, the error code and the message the client reads."""

    status: int
    code: str
    message: str


class CrossSiteGuard:
    """ASGI middleware: 403 for a foreign Host on loopback, 415 for non-JSON `/v1` writes, 403 for a
    foreign Origin of a write on loopback, CORS by allow-list."""

    def __init__(self, app: ASGIApp, *, loopback: bool, cors_origins: Iterable[str] = ()):
        self.app = app
        self.loopback = loopback
        self.cors_origins = frozenset(origin.rstrip("/") for origin in cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"] if scope["type"] == "http" else ""
        if not path or path == "/mcp" or path.startswith("/mcp/"):  # MCP checks Host and Origin itself (421)
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        host = _host_name(headers.get("host", ""))
        if self.loopback and not is_loopback(host):
            await _error(send, 403, "forbidden_host", f"this server answers loopback names only, not {host!r}")
            return
        if not path.startswith("/v1"):
            await self.app(scope, receive, send)
            return
        origin = headers.get("origin")
        allowed = origin is not None and origin.rstrip("/") in self.cors_origins
        method = scope["method"]
        if method == "OPTIONS" and "access-control-request-method" in headers:
            await self._preflight(send, origin if allowed else None)
            return
        if method in WRITE_METHODS:
            refusal = self._refusal(headers, origin, allowed)
            if refusal is not None:
                await _error(send, refusal.status, refusal.code, refusal.message)
                return
        if allowed and origin is not None:  # allowed names an origin; mypy wants it said
            await self.app(scope, receive, _with_cors(send, origin))
        else:
            await self.app(scope, receive, send)

    def _refusal(self, headers: dict[str, str], origin: str | None, allowed: bool) -> Refusal | None:
        content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        if has_body and content_type not in JSON_TYPES:
            return Refusal(
                415, "unsupported_media_type", "writes take a JSON body: send Content-Type: application/json"
            )
        if self.loopback:
            if origin is not None and not allowed and not is_loopback(_host_name(urlsplit(origin).netloc)):
                return Refusal(403, "forbidden_origin", f"writes from the page at {origin!r} are not allowed")
        elif origin is not None and not allowed and origin != "null" and self.cors_origins:
            return Refusal(
                403, "forbidden_origin", f"writes from the page at {origin!r} are not allowed (--cors-origin)"
            )
        return None

    async def _preflight(self, send: Send, origin: str | None) -> None:
        headers = [(b"vary", b"Origin")]
        if origin is not None:
            headers += [
                (b"access-control-allow-origin", origin.encode("latin-1")),
                (b"access-control-allow-methods", b"GET, POST, PATCH, OPTIONS"),
                (b"access-control-allow-headers", b"content-type, authorization, if-none-match"),
                (b"access-control-max-age", b"600"),
            ]
        await send({"type": "http.response.start", "status": 204 if origin else 403, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def _with_cors(send: Send, origin: str) -> Send:
    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {
                **message,
                "headers": [
                    *message.get("headers", []),
                    (b"access-control-allow-origin", origin.encode("latin-1")),
                    (
                        b"access-control-expose-headers",
                        b"etag, x-knowmesh-article-revision, x-knowmesh-node-version, x-knowmesh-content-trust",
                    ),
                    (b"vary", b"Origin"),
                ],
            }
        await send(message)

    return sending


async def _error(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps(
        {"error": {"code": code, "message": message}}, separators=(",", ":")
    ).encode()  # compact, as every body
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-knowmesh-content-trust", b"untrusted-data"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
