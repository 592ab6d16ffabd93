"""The HTTP service: `/v1` JSON and Markdown routes, `/llms.txt`, the pages, and MCP at `/mcp`, in one ASGI app.

The `/v1` routes are the table of module-level handlers in `api.routes`; what they reach (the
service, who acts, the write limit, the read-only flag) is `api.state.ApiState`, set once as
`app.state.api`, its service opened by `lifespan`. Every error, including malformed requests, is
the JSON body of `KnowmeshError` with the spec's status; nothing reaches the client as a bare 500.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Collection
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from knowmesh_mcp.api.auth import auth_middleware
from knowmesh_mcp.api.guard import CrossSiteGuard, is_loopback
from knowmesh_mcp.api.http_io import TRUST_HEADER
from knowmesh_mcp.api.routes import ROUTES
from knowmesh_mcp.api.state import ApiState
from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.core.identity import AuthMode
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.web.pages import page_routes, wants_html
from knowmesh_mcp.web.shell import error_page

log = logging.getLogger("knowmesh.http")


def error_response(error: KnowmeshError) -> JSONResponse:
    return JSONResponse(error.to_body(), status_code=error.status, headers=TRUST_HEADER)


def moved_location(request: Request, merged: str, canonical: str) -> str:
    """The request's URL with the node id after its route prefix swapped (ids may hold `nodes`)."""
    path = request.url.path
    for prefix in ("/v1/nodes/", "/nodes/"):
        if path.startswith(prefix + merged):
            path = prefix + canonical + path[len(prefix + merged) :]
            break
    return path + (f"?{request.url.query}" if request.url.query else "")


async def on_knowmesh_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, KnowmeshError)
    response = error_response(error)
    if error.status == 301:  # a merged node: the same URL with the canonical id
        response.headers["Location"] = moved_location(
            request, error.details["merged"], error.top_level["canonical"]["id"]
        )
    if "retry_after_seconds" in error.details:
        response.headers["Retry-After"] = str(error.details["retry_after_seconds"])
    return response


async def on_http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 404 and wants_html(request) and not request.url.path.startswith("/v1/"):
        # a browser on a mistyped page gets a page with the way home; API clients keep the JSON error
        return error_page(404, "Page not found", f"There is no page at {request.url.path}.")
    code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
    response = error_response(KnowmeshError(error.status_code, code, str(error.detail)))
    response.headers.update(error.headers or {})  # Allow on a 405
    return response


async def on_unexpected(request: Request, error: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(KnowmeshError(500, "internal_error", "unexpected server error; please report it"))


EXCEPTION_HANDLERS = {KnowmeshError: on_knowmesh_error, HTTPException: on_http_error, Exception: on_unexpected}


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Open the service when the app was given a `db_path` (and close it after), and run the MCP
    server's session manager while the app serves."""
    state: ApiState = app.state.api
    owned = state.service is None
    if owned:
        state.service = await Mesh.open(state.db_path or ":memory:", seed=state.seed)
    try:
        if state.mcp_server is not None:
            async with state.mcp_server.session_manager.run():
                yield
        else:
            yield
    finally:
        if owned:
            service, state.service = state.current(), None
            await service.close()


def mcp_routes(state: ApiState, *, host: str, tools: Collection[str] | None) -> list[Any]:
    """The MCP server at `/mcp` (kept in `state` for the lifespan), its tools reaching the service,
    the token rule and the write limit through `state` as /v1 does."""
    from knowmesh_mcp.mcp.http_checks import checked_mcp_routes
    from knowmesh_mcp.mcp.server import build_mcp_server

    state.mcp_server = build_mcp_server(
        state.current, read_only=state.read_only, identify=state.mcp_actor, guard=state.mcp_submission, tools=tools
    )
    # Stateless: a session per `initialize` let anyone without a token use up every session
    # (max_sessions) for 30 minutes, and a session lives on one server of a team's several.
    mcp_app = state.mcp_server.streamable_http_app(streamable_http_path="/mcp", host=host, stateless_http=True)
    return checked_mcp_routes(mcp_app.routes)  # a body that is no single message: -32600, as over stdio


def server_config(app: Any, *, host: str, port: int, trust_proxy: str | None = None) -> Any:
    """The uvicorn configuration of `serve --http` (and of the tests' servers).

    Forwarded headers are believed only from `trust_proxy` (comma-separated addresses): uvicorn
    trusts them from 127.0.0.1 by default, which let any local client pick its address.
    """
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        proxy_headers=bool(trust_proxy),
        forwarded_allow_ips=trust_proxy or "",
    )


def build_app(
    *,
    service: Mesh | None = None,
    db_path: str | None = None,
    seed: bool = True,
    read_only: bool = False,
    with_mcp: bool = True,
    write_limit: int = 10,
    host: str = "127.0.0.1",
    cors_origins: tuple[str, ...] = (),
    auth: AuthMode = "off",
    tools: Collection[str] | None = None,
) -> Starlette:
    """The ASGI app. Pass an open `service`, or a `db_path` that the app opens on start-up.

    `host` is the address served: on loopback, `/mcp` checks Host and Origin against loopback
    (DNS-rebinding protection); on any other address (a team's mesh) it accepts every Host.
    `auth` is what a write without a bearer token may do (`identity.acting`); a valid token
    proves its agent in every mode. `tools`: the MCP tools served at `/mcp` (None: all).
    """
    state = ApiState(
        service=service, read_only=read_only, write_limit=write_limit, auth=auth, db_path=db_path, seed=seed
    )
    routes: list[Any] = [*ROUTES, *page_routes(state.current)]
    if with_mcp:
        routes += mcp_routes(state, host=host, tools=tools)
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(CrossSiteGuard, loopback=is_loopback(host), cors_origins=cors_origins),
            *auth_middleware(state.tokens),
        ],
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.api = state
    return app
