"""Looking after a mesh: `doctor` (is the database healthy, and what should its user know) and
`admin` (maintainer actions, on the local database or through a remote mesh's API)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from knowmesh_mcp.cli.mesh import database_path, open_service, remote_url

if TYPE_CHECKING:
    from knowmesh_mcp.core.identity import Actor
    from knowmesh_mcp.services.mesh import Mesh
    from knowmesh_mcp.services.remote import RemoteMesh


class Maintenance(Protocol):
    """What `admin` calls: a local `Mesh`'s maintenance, or a `RemoteMesh`'s with a maintainer's token.

    `actor` is the local maintainer for a `Mesh`, which requires one; a `RemoteMesh` takes None
    (the token proves who acts), so the one type both accept is Any."""

    async def set_status(self, node_id: str, status: Any, *, note: Any = ..., actor: Any) -> dict[str, Any]: ...
    async def confirm_merge(
        self, task_id: Any, *, canonical_id: Any = ..., note: Any = ..., actor: Any
    ) -> dict[str, Any]: ...
    async def resolve_issue(self, number: Any, status: Any, *, note: Any, actor: Any) -> dict[str, Any]: ...
    async def flagged_pairs(self, *, limit: int = ...) -> dict[str, Any]: ...
    async def audit_log(self, *, target: str | None = ..., after: Any = ..., limit: Any = ...) -> dict[str, Any]: ...


async def run_doctor(args: argparse.Namespace) -> int:
    """Exit 0 when healthy, 1 with the reasons when not (also when there is no database yet)."""
    from knowmesh_mcp.services.health import health_lines
    from knowmesh_mcp.store import is_postgres

    path = database_path(args)
    if path != ":memory:" and not is_postgres(path) and not Path(path).exists():
        print(f"knowmesh-mcp: no database at {path} (any command creates it; or pass --db)", file=sys.stderr)
        return 1
    service = await open_service(args, starter=False)
    try:
        report = await service.health.check()
    finally:
        await service.close()
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else "\n".join(health_lines(report)))
    return 0 if report["ok"] else 1


async def run_admin(args: argparse.Namespace) -> int:
    """Maintainer actions. On the local database the actor is the local agent as a maintainer (whoever
    may write the file may do anything to it); with --remote the token proves it."""
    from knowmesh_mcp.core.identity import Actor

    mesh: Mesh | RemoteMesh
    actor: Actor | None
    if args.remote:
        from knowmesh_mcp.services.remote import RemoteMesh
        from knowmesh_mcp.services.remote_api import RemoteApi

        mesh = RemoteMesh(RemoteApi(remote_url(args.remote), token=args.token))
        actor = None
    else:
        service = await open_service(args)
        mesh = service
        actor = Actor(await service.local_agent_id(), "local", role="maintainer")
    try:
        result, line = await admin_action(mesh.maintenance, args, actor)
    finally:
        await mesh.close()
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else line)
    return 0


async def admin_action(
    maintenance: Maintenance, args: argparse.Namespace, actor: Actor | None
) -> tuple[dict[str, Any], str]:
    """Do the action `args` names: its result (for --json) and the line that says what was done."""
    command = args.admin_command
    if command in ("promote", "draft", "deprecate"):
        result = await maintenance.set_status(args.id, args.status, note=args.note, actor=actor)
        changed = (
            f"{result['node']}: {result['previous']} -> {result['status']}"
            if result["changed"]
            else f"{result['node']} is already {result['status']} (nothing recorded)"
        )
        return result, changed
    if command == "merge":
        result = await maintenance.confirm_merge(args.task_id, canonical_id=args.canonical, note=args.note, actor=actor)
        return result, f"merged {result['merged']} into {result['canonical']['id']} (its URLs now answer 301)"
    if command in ("close-issue", "discard-issue"):
        result = await maintenance.resolve_issue(args.number, args.status, note=args.note, actor=actor)
        return result, f"issue {result['issue_number']}: {result['status']}"
    if command == "flagged":
        result = await maintenance.flagged_pairs()
        return result, flagged_lines(result)
    result = await maintenance.audit_log(target=args.target)
    return result, audit_lines(result)


def flagged_lines(result: dict[str, Any]) -> str:
    return (
        "\n".join(
            f"task {t['task_id']}: {t['node']} vs {t['candidate']}, keep {t['canonical_id']}" for t in result["tasks"]
        )
        or "no flagged pairs"
    )


def audit_lines(result: dict[str, Any]) -> str:
    return (
        "\n".join(
            f"{a['id']:>5}  {a['created_at']}  {a['maintainer']['id']:<20}  {a['action']:<13}  {a['target']}"
            + (f"  {a.get('from')} -> {a.get('to')}" if a.get("to") else "")
            + (f"  ({a['note']})" if a["note"] else "")
            for a in result["actions"]
        )
        or "no maintainer actions yet"
    )
