"""The HTTP client of a remote mesh (`remote.RemoteMesh` calls its `/v1` routes through it).

A remote error comes back as the same `KnowmeshError` (status, code, details)
the remote raised; an unreachable or slow remote is a 503 `remote_unavailable` or a 504
`remote_timeout`, never a hang or a crash.

A remote is untrusted: each answer is read whole within a deadline and a byte limit, and its JSON
is held to the bounds a client's is (`limits`), else a 502 `remote_error` naming the remote. The
user and password of a URL (`http://user:pass@host`) are sent as HTTP basic auth and kept out of
`base_url`, the name every message, row and report uses.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx2

from knowmesh_mcp.core.errors import KnowmeshError, remote_error
from knowmesh_mcp.core.identity import Actor
from knowmesh_mcp.core.limits import json_problem
from knowmesh_mcp.services.publishing import require_node_id

DEFAULT_TIMEOUT = 10.0  # seconds to connect, and between two reads of an answer; KNOWMESH_TIMEOUT overrides

RESPONSE_DEADLINE_SECONDS = 60.0
"""The longest one answer may take, from sending the request to its last byte. The timeout above
is per read, so a remote that drips a byte every 3 s never trips it (reproduced: a sync still
waiting after minutes). 60 s reads the largest answer allowed below at ~0.5 MiB/s; the deadline is
never shorter than a per-read timeout a user set higher."""

RESPONSE_BYTE_LIMIT = 32 * 1024 * 1024
"""The most one answer may hold, counted as its body streams in. A node's history with its
documents, the largest answer a sync reads, is not paged: 32 MiB holds ~160 revisions of the
largest document allowed (`limits.MAX_DOCUMENT_CHARS`) and thousands of typical ones. Read whole
before, an 800 MB answer took 2.4 GB of memory; now the read stops past this."""

MIB = 1024 * 1024
MAX_POINTER_CHARS = 100  # of a JSON Pointer quoted in an error message: its keys are the remote's


def public_url(url: str) -> str:
    """`url` without its userinfo (`user:password@`) and trailing slash: the name a remote is stored,
    printed and shown under (sync_state, doctor, `/v1/health`, messages), so a password never is.
    A URL without userinfo is returned as it was given, so the rows kept under it still match."""
    url = url.strip()
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url.rstrip("/")
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])).rstrip("/")


def url_credentials(url: str) -> httpx2.BasicAuth | None:
    """The user and password of `url` (percent-decoded) as HTTP basic auth, or None without userinfo."""
    parts = urlsplit(url.strip())
    if "@" not in parts.netloc:
        return None
    return httpx2.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))


def mebibytes(size: int) -> str:
    return f"{size / MIB:g} MiB"


@dataclass(frozen=True)
class Answer:
    """A remote's whole answer, read within the deadline and the byte limit."""

    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


@dataclass
class ByteBudget:
    """Bytes several answers may hold in memory together, charged as each streams in: a sync page
    keeps every history and feedback list it fetched until it writes them in one transaction, so
    the limit on one answer alone would let a page of 100 nodes hold 100 of them."""

    limit: int
    what: str  # what the answers are for, named in the error: "a page of http://team/v1/changes"
    spent: int = 0

    def charge(self, size: int) -> None:
        self.spent += size
        if self.spent > self.limit:
            raise remote_error(
                f"the answers for {self.what} add up to more than {mebibytes(self.limit)}: "
                "refused, so that a remote cannot fill this process's memory"
            )


