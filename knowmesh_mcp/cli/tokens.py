"""`token add|list|revoke`: the agent tokens of a mesh."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from knowmesh_mcp.cli.mesh import open_service

if TYPE_CHECKING:
    from knowmesh_mcp.services.mesh import Mesh


async def run_token(args: argparse.Namespace) -> int:
    service = await open_service(args, starter=False)
    try:
        if args.token_command == "add":
            await add_token(service, args)
        elif args.token_command == "list":
            await list_tokens(service, args)
        else:
            revoked = await service.tokens.revoke_tokens(args.agent_id, args.token_id)
            print(f"revoked {revoked} token(s) of {args.agent_id}")
    finally:
        await service.close()
    return 0


async def add_token(service: Mesh, args: argparse.Namespace) -> None:
    """The token on stdout (for a pipe to take), how to use it on stderr."""
    made = await service.tokens.add_token(args.agent_id, role=args.role)
    print(made["token"])
    print(
        f"token {made['id']} for {made['agent_id']} ({made['role']}): shown once, stored as a hash only. "
        "Send it as `Authorization: Bearer <token>`, or set KNOWMESH_TOKEN.",
        file=sys.stderr,
    )


async def list_tokens(service: Mesh, args: argparse.Namespace) -> None:
    listed = await service.tokens.list_tokens()
    if args.json:
        print(json.dumps(listed, indent=2))
    elif not listed:
        print("no tokens: add one with `knowmesh-mcp token add AGENT_ID`")
    else:
        width = max(len("AGENT"), *(len(row["agent_id"]) for row in listed))
        print(f"{'ID':<8}  {'AGENT':<{width}}  {'ROLE':<10}  {'CREATED':<20}  {'LAST USED':<20}  STATE")
        for row in listed:
            state = "revoked" if row["revoked_at"] else "live"
            print(
                f"{row['id']:<8}  {row['agent_id']:<{width}}  {row['role']:<10}  {minute(row['created_at']):<20}  "
                f"{minute(row['last_used_at']):<20}  {state}"
            )


def minute(timestamp: str | None) -> str:
    """A stored UTC timestamp as people read it: 2026-12-01 11:44 UTC."""
    return f"{timestamp[:10]} {timestamp[11:16]} UTC" if timestamp else "never"
