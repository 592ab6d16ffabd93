"""`knowmesh-mcp doctor` and `GET /v1/health`: what a user needs to know about a mesh, in a few lines.

`ok` is false with one reason per problem: a database that fails SQLite's quick check (damaged
pages that leave a fact unreadable are named too: the report is for exactly that, so never a 500),
a schema older than this code's migrations, a search index built by another analyser or missing
nodes, or a server that takes writes with tokens only while no token exists. It is `Mesh.health`;
depends on `store`, `search` and `normalize` only.
"""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.core.normalize import NORMALIZER_VERSION
from knowmesh_mcp.search.query import SEARCH_INDEX_VERSION
from knowmesh_mcp.store import Store


class Health:
    """`Mesh.health`: is this database fit to serve, and what should its user know."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def check(self, *, auth: str | None = None) -> dict[str, Any]:
        """The mesh's state; `auth` is the serving mode (None when nothing serves, as for `doctor`)."""
        facts = await self.store.health_facts()
        latest = facts["latest_schema_version"]  # each backend has its own migration series
        unreadable: dict[str, str] = facts.get("unreadable", {})
        problems = []
        if facts["integrity"] != "ok":
            problems.append(f"the database fails its integrity check: {facts['integrity']}: restore it from a backup")
        problems += [f"the {name} could not be read: {error}" for name, error in unreadable.items()]
        # A fact that could not be read is reported as such above, never compared as if it were 0.
        if "schema version" not in unreadable and facts["schema_version"] < latest:
            problems.append(
                f"schema version {facts['schema_version']} is older than this code's {latest}: "
                "open it once with this version to migrate"
            )
        if "index versions" not in unreadable and (
            facts["search_index_version"] != str(SEARCH_INDEX_VERSION)
            or facts["normalizer_version"] != str(NORMALIZER_VERSION)
        ):
            problems.append(
                f"the search index was built by another version ({facts['search_index_version']}, "
                f"this code builds {SEARCH_INDEX_VERSION}): it is rebuilt when a server opens the database"
            )
        counted = not {"node count", "search index's node count"} & unreadable.keys()
        if counted and facts["indexed_nodes"] != facts["nodes"]:
            problems.append(f"{facts['nodes'] - facts['indexed_nodes']} node(s) are missing from the search index")
        live_tokens = facts["tokens"]["agent"] + facts["tokens"]["maintainer"]
        if auth == "required" and live_tokens == 0 and "tokens" not in unreadable:
            problems.append(
                "auth is required but no token exists, so nobody can write: knowmesh-mcp token add <agent-id>"
            )
        return {
            "ok": not problems,
            "problems": problems,
            "database": self.store.path,
            "backend": facts["backend"],
            "schema_version": facts["schema_version"],
            "latest_schema_version": latest,
            "nodes": facts["nodes"],
            "search_index_version": facts["search_index_version"],
            "auth": auth,
            "tokens": facts["tokens"],
            "syncs": facts["syncs"],
        }


def health_lines(report: dict[str, Any]) -> list[str]:
    """The report as the few lines `doctor` prints."""
    tokens = report["tokens"]
    syncs = ", ".join(f"{s['remote']} at {s['synced_at']}" for s in report["syncs"]) or "never synced"
    auth = report["auth"] or "not serving (serve --http: off on loopback, required elsewhere)"
    lines = [
        f"database        {report['database']} ({report['backend']})",
        f"schema version  {report['schema_version']} (latest {report['latest_schema_version']})",
        f"nodes           {report['nodes']}",
        f"search index    version {report['search_index_version']}",
        f"auth            {auth}",
        f"tokens          {tokens['agent']} agent, {tokens['maintainer']} maintainer",
        f"last sync       {syncs}",
    ]
    lines += [f"PROBLEM         {problem}" for problem in report["problems"]] or ["ok"]
    return lines