def parse_json(content: bytes, where: str) -> Any:
    """A remote's JSON held to the bounds a client's is (`limits`: nesting, 64-bit integers, lone
    surrogates), without NaN or Infinity (not JSON); else a 502 naming `where`. Deep nesting was a
    raw RecursionError, a lone surrogate a UnicodeEncodeError from the database driver."""
    try:
        value = json.loads(content, parse_constant=_refuse_constant)
    except RecursionError:
        raise remote_error(f"{where} answered JSON nested too deep to read") from None
    except ValueError:  # not JSON, not UTF-8, NaN, or an integer of more than 4,300 digits
        raise remote_error(f"{where} did not answer with valid JSON") from None
    problem = json_problem(value)
    if problem is not None:
        pointer = problem.pointer[:MAX_POINTER_CHARS]
        raise remote_error(f"{where} answered JSON out of bounds at {pointer}: {problem.reason}")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def remote_timeout() -> float:
    try:
        return float(os.environ.get("KNOWMESH_TIMEOUT") or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT


def error_from_response(answer: Answer, where: str) -> KnowmeshError:
    """The remote's own error (same status, code and details), or a 502 naming `where` when it sent none."""
    try:
        body = parse_json(answer.content, where)
    except KnowmeshError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        details = {k: v for k, v in error.items() if k not in {"code", "message"}}
        top_level = {k: v for k, v in body.items() if k != "error"}
        return KnowmeshError(
            answer.status_code, error["code"], str(error.get("message", "")), top_level=top_level, **details
        )
    return remote_error(f"{where} answered {answer.status_code} without a knowmesh error body")


class RemoteApi:
    """A knowmesh HTTP API at `base_url`: one client, its limits, and who it says acts.

    `token` (else `KNOWMESH_TOKEN`) is sent as `Authorization: Bearer` on every call: the remote
    then proves who acted. Without one, a write names the local agent's id, which the remote
    takes as claimed (a personal mesh) or records as unproven (a team's mesh with auth on).
    A call's `actor` (from `RemoteMesh.local_actor`) only fills in the id a body leaves out.

    The user and password of `base_url` go as HTTP basic auth (a proxy in front of the team's
    server); basic auth takes the Authorization header, so the bearer is not sent with them.
    `self.base_url` never holds them. `timeout` is per read (KNOWMESH_TIMEOUT), `deadline` for a
    whole answer (RESPONSE_DEADLINE_SECONDS), `byte_limit` its size (RESPONSE_BYTE_LIMIT).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float | None = None,
        client: httpx2.AsyncClient | None = None,
        token: str | None = None,
        deadline: float | None = None,
        byte_limit: int | None = None,
    ):
        self.base_url = public_url(base_url)
        self.timeout = remote_timeout() if timeout is None else timeout
        self.deadline = max(RESPONSE_DEADLINE_SECONDS, self.timeout) if deadline is None else deadline
        self.byte_limit = RESPONSE_BYTE_LIMIT if byte_limit is None else byte_limit
        self.token = token if token is not None else os.environ.get("KNOWMESH_TOKEN") or None
        headers = {"user-agent": "knowmesh-mcp (remote)"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        self._client = client or httpx2.AsyncClient(
            base_url=self.base_url, timeout=self.timeout, headers=headers, auth=url_credentials(base_url)
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
        budget: ByteBudget | None = None,
    ) -> Answer:
        """One call, its answer read whole within `deadline` and `byte_limit` (and `budget`, shared
        with other answers); raises the remote's error, or remote_unavailable / remote_timeout / remote_error."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        where = f"{self.base_url}{path}"
        deadline = asyncio.timeout(self.deadline)
        try:
            async with deadline:
                async with self._client.stream(method, path, params=query, json=json, headers=headers) as response:
                    answer = Answer(response.status_code, await self._read_body(response, where, budget))
        except TimeoutError:
            if not deadline.expired():
                raise
            raise KnowmeshError(
                504, "remote_timeout", f"{where} did not finish answering within {self.deadline:g} s"
            ) from None
        except httpx2.TimeoutException:
            raise KnowmeshError(
                504, "remote_timeout", f"{self.base_url} did not answer within {self.timeout:g} s"
            ) from None
        except httpx2.DecodingError:
            raise remote_error(f"{where} answered a body that does not decode as its content-encoding says") from None
        except httpx2.HTTPError as error:
            raise KnowmeshError(503, "remote_unavailable", f"cannot reach {self.base_url}: {error}") from None
        if answer.status_code >= 300:  # redirects are not followed: a 301 is a merged node, raised as `moved`
            raise error_from_response(answer, where)
        return answer

    async def _read_body(self, response: httpx2.Response, where: str, budget: ByteBudget | None) -> bytes:
        """The body as it streams in, stopped as soon as it passes `byte_limit` or the budget: an
        answer read whole first could take all of this process's memory."""
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.byte_limit:
            raise self._too_large(where)
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.byte_limit:
                raise self._too_large(where)
            if budget is not None:
                budget.charge(len(chunk))
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, where: str) -> KnowmeshError:
        return remote_error(
            f"{where} answered more than {mebibytes(self.byte_limit)}: refused, so that a remote "
            "cannot fill this process's memory"
        )

    async def call(self, method: str, path: str, *, budget: ByteBudget | None = None, **kwargs: Any) -> dict[str, Any]:
        answer = await self.request(method, path, budget=budget, **kwargs)
        body = parse_json(answer.content, f"{self.base_url}{path}")
        if not isinstance(body, dict):
            raise remote_error(f"{self.base_url}{path} did not answer with a JSON object")
        return body

    # -- the agent a write sends --------------------------------------------------------------

    @staticmethod
    def agent_field(agent: Any, actor: Actor | None) -> Any:
        """The `agent` a write sends: as the call gave it, with the local actor's id when it named none."""
        if (
            actor is None
            or actor.id is None
            or (isinstance(agent, dict) and agent.get("id"))
            or (agent is not None and not isinstance(agent, dict))
        ):
            return agent
        return {**(agent or {}), "id": actor.id}

    def with_agent(self, body: Any, actor: Actor | None) -> Any:
        return {**body, "agent": self.agent_field(body.get("agent"), actor)} if isinstance(body, dict) else body


def node_path(node_id: str) -> str:
    """The node's route; the id is checked here so it can never steer the URL elsewhere."""
    return f"/v1/nodes/{require_node_id(node_id)}"
