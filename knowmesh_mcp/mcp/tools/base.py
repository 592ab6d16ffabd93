"""What every tool module shares: `Calls` (how a tool reaches the mesh, who acts, the write
limit) and the small conversions from parsed arguments to the service's JSON."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp.types import ToolAnnotations
from pydantic import BaseModel

from knowmesh_mcp.core.identity import Actor
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.services.remote import RemoteMesh
from knowmesh_mcp.services.submission import UNCOUNTED, Submission

# Only the hints that differ from the protocol's defaults (not read-only, destructive, not idempotent, open world):
# every byte of tools/list is read into each session's context.
READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True)
APPEND = ToolAnnotations(destructive_hint=False)

ToolMesh = Mesh | RemoteMesh
"""What a tool calls: a local `Mesh`, or a `RemoteMesh` answering through HTTP (mypy checks that each
call a tool makes exists on both, with the same arguments)."""
MeshGetter = Callable[[], ToolMesh]

Submit = Callable[[Submission], Awaitable[dict[str, Any]]]
SubmissionGuard = Callable[[Actor, Any, Submit], Awaitable[dict[str, Any]]]
"""(actor, the HTTP request or None, submit(submission)) -> the accepted body: the HTTP server's write limit."""
Identify = Callable[[Any, Any], Awaitable[Actor]]
"""(the call's `agent` argument, the HTTP request) -> who the call acts as: the HTTP server's token rule."""


@dataclass(frozen=True)
class Calls:
    """How a tool reaches the mesh and says who acts. Over HTTP `identify` is the bearer token's rule
    and `guard` the write limit, as on `/v1`; over stdio (`local_agent`) the mesh's own agent acts
    unless the call names one; in-process the claimed id stands."""

    get_mesh: MeshGetter
    identify: Identify | None = None
    guard: SubmissionGuard | None = None  # given with `identify`, which names the actor it counts
    local_agent: bool = False

    def mesh(self) -> ToolMesh:
        return self.get_mesh()

    async def actor_for(self, agent: dict[str, Any] | None, ctx: Any) -> Actor | None:
        if self.identify is not None:
            return await self.identify(agent, request_of(ctx))
        if self.local_agent:
            return await self.mesh().local_actor(agent)
        return None  # the mesh takes the claimed id (a personal mesh in-process)

    async def submitted(self, actor: Actor | None, ctx: Any, submit: Submit) -> dict[str, Any]:
        """A submission, counted against the HTTP server's write limit when there is one."""
        if self.guard is None:
            return await submit(UNCOUNTED)
        if actor is None:
            raise RuntimeError("a write limit needs `identify`: the HTTP server gives both")
        return await self.guard(actor, request_of(ctx), submit)


def request_of(ctx: Any) -> Any:
    return ctx.request_context.request if ctx is not None else None


def plain(value: Any) -> Any:
    """A parsed sub-object as the JSON the service takes (None stays None)."""
    return value.model_dump(exclude_none=True) if isinstance(value, BaseModel) else value


def without_notes(body: dict[str, Any]) -> dict[str, Any]:
    """A mesh's answer without the deprecation notes of its own request (a remote mesh is sent the
    HTTP names): the tool result notes the names its caller used."""
    body.pop("deprecated", None)
    return body
