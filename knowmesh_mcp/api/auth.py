"""Bearer tokens on the HTTP server: `/v1` routes and MCP at `/mcp` prove an agent the same way.

The MCP SDK's token-verifier hook does the checking: `MeshTokenVerifier` is its `TokenVerifier`,
`BearerAuthBackend` turns a valid `Authorization: Bearer` header into `request.user`, and
`AuthContextMiddleware` makes it visible to tools. A request without a token passes through
(reads are open in every auth mode); `acting` then decides what a write without one may do.
Depends on `identity`, `errors` and the service's `verify_token`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from knowmesh_mcp.core.identity import Actor, AuthMode, Credential, acting, invalid_token


class TokenChecker(Protocol):
    async def verify_token(self, token: str) -> Credential | None: ...


class MeshTokenVerifier:
    """The SDK's `TokenVerifier` over this mesh's agent tokens: client_id is the agent, its scope the role."""

    def __init__(self, tokens: Callable[[], TokenChecker]):
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        credential = await self.tokens().verify_token(token)
        if credential is None:
            return None
        return AccessToken(token=token, client_id=credential.agent_id, scopes=[credential.role])


class RefuseUnknownTokens:
    """401 `invalid_token` for a bearer that is no live agent token, on any route, reads too: a
    client with a mistyped or revoked token learns it at once, not as an unproven write later.
    The undo route is left alone: its bearer may be the edit's undo token (the spec's form)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and not isinstance(scope.get("user"), AuthenticatedUser)
            and not UNDO_PATH.match(scope["path"])
        ):
            connection = HTTPConnection(scope)
            if bearer(connection):
                error = invalid_token()
                response = JSONResponse(
                    error.to_body(),
                    status_code=error.status,
                    headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


UNDO_PATH = re.compile(r"^/v1/article-revisions/[^/]+/undo$")


def auth_middleware(tokens: Callable[[], TokenChecker]) -> list[Middleware]:
    return [
        Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(MeshTokenVerifier(tokens))),
        Middleware(RefuseUnknownTokens),
        Middleware(AuthContextMiddleware),
    ]


def bearer(connection: HTTPConnection) -> str | None:
    scheme, _, value = connection.headers.get("authorization", "").partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def credential_of(connection: HTTPConnection | None) -> Credential | None:
    """The agent a request's valid token proves, or None."""
    user = connection.scope.get("user") if connection is not None else None
    if isinstance(user, AuthenticatedUser):
        return Credential(user.access_token.client_id, user.access_token.scopes[0])
    return None


def actor_of(connection: HTTPConnection | None, agent: Any, mode: AuthMode) -> Actor:
    """Who a request acts as (`RefuseUnknownTokens` has already refused a bearer that is no token)."""
    return acting(agent, credential_of(connection), mode)
