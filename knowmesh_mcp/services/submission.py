"""The hourly write limit of the spec, and the keyed hash of a client's address it counts by.

A `Submission` says whom a write counts against; its `charge` counts it inside the write's own
transaction. `ClientAddresses` (`Mesh.addresses`) hashes an address with this mesh's secret
(`addresses`), so neither the limit's counts nor the stored rows ever hold an address.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from knowmesh_mcp.core.addresses import SECRET_ENV, address_hash, address_secret
from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.core.identity import Actor
from knowmesh_mcp.store import Store, Writer, meta_made_once


@dataclass(frozen=True)
class Submission:
    """A write under the hourly write limit of the spec: who it counts against (`subject`) and
    the allowance (`limit`, 0: none). It is counted by `charge` inside the write's own
    transaction, so a stored write is always counted and a refused one never is: a count written
    after the commit could fail and turn a stored report into an error that a retry made a 409."""

    subject: str | None = None
    limit: int = 0
    ip_hash: str | None = None  # the keyed hash of the client's address, stored for unproven writes

    @classmethod
    def of(cls, actor: Actor, ip_hash: str | None, limit: int) -> Submission:
        """Counted against its agent (a token's, or an id a personal mesh takes as claimed), else the
        keyed hash of its address (an unproven id could be rotated at will)."""
        subject = "agent:" + actor.id if actor.votes and actor.id else f"ip:{ip_hash}" if ip_hash else None
        return cls(subject, limit, ip_hash)

    async def charge(self, tx: Writer) -> None:
        """Count this write, first thing in its transaction: past the allowance it is 429, and a
        write refused later in the transaction rolls its count back with it."""
        if self.subject is None or self.limit <= 0:
            return
        if await tx.count_write(self.subject, _hour()) > self.limit > 0:
            raise KnowmeshError(
                429,
                "rate_limited",
                f"at most {self.limit} submissions per hour per agent or address; try again next hour",
                limit=self.limit,
            )


UNCOUNTED = Submission()  # a local write: the CLI, stdio, a personal mesh without a limit


def _hour() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H")


class ClientAddresses:
    """`Mesh.addresses`: the keyed hash a client's address is known by."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._ip_secret: str | None = None  # read once: it never changes

    async def ip_hash(self, address: str | None) -> str | None:
        """A keyed hash of a client address (see `addresses`); never the address."""
        if not address:
            return None
        secret = self._ip_secret
        if secret is None and self.store.shared:
            secret = self._ip_secret = os.environ.get(SECRET_ENV) or await self._shared_secret()
        if secret is None:
            # A secret an older version kept in the database moves out of it, so hashes stay stable.
            kept = await self.store.get_meta("ip_hash_secret")
            secret = address_secret(self.store.path, adopt=kept)
            if kept is not None:
                async with self.store.write() as tx:
                    await tx.delete_meta("ip_hash_secret")
            self._ip_secret = secret  # never changes: read it once
        return address_hash(secret, address)

    async def _shared_secret(self) -> str:
        """A database several servers share: every server must hash an address alike, so the secret
        is made once in the database (under the write lock, so two servers agree)."""
        return await meta_made_once(self.store, "ip_hash_secret", lambda: secrets.token_hex(32))
