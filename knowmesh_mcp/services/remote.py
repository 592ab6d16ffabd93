"""A remote mesh through its HTTP API: what `serve --stdio --remote URL`, `admin --remote URL`
and `sync --from URL` use.

`RemoteMesh` has the concerns of a local `Mesh` that can be called over HTTP (the ones the MCP
server, `admin` and sync need), under the same names, each calling the remote's `/v1` routes
through one `remote_api.RemoteApi`: a tool returns the same output whichever side holds the
store, and mypy checks that each call an adapter makes exists on both.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import socket
from typing import Any
from urllib.parse import quote

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.core.identity import Actor, acting
from knowmesh_mcp.services.maintaining import following_merge, read_following_merge
from knowmesh_mcp.services.outcomes import UNCOUNTED, Submission
from knowmesh_mcp.services.remote_api import ByteBudget, RemoteApi, node_path


class RemoteNodes:
    """Reading nodes: `GET /v1/nodes/{id}` as JSON or Markdown, following a merge."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api

    async def read_view(
        self,
        node_id: str,
        *,
        env: str | None = None,
        solution: str | None = None,
        fields: str | None = None,
        include: str | None = None,
    ) -> dict[str, Any]:
        params = {"env": env, "solution": solution, "fields": fields, "include": include}

        async def read(wanted: str) -> dict[str, Any]:
            return await self.api.call("GET", node_path(wanted), params=params)

        return await read_following_merge(read, node_id)

    async def read_markdown(self, node_id: str) -> str:
        async def read(wanted: str) -> str:
            return (await self.api.request("GET", node_path(wanted) + ".md")).text

        return await following_merge(read, node_id)


class RemoteCreation:
    """`POST /v1/nodes`."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api

    async def create_node(
        self,
        raw: Any,
        *,
        agent: dict[str, Any] | None = None,
        actor: Actor | None = None,
        submission: Submission = UNCOUNTED,
    ) -> dict[str, Any]:
        agent = self.api.agent_field(agent, actor)
        body = {**raw, "agent": agent} if isinstance(raw, dict) and agent else raw
        return await self.api.call("POST", "/v1/nodes", json=body)


class RemoteArticles:
    """An article's revisions and edits (`/v1/nodes/{id}/article...`, `/v1/article-revisions`)."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api

    async def article_history(
        self,
        node_id: str,
        *,
        from_revision: Any = None,
        to_revision: Any = None,
        after: Any = None,
        include: Any = None,
        budget: ByteBudget | None = None,
    ) -> dict[str, Any]:
        params = {"from_revision": from_revision, "to_revision": to_revision, "after": after, "include": include}
        return await self.api.call("GET", node_path(node_id) + "/article/revisions", params=params, budget=budget)

    async def patch_article(
        self, node_id: str, *, base_revision: Any, ops: Any, agent: Any, summary: Any, actor: Actor | None = None
    ) -> dict[str, Any]:
        body = {
            "base_revision": base_revision,
            "ops": ops,
            "agent": self.api.agent_field(agent, actor),
            "summary": summary,
        }
        return await self.api.call("PATCH", node_path(node_id) + "/article", json=body)

    async def revise_article(
        self, node_id: str, *, base_revision: Any, article: Any, agent: Any, summary: Any, actor: Actor | None = None
    ) -> dict[str, Any]:
        body = {
            "base_revision": base_revision,
            "article": article,
            "agent": self.api.agent_field(agent, actor),
            "summary": summary,
        }
        return await self.api.call("POST", node_path(node_id) + "/article/revisions", json=body)

    async def undo_edit(
        self, revision_id: Any, *, undo_token: Any, agent: Any, summary: Any, actor: Actor | None = None
    ) -> dict[str, Any]:
        """The undo token rides as the bearer (the spec's form), or in the body when the bearer is our agent token."""
        if not isinstance(revision_id, str) or not revision_id.strip():
            raise KnowmeshError(400, "invalid_parameter", "revision_id is required", field="revision_id")
        body = {"agent": self.api.agent_field(agent, actor), "summary": summary}
        headers = None
        if self.api.token:
            body["undo_token"] = undo_token
        elif isinstance(undo_token, str) and undo_token:
            headers = {"authorization": f"Bearer {undo_token}"}
        return await self.api.call(
            "POST", f"/v1/article-revisions/{quote(revision_id, safe='')}/undo", json=body, headers=headers
        )


