"""`serve`: MCP over stdio (the default, for an MCP client to start; locally or fronting a remote
mesh), or the HTTP API with MCP at /mcp."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from functools import partial
from typing import TYPE_CHECKING

from knowmesh_mcp.cli.mesh import database_path, open_service, remote_url, wants_empty
from knowmesh_mcp.cli.usage import UsageError

if TYPE_CHECKING:
    from knowmesh_mcp.core.identity import AuthMode
    from knowmesh_mcp.mcp.tools.base import ToolMesh

STDIO_HINT = (
    "knowmesh-mcp: an MCP server on stdin/stdout, waiting for an MCP client (it is not interactive). "
    "Let a client start it, e.g. `claude mcp add knowmesh -- knowmesh-mcp`; `knowmesh-mcp --help` lists "
    "the commands. Ctrl-C quits."
)


def run_serve(args: argparse.Namespace) -> int:
    if args.remote and args.http:
        raise UsageError("--remote fronts a remote mesh over stdio; it cannot be used with --http")
    return serve_http(args) if args.http else asyncio.run(serve_stdio(args))


async def serve_stdio(args: argparse.Namespace) -> int:
    tools = served_tools(args)
    if sys.stdin.isatty():  # a person typed the command: no client sends a terminal as stdin
        print(STDIO_HINT, file=sys.stderr)
    remote = args.remote or os.environ.get("KNOWMESH_URL")
    mesh: ToolMesh
    if remote:
        from knowmesh_mcp.services.remote import RemoteMesh
        from knowmesh_mcp.services.remote_api import RemoteApi

        mesh = RemoteMesh(RemoteApi(remote_url(remote)))  # sends $KNOWMESH_TOKEN when set
    else:
        mesh = await open_service(args)  # before importing mcp: a bad database is refused at once
    try:
        from knowmesh_mcp.mcp.server import build_mcp_server

        server = build_mcp_server(partial(the_mesh, mesh), read_only=args.read_only, local_agent=True, tools=tools)
        await server.run_stdio_async()
    finally:
        await mesh.close()
    return 0


def the_mesh(mesh: ToolMesh) -> ToolMesh:
    """The stdio server's mesh getter (with `partial`): every tool call gets the one mesh it opened."""
    return mesh


def served_tools(args: argparse.Namespace) -> tuple[str, ...] | None:
    """--tools, checked against the server's tool names (and --read-only); None serves them all."""
    if args.tools is None:
        return None
    from knowmesh_mcp.mcp.server import READ_TOOLS, TOOL_NAMES

    unknown = [name for name in args.tools if name not in TOOL_NAMES]
    if unknown:
        raise UsageError(
            f"--tools: no tool named {', '.join(map(repr, unknown))}; the tools are {', '.join(TOOL_NAMES)}"
        )
    writes = [name for name in args.tools if name not in READ_TOOLS]
    if args.read_only and writes:
        raise UsageError(f"--tools: {', '.join(writes)} can write, and --read-only serves only {', '.join(READ_TOOLS)}")
    return args.tools


async def check_database(args: argparse.Namespace) -> None:
    """Open (creating and seeding a new one) and close the database, so that a bad one is refused
    with one line before uvicorn starts; the app's own open then finds it ready."""
    service = await open_service(args)
    await service.close()


def serve_http(args: argparse.Namespace) -> int:
    tools = served_tools(args)
    db_path = database_path(args)
    if db_path != ":memory:":
        asyncio.run(check_database(args))

    import uvicorn

    from knowmesh_mcp.api.app import build_app, server_config
    from knowmesh_mcp.api.guard import is_loopback

    auth: AuthMode = args.auth or ("off" if is_loopback(args.host) else "required")
    app = build_app(
        db_path=db_path,
        seed=not wants_empty(args),
        read_only=args.read_only,
        write_limit=args.write_limit,
        host=args.host,
        cors_origins=tuple(args.cors_origin),
        auth=auth,
        tools=tools,
    )
    print(f"knowmesh-mcp serving http://{args.host}:{args.port} (MCP at /mcp, auth {auth})", file=sys.stderr)
    uvicorn.Server(server_config(app, host=args.host, port=args.port, trust_proxy=args.trust_proxy)).run()
    return 0
