"""Who acted: the agent behind a write, and how the mesh knows it.

On a shared server the actor is proven by a bearer token (`token`), never by the `agent` object
of a body. A personal mesh takes ids as claimed (`claimed`, the protocol's behaviour) and its
stdio server acts as the local agent (`local`). A server with auth on records a write without a
token under the id it names, as `unproven`: kept and shown, never an independent vote.

`acting` is the one rule, used by every adapter; the service stores `Actor.proof` beside each
revision, report, failed approach, vote and issue. Depends on `errors` only.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter
from knowmesh_mcp.core.placeholders import FILL_IN_RE

AuthMode = Literal["off", "optional", "required"]
AUTH_MODES: tuple[AuthMode, ...] = ("off", "optional", "required")
Proof = Literal["token", "local", "claimed", "unproven"]
PROOFS: tuple[Proof, ...] = ("token", "local", "claimed", "unproven")
PROVEN: tuple[Proof, ...] = ("token", "local")  # the runtime checked the id
ROLES = ("agent", "maintainer")
MAX_AGENT_ID = 200
TOKEN_PREFIX = "km_"


@dataclass(frozen=True)
class Actor:
    id: str | None
    proof: Proof = "claimed"
    model: str | None = None
    role: str = "agent"

    @property
    def proven(self) -> bool:
        """Proven by the runtime: a token, or the local agent of a stdio server."""
        return self.proof in PROVEN

    @property
    def votes(self) -> bool:
        """An independent vote in the evidence: named, and not unproven."""
        return self.id is not None and self.proof != "unproven"

    @property
    def maintainer(self) -> bool:
        """A maintainer's token, or the `admin` command on the local database (whoever may write it)."""
        return self.proven and self.role == "maintainer"

    def as_agent(self) -> dict[str, Any] | None:
        """The agent object responses show (`proven` says whether the mesh checked the id)."""
        if self.id is None:
            return None
        return {"id": self.id, **({"model": self.model} if self.model else {}), "proven": self.proven}


@dataclass(frozen=True)
class Credential:
    """What a valid bearer token proves."""

    agent_id: str
    role: str


def agent_object(agent: Any, proof: str | None) -> dict[str, Any] | None:
    """A stored author as responses show it (`agent` is {id, model} or None)."""
    if not agent or not agent.get("id"):
        return None
    return {**{k: v for k, v in agent.items() if v is not None}, "proven": proof in PROVEN}


class Claimed(NamedTuple):
    """The author a body's `agent` object names; absent or empty parts are None."""

    agent_id: str | None
    model: str | None


def claimed(agent: Any, *, field: str = "agent") -> Claimed:
    """The id and model named by a body's `agent` object; absent or empty parts are None."""
    if agent is None:
        return Claimed(None, None)
    if not isinstance(agent, dict):
        raise bad_parameter(field, f'{field} must be an object such as {{"id": "agent-a1"}}')
    agent_id, model = agent.get("id"), agent.get("model")
    if agent_id is not None and (not isinstance(agent_id, str) or len(agent_id) > MAX_AGENT_ID):
        raise bad_parameter(field, f"{field}.id must be a string of at most {MAX_AGENT_ID} characters")
    if model is not None and not isinstance(model, str):
        raise bad_parameter(field, f"{field}.model must be a string")
    if agent_id and FILL_IN_RE.fullmatch(agent_id.strip()):  # a ready-made request sent on unchanged
        raise bad_parameter(
            f"{field}.id",
            f'{field}.id is still the placeholder {agent_id.strip()!r}: use a stable id of your own, e.g. "agent-a1"',
        )
    return Claimed((agent_id.strip() or None) if agent_id else None, model or None)


def acting(agent: Any, credential: Credential | None, mode: AuthMode, *, local_id: str | None = None) -> Actor:
    """The actor of a write: the token's agent, else (by auth mode) the claimed or local one.

    With a token the body may name the same agent or none (403 `agent_mismatch` otherwise). With
    auth `required` a write without one is refused (401 `auth_required`); with `optional` it is
    recorded as `unproven`; with `off` the claimed id stands, else the local agent's.
    """
    agent_id, model = claimed(agent)
    if credential is not None:
        if agent_id is not None and agent_id != credential.agent_id:
            raise KnowmeshError(
                403,
                "agent_mismatch",
                f"your token is agent {credential.agent_id!r}; agent.id {agent_id!r} is someone else: "
                "leave agent.id out, or send that agent's own token",
                field="agent.id",
            )
        return Actor(credential.agent_id, "token", model, credential.role)
    if mode == "required":
        raise auth_required()
    if mode == "optional":
        return Actor(agent_id, "unproven", model)
    if agent_id is None and local_id is not None:
        return Actor(local_id, "local", model)
    return Actor(agent_id, "claimed", model)


def auth_required() -> KnowmeshError:
    return KnowmeshError(
        401,
        "auth_required",
        "this mesh takes writes only from agents with a token: ask its maintainer for one "
        "(`knowmesh-mcp token add <your-agent-id>`) and send `Authorization: Bearer <token>`",
    )


def invalid_token() -> KnowmeshError:
    return KnowmeshError(401, "invalid_token", "the bearer token is not one of this mesh's (unknown or revoked)")


def maintainer_required(actor: Actor) -> None:
    if not actor.maintainer:
        raise KnowmeshError(
            403,
            "maintainer_required",
            "only a maintainer may do this: send a maintainer's token "
            "(`knowmesh-mcp token add <id> --role maintainer`)",
        )


def new_token() -> str:
    """A bearer token: 256 random bits, shown once; the mesh keeps only `token_digest`."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    # A plain SHA-256 is enough: the token is 256 random bits, not a password to brute-force.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
