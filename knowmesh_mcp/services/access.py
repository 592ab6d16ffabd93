"""Agent tokens: issued once, kept as a hash, checked on every request that carries one.

`Mesh.tokens`. `knowmesh-mcp token add|list|revoke` calls these on the local database;
the HTTP app's bearer backend calls `verify_token`. Depends on `identity` and `store`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter
from knowmesh_mcp.core.identity import MAX_AGENT_ID, ROLES, Credential, new_token, token_digest
from knowmesh_mcp.core.rows import TOKEN_ID_LENGTH
from knowmesh_mcp.store import Store, utc_now

TOKEN_ID = re.compile(f"[0-9a-f]{{{TOKEN_ID_LENGTH}}}")
TOUCH_EVERY = timedelta(minutes=1)  # `last used` is a date for people, not a counter: one write a minute at most


class AgentTokens:
    """`Mesh.tokens`: agent tokens, which prove who acts on a shared server."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def add_token(self, agent_id: Any, *, role: str = "agent") -> dict[str, Any]:
        """A new token bound to `agent_id`; the token is in the result and nowhere else, ever."""
        if (
            not isinstance(agent_id, str)
            or not agent_id.strip()
            or len(agent_id) > MAX_AGENT_ID
            or any(c.isspace() for c in agent_id.strip())
        ):
            raise bad_parameter(
                "agent_id", f"an agent id is one word of at most {MAX_AGENT_ID} characters, e.g. agent-a1"
            )
        if role not in ROLES:
            raise bad_parameter("role", f"role must be one of {', '.join(ROLES)}")
        token = new_token()
        digest = token_digest(token)
        async with self.store.write() as tx:
            await tx.add_token(digest, agent_id.strip(), role)
        return {"agent_id": agent_id.strip(), "role": role, "token": token, "id": digest[:TOKEN_ID_LENGTH]}

    async def list_tokens(self) -> list[dict[str, Any]]:
        return await self.store.tokens()

    async def revoke_tokens(self, agent_id: str, token_id: str | None = None) -> int:
        """Revoke every live token of `agent_id`, or with `token_id` (as `token list` shows it) that one only."""
        if token_id is not None and not TOKEN_ID.fullmatch(token_id):
            raise bad_parameter("token_id", f"a token id is the {TOKEN_ID_LENGTH} hex characters `token list` shows")
        async with self.store.write() as tx:
            revoked = await tx.revoke_tokens(agent_id, token_id)
        if not revoked:
            which = f"live token {token_id}" if token_id else "live token"
            raise KnowmeshError(404, "token_not_found", f"agent {agent_id!r} has no {which}")
        return revoked

    async def verify_token(self, token: str) -> Credential | None:
        """The agent a live token proves, or None (unknown or revoked)."""
        digest = token_digest(token)
        found = await self.store.token(digest)
        if found is None:
            return None
        agent_id, role, last_used = found
        now = datetime.now(UTC)
        if last_used is None or datetime.fromisoformat(last_used.replace("Z", "+00:00")) < now - TOUCH_EVERY:
            async with self.store.write() as tx:
                await tx.touch_token(digest, utc_now())
        return Credential(agent_id, role)