class RemoteSearching:
    """`POST /v1/search`."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api

    async def search(
        self, q: str | None, *, env: str | None = None, ecosystem: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        # POST: pasted output of up to 1 MiB does not fit a URL.
        body = {
            key: value
            for key, value in {"q": q, "env": env, "ecosystem": ecosystem, "limit": limit}.items()
            if value is not None
        }
        return await self.api.call("POST", "/v1/search", json=body)


class RemoteFeed:
    """`GET /v1/changes`."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api

    async def changes(
        self, *, since: str | None = None, limit: int | None = None, budget: ByteBudget | None = None
    ) -> dict[str, Any]:
        return await self.api.call("GET", "/v1/changes", params={"since": since, "limit": limit}, budget=budget)


class RemoteOutcomes:
    """Outcome reports (`/v1/feedback`, a node's feedback list)."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api

    async def report_outcome(
        self, report: Any, *, submission: Submission = UNCOUNTED, actor: Actor | None = None
    ) -> dict[str, Any]:
        """`submission` is the local server's business; the remote counts this client's own writes."""
        return await self.api.call("POST", "/v1/feedback", json=self.api.with_agent(report, actor))

    async def list_feedback(self, node_id: str, *, after: int = 0, budget: ByteBudget | None = None) -> dict[str, Any]:
        return await self.api.call("GET", node_path(node_id) + "/feedback", params={"after": after}, budget=budget)


class RemoteFailures:
    """`POST /v1/nodes/{id}/failures`."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api

    async def report_failed_attempt(
        self, node_id: str, attempt: Any, *, submission: Submission = UNCOUNTED, actor: Actor | None = None
    ) -> dict[str, Any]:
        return await self.api.call("POST", node_path(node_id) + "/failures", json=self.api.with_agent(attempt, actor))


class RemoteReview:
    """`GET /v1/review`."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api

    async def review_queue(self, *, limit: Any = None, offset: Any = None, reason: Any = None) -> dict[str, Any]:
        return await self.api.call("GET", "/v1/review", params={"limit": limit, "offset": offset, "reason": reason})


class RemoteMaintenance:
    """Maintainers' calls (`knowmesh-mcp admin --remote URL`, with a maintainer's token)."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api

    async def set_status(
        self, node_id: str, status: Any, *, note: Any = None, actor: Actor | None = None
    ) -> dict[str, Any]:
        return await self.api.call("POST", node_path(node_id) + "/status", json={"status": status, "note": note})

    async def confirm_merge(
        self, task_id: Any, *, canonical_id: Any = None, note: Any = None, actor: Actor | None = None
    ) -> dict[str, Any]:
        return await self.api.call(
            "POST",
            f"/v1/dedupe/tasks/{quote(str(task_id), safe='')}/merge",
            json={"canonical_id": canonical_id, "note": note},
        )

    async def resolve_issue(self, number: Any, status: Any, *, note: Any, actor: Actor | None = None) -> dict[str, Any]:
        return await self.api.call(
            "POST", f"/v1/issues/{quote(str(number), safe='')}/status", json={"status": status, "note": note}
        )

    async def audit_log(self, *, target: str | None = None, after: Any = None, limit: Any = None) -> dict[str, Any]:
        return await self.api.call("GET", "/v1/audit", params={"target": target, "after": after, "limit": limit})

    async def flagged_pairs(self, *, limit: int = 50) -> dict[str, Any]:
        return await self.api.call("GET", "/v1/dedupe/tasks", params={"status": "flagged", "limit": limit})


class RemoteMesh:
    """A knowmesh HTTP API, called like a local `Mesh`: `RemoteMesh(RemoteApi(url, token=...))` (see
    `RemoteApi` for the token, basic auth in the URL, and the limits on each answer)."""

    def __init__(self, api: RemoteApi) -> None:
        self.api = api
        self.base_url = api.base_url
        self.nodes = RemoteNodes(self.api)
        self.creation = RemoteCreation(self.api)
        self.articles = RemoteArticles(self.api)
        self.searching = RemoteSearching(self.api)
        self.feed = RemoteFeed(self.api)
        self.outcomes = RemoteOutcomes(self.api)
        self.failures = RemoteFailures(self.api)
        self.review = RemoteReview(self.api)
        self.maintenance = RemoteMaintenance(self.api)

    async def close(self) -> None:
        await self.api.close()

    async def local_agent_id(self) -> str:
        """KNOWMESH_AGENT_ID, else an id stable for this user, machine and remote (nothing stored)."""
        if os.environ.get("KNOWMESH_AGENT_ID"):
            return os.environ["KNOWMESH_AGENT_ID"]
        seed = f"{getpass.getuser()}@{socket.gethostname()}|{self.base_url}"
        return "local-" + hashlib.sha256(seed.encode()).hexdigest()[:16]

    async def local_actor(self, agent: Any) -> Actor | None:
        """A stdio server's actor: with a token the remote decides; else the id the call names,
        or the local agent's, which the remote takes as claimed or records as unproven."""
        return None if self.api.token else acting(agent, None, "off", local_id=await self.local_agent_id())
