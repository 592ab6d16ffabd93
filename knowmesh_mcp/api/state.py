"""What every `/v1` handler reaches, as `request.app.state.api`: the service, who acts, the write
limit and the read-only flag (`ApiState`), and the two getters handlers call (`api`, `mesh`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from knowmesh_mcp.api.auth import actor_of
from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.core.identity import Actor, AuthMode
from knowmesh_mcp.mcp.tools.base import Submit
from knowmesh_mcp.services.access import AgentTokens
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.services.submission import Submission


@dataclass
class ApiState:
    """What the handlers reach, as `request.app.state.api`: the service (given, or opened from
    `db_path` by the app's lifespan), the read-only flag, the write limit and the auth mode (what a
    write without a bearer token may do, `identity.acting`)."""

    service: Mesh | None = None
    read_only: bool = False
    write_limit: int = 10
    auth: AuthMode = "off"
    db_path: str | None = None  # for the lifespan: the store opened when no service was given
    seed: bool = True
    mcp_server: Any = None  # the MCP server mounted at /mcp, whose session manager the lifespan runs

    def current(self) -> Mesh:
        """The service (the getter the pages, the token check and the MCP tools are given)."""
        if self.service is None:
            raise RuntimeError("the app has not started: its lifespan opens the service")
        return self.service

    def tokens(self) -> AgentTokens:
        """The mesh's agent tokens (the getter the bearer check is given)."""
        return self.current().tokens

    def writable(self) -> None:
        if self.read_only:
            raise KnowmeshError(403, "read_only", "this server is read-only")

    def actor(self, request: Request | None, agent: Any) -> Actor:
        """Who a request acts as: its bearer token's agent, else the auth mode's rule for `agent`."""
        return actor_of(request, agent, self.auth)

    async def submission(self, request: Request | None, actor: Actor, submit: Submit) -> dict[str, Any]:
        """A write under --write-limit: 429 past the allowance, counted in the write's own transaction."""
        client = request.client.host if request is not None and request.client else None
        return await submit(Submission.of(actor, await self.current().addresses.ip_hash(client), self.write_limit))

    async def mcp_actor(self, agent: Any, request: Any) -> Actor:
        """Who an /mcp tool call acts as: the same rule and the same token as /v1."""
        return self.actor(request if isinstance(request, Request) else None, agent)

    async def mcp_submission(self, actor: Actor, request: Any, submit: Submit) -> dict[str, Any]:
        """The same write limit for the /mcp tools, per agent or client address."""
        return await self.submission(request if isinstance(request, Request) else None, actor, submit)


def api(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


def mesh(request: Request) -> Mesh:
    return api(request).current()
