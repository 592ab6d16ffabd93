"""The local agent: who a stdio server's calls act as on a personal mesh, when they name nobody.

KNOWMESH_AGENT_ID, else an id the database makes once and keeps in its meta table. Sync acts
under it too (a status or merge taken from a remote is this mesh's own act).
"""

from __future__ import annotations

import getpass
import os
import secrets

from knowmesh_mcp.store import Store, meta_made_once

LOCAL_AGENT_KEY = "local_agent_id"  # meta: the id a personal mesh's own agent acts under


async def local_agent_id(store: Store) -> str:
    """The local agent of a stdio server: KNOWMESH_AGENT_ID, else an id this database makes once
    (`<OS user>-<8 hex>`). The OS user alone is `root` or `ubuntu` on many machines: a team's
    report synced in under that id made the local user's own report a 409 duplicate_report."""
    if os.environ.get("KNOWMESH_AGENT_ID"):
        return os.environ["KNOWMESH_AGENT_ID"]
    return await meta_made_once(store, LOCAL_AGENT_KEY, lambda: f"{getpass.getuser()}-{secrets.token_hex(4)}")
