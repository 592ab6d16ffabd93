"""`sync --from URL` against a remote that misbehaves on purpose (issue 47, points 6 and 7).

Every remote here is a real HTTP server on 127.0.0.1 started by the test: a raw asyncio server
that drips its answer, or a Starlette app over a real team `Mesh` that tampers with what the
team answers. A sync must end, in bounded time and memory, with a named error that names the
remote, and write nothing of the page it refused; a URL's user and password are sent as HTTP
basic auth and never stored, printed or shown.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port, opened, serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import knowmesh_mcp.services.remote_api as remote_api
import knowmesh_mcp.services.syncing as syncing_module
from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

pytestmark = pytest.mark.anyio

AGENT = {"id": "team-agent"}
NODE = "python/team-0"
MIB = 1024 * 1024

Tamper = Callable[[dict[str, Any]], Any]


def unchanged(body: dict[str, Any]) -> Any:
    return body


@pytest.fixture
async def team(service: Mesh, make_doc) -> Mesh:
    """The team's real mesh: one node with one outcome report, so a sync reads the feed, a history and a feedback list."""
    await service.creation.create_node(make_doc(id=NODE, error="ModuleNotFoundError: No module named 'team_pkg_0'"), agent=AGENT)
    await service.outcomes.report_outcome({"node": NODE, "solution": "venv-macos", "outcome": "failed", "reason": "still fails",
                                  "env": {"os": "macos-15"}, "agent": {"id": "team-a"}})
    return service


@pytest.fixture
async def personal(tmp_path) -> AsyncIterator[Mesh]:
    async with opened(tmp_path / "personal.db") as mesh:
        yield mesh


def tampering_remote(team: Mesh, *, feed: Tamper = unchanged, history: Tamper = unchanged,
                     feedback: Tamper = unchanged, delay: float = 0.0) -> Starlette:
    """The team's own answers (a real Mesh), each passed through a tamper function first. A tamper
    returns the body to send (a dict, serialized), or a `Response` to send as it is."""

    def answer(body: Any) -> Response:
        return body if isinstance(body, Response) else JSONResponse(body)

    async def changes(request: Request) -> Response:
        await asyncio.sleep(delay)
        params = request.query_params
        limit = int(params["limit"]) if "limit" in params else None
        try:
            page = await team.feed.changes(since=params.get("since"), limit=limit)
        except KnowmeshError:  # a cursor a tamper made up, not the team's: the feed from its start
            page = await team.feed.changes(limit=limit)
        return answer(feed(page))

    async def nodes(request: Request) -> Response:
        rest, params = request.path_params["rest"], request.query_params
        if rest.endswith("/article/revisions"):
            node_id = rest.removesuffix("/article/revisions")
            return answer(history(await team.articles.article_history(node_id, after=params.get("after"),
                                                             include=params.get("include"))))
        node_id = rest.removesuffix("/feedback")
        return answer(feedback(await team.outcomes.list_feedback(node_id, after=params.get("after"))))

    return Starlette(routes=[Route("/v1/changes", changes), Route("/v1/nodes/{rest:path}", nodes)])


def on_first(items: str, change: Callable[[dict[str, Any]], None]) -> Tamper:
    """Change the first of an answer's `items` ("revisions", "feedback")."""
    def tamper(body: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(body)
        change(body[items][0])
        return body
    return tamper


def on_first_revision(change: Callable[[dict[str, Any]], None]) -> Tamper:
    return on_first("revisions", change)


def on_first_feedback(change: Callable[[dict[str, Any]], None]) -> Tamper:
    return on_first("feedback", change)


def raw_json(text: str) -> Tamper:
    """Send this JSON text as it is: what `json.dumps` cannot write (NaN, a lone surrogate escape)."""
    return lambda body: Response(text, media_type="application/json")


def expect_remote_error(error: KnowmeshError, url: str, status: int = 502, code: str = "remote_error") -> None:
    assert (error.status, error.code) == (status, code), (error.status, error.code, error.message)
    assert url in error.message, f"the message names the remote: {error.message!r}"


async def nothing_written(personal: Mesh, url: str) -> None:
    """The refused page left nothing behind: no node (so no report on one), no cursor."""
    assert await personal.store.count_nodes() == 0
    assert await personal.store.sync_cursor(url) is None


# -- time -----------------------------------------------------------------------------------------

Body = Callable[[asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(head: bytes, body: Body) -> AsyncIterator[str]:
    """A raw HTTP server on 127.0.0.1: to any request it sends the status line and headers `head`,
    then lets `body` write the rest (a misbehaving body uvicorn would not send as it is)."""
    handlers: set[asyncio.Task[Any]] = set()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(head)
            await body(writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: what the test wants
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        for task in handlers:
            task.cancel()
        server.close()
        await server.wait_closed()


def dripping(interval: float) -> Body:
    """One byte of the body every `interval` seconds: each read is quick, so only a deadline on the whole answer ends it."""
    async def body(writer: asyncio.StreamWriter) -> None:
        while True:
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(interval)
    return body


async def test_a_remote_that_drips_its_answer_ends_at_the_response_deadline(personal, monkeypatch):
    monkeypatch.setenv("KNOWMESH_TIMEOUT", "1")  # each read: a byte comes every 0.2 s, so none times out
    monkeypatch.setattr(remote_api, "RESPONSE_DEADLINE_SECONDS", 1.5)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n"
    async with raw_server(head, dripping(0.2)) as url:
        started = time.monotonic()
        with anyio.fail_after(8), pytest.raises(KnowmeshError) as caught:
            await personal.sync.sync_from(url)
    expect_remote_error(caught.value, url, 504, "remote_timeout")
    assert "1.5 s" in caught.value.message and time.monotonic() - started < 5
    await nothing_written(personal, url)


async def test_a_feed_that_never_ends_stops_at_the_sync_deadline_keeping_the_pages_written(team, personal, monkeypatch):
    """Each page moves the cursor (so it is progress) and comes 0.3 s late: only the whole sync's deadline ends it."""
    monkeypatch.setattr(syncing_module, "SYNC_DEADLINE_SECONDS", 2.0)
    pages = iter(range(1, 10_000))

    def endless(body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "next_cursor": f"page-{next(pages)}", "has_more": True, "remaining": 1}

    async with serving(tampering_remote(team, feed=endless, delay=0.3)) as url:
        with anyio.fail_after(10), pytest.raises(KnowmeshError) as caught:
            await personal.sync.sync_from(url)
    expect_remote_error(caught.value, url, 504, "remote_timeout")
    assert "run it again" in caught.value.message
    assert await personal.store.count_nodes() == 1, "the pages written before the deadline are kept"
    assert (await personal.store.sync_cursor(url) or "").startswith("page-")


# -- progress -------------------------------------------------------------------------------------

@pytest.mark.parametrize("cursors", [["same"], ["one", "two"]], ids=["the same cursor", "two cursors in turn"])
async def test_a_feed_whose_cursor_does_not_move_is_a_remote_error(team, personal, cursors):
    answered = iter(range(10_000))

    def stuck(body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "next_cursor": cursors[next(answered) % len(cursors)], "has_more": True, "remaining": 1}

    async with serving(tampering_remote(team, feed=stuck)) as url:
        with anyio.fail_after(8), pytest.raises(KnowmeshError) as caught:
            await personal.sync.sync_from(url)
    expect_remote_error(caught.value, url)
    assert "cursor" in caught.value.message and "/v1/changes" in caught.value.message
    assert next(answered) == len(cursors) + 1, "refused at the first page that does not move"
    assert await personal.store.count_nodes() == 1, "the pages before it are kept"


async def test_a_feedback_list_that_does_not_move_is_a_remote_error(team, personal):
    first: list[dict[str, Any]] = []

    def stuck(body: dict[str, Any]) -> dict[str, Any]:  # the first page again, forever
        if not first:
            first.append({**body, "next_after": body["feedback"][0]["id"], "has_more": True})
        return first[0]

    async with serving(tampering_remote(team, feedback=stuck)) as url:
        with anyio.fail_after(8), pytest.raises(KnowmeshError) as caught:
            await personal.sync.sync_from(url)
    expect_remote_error(caught.value, url)
    assert "feedback" in caught.value.message and NODE in caught.value.message
    await nothing_written(personal, url)


# -- memory ---------------------------------------------------------------------------------------

async def test_an_answer_past_the_byte_limit_is_refused_while_it_streams(personal, monkeypatch):
    """64 MiB of one JSON answer, with no length announced: the read stops a little past the limit.
    `sent` counts what left the server under TCP flow control (drain), so it is what the client took
    in plus the sockets' buffers."""
    monkeypatch.setattr(remote_api, "RESPONSE_BYTE_LIMIT", MIB)
    size, sent = 64 * MIB, [0]

    async def huge(writer: asyncio.StreamWriter) -> None:
        writer.write(b'{"changes": [], "next_cursor": "x", "has_more": false, "remaining": 0, "padding": "')
        chunk = b"x" * (64 * 1024)
        while sent[0] < size:
            writer.write(chunk)
            await writer.drain()
            sent[0] += len(chunk)
        writer.write(b'"}')
        await writer.drain()

    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n"  # the body ends at close
    async with raw_server(head, huge) as url:
        with anyio.fail_after(8), pytest.raises(KnowmeshError) as caught:
            await personal.sync.sync_from(url)
        await asyncio.sleep(0.2)  # the server notices the closed connection
    expect_remote_error(caught.value, url)
    assert "1 MiB" in caught.value.message
    assert sent[0] < 16 * MIB, f"the client stopped reading early: {sent[0] / MIB:.0f} MiB of 64 were sent"
    await nothing_written(personal, url)


async def test_a_page_whose_answers_add_up_past_the_page_limit_is_refused(personal, monkeypatch):
    """Each history is under the per-answer limit; the page holds them all until it writes, so they count together."""
    monkeypatch.setattr(remote_api, "RESPONSE_BYTE_LIMIT", MIB)
    monkeypatch.setattr(syncing_module, "PAGE_BYTE_LIMIT", 2 * MIB)
    ids = [f"python/big-{n}" for n in range(6)]

    async def changes(request: Request) -> Response:
        entries = [{"id": node_id, "change": "created", "status": "draft", "revision": 1, "evidence_seq": 0} for node_id in ids]
        return JSONResponse({"changes": entries, "next_cursor": "x", "has_more": False, "remaining": 0})

    async def history(request: Request) -> Response:
        return JSONResponse({"revisions": [], "padding": "x" * (600 * 1024)})

    app = Starlette(routes=[Route("/v1/changes", changes), Route("/v1/nodes/{rest:path}", history)])
    async with serving(app) as url:
        with anyio.fail_after(8), pytest.raises(KnowmeshError) as caught:
            await personal.sync.sync_from(url)
    expect_remote_error(caught.value, url)
    assert "2 MiB" in caught.value.message and "page" in caught.value.message
    await nothing_written(personal, url)


# -- malformed answers ----------------------------------------------------------------------------

def set_field(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda item: item.__setitem__(key, value)


def first_entry(change: Callable[[dict[str, Any]], None]) -> Tamper:
    def tamper(body: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(body)
        change(body["changes"][0])
        return body
    return tamper


MALFORMED: list[tuple[str, dict[str, Tamper]]] = [
    ("feed nested 100,000 deep", {"feed": raw_json("[" * 100_000 + "]" * 100_000)}),
    ("feed remaining not a number", {"feed": lambda body: {**body, "remaining": "many"}}),
    ("feed has_more not a boolean", {"feed": lambda body: {**body, "has_more": "no"}}),
    ("feed cursor not text", {"feed": lambda body: {**body, "next_cursor": ["x"]}}),
    ("feed changes not a list", {"feed": lambda body: {**body, "changes": "not a list"}}),
    ("feed entry id not a node id", {"feed": first_entry(set_field("id", "python/../../etc"))}),
    ("feed entry evidence_seq not an integer", {"feed": first_entry(set_field("evidence_seq", "7"))}),
    ("feed NaN", {"feed": raw_json('{"changes": [], "next_cursor": "x", "has_more": false, "remaining": NaN}')}),
    ("revision agent id an object", {"history": on_first_revision(set_field("agent", {"id": {"x": 1}, "model": None}))}),
    ("revision changes not a list", {"history": on_first_revision(set_field("changes", "not a list"))}),
    ("revision created_at not a date", {"history": on_first_revision(set_field("created_at", "not a date"))}),
    ("revision created_at another format", {"history": on_first_revision(set_field("created_at", "2026-01-01"))}),
    ("revision number a boolean", {"history": on_first_revision(set_field("revision", True))}),
    ("revision parent past 64 bits", {"history": on_first_revision(set_field("parent_revision", 10**30))}),
    ("revision summary an object", {"history": on_first_revision(set_field("summary", {"a": 1}))}),
    ("revision reverts a number", {"history": on_first_revision(set_field("reverts_revision_id", 12))}),
    ("revision solution number a boolean",
     {"history": on_first_revision(lambda r: r["solution_revisions"].__setitem__("venv-macos", True))}),
    ("revision id with a lone surrogate", {"history": lambda body: Response(
        json.dumps(body).replace(body["revisions"][0]["revision_id"], "\\ud800x"), media_type="application/json")}),
    ("feedback created_at not a date", {"feedback": on_first_feedback(set_field("created_at", "not a date"))}),
    ("feedback exit code past 64 bits", {"feedback": on_first_feedback(set_field("exit_code", 10**30))}),
    ("feedback next_after past 64 bits", {"feedback": lambda body: {**body, "next_after": 10**30}}),
    ("feedback next_after a boolean", {"feedback": lambda body: {**body, "next_after": True}}),
    ("feedback environment with NaN", {"feedback": lambda body: Response(
        json.dumps(body).replace('"environment": {', '"environment": {"n": NaN, '), media_type="application/json")}),
]


@pytest.mark.parametrize("tampered", [tamper for _, tamper in MALFORMED], ids=[label for label, _ in MALFORMED])
async def test_a_malformed_answer_is_a_remote_error_naming_the_remote_and_writes_nothing(team, personal, tampered):
    async with serving(tampering_remote(team, **tampered)) as url:
        with anyio.fail_after(8), pytest.raises(KnowmeshError) as caught:
            await personal.sync.sync_from(url)
    expect_remote_error(caught.value, url)
    await nothing_written(personal, url)


async def test_the_untampered_team_syncs_whole(team, personal):
    """The tampering server itself answers as the team does: the cases above fail for their one change."""
    async with serving(tampering_remote(team)) as url:
        report = await personal.sync.sync_from(url)
    assert (report.created, report.evidence) == ([NODE], 1)


# -- credentials in the URL -----------------------------------------------------------------------

def basic_auth_required(app: Any, user: str, password: str) -> Callable[..., Awaitable[None]]:
    """The team's app behind a guard that wants HTTP basic auth (a reverse proxy's, say)."""
    expected = b"Basic " + base64.b64encode(f"{user}:{password}".encode())

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await Response("basic auth required", status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    return guarded


def with_userinfo(url: str, user: str = "user", password: str = "secret") -> str:
    return url.replace("http://", f"http://{user}:{password}@", 1)


async def test_the_userinfo_of_a_sync_url_is_sent_as_basic_auth_and_never_stored_or_shown(team, personal):
    async with serving(basic_auth_required(build_app(service=team, write_limit=0), "user", "s3cr%t")) as url:
        with pytest.raises(KnowmeshError) as refused:
            await personal.sync.sync_from(url)  # without the userinfo: the guard refuses
        assert refused.value.code == "remote_error" and "401" in refused.value.message and url in refused.value.message
        report = await personal.sync.sync_from(with_userinfo(url, password="s3cr%25t"))  # percent-encoded in a URL
        assert report.created == [NODE] and report.remote == url
        assert await personal.store.sync_cursor(url) is not None
        async with serving(build_app(service=personal)) as personal_url, httpx2.AsyncClient(timeout=10) as client:
            shown = (await client.get(personal_url + "/v1/health")).text
    health = json.dumps(await personal.health.check())
    assert "s3cr" not in health and "s3cr" not in shown and url in shown
    stored = personal.store.path
    with sqlite3.connect(stored) as connection:
        remotes = [row[0] for table in ("sync_state", "synced_nodes")
                   for row in connection.execute(f"SELECT remote FROM {table}")]
    assert remotes and set(remotes) == {url}


async def test_a_failing_sync_url_with_userinfo_names_the_remote_without_it(personal):
    down = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(KnowmeshError) as caught:
        await personal.sync.sync_from(with_userinfo(down))
    assert caught.value.code == "remote_unavailable" and down in caught.value.message
    assert "secret" not in caught.value.message and "user" not in caught.value.message


async def test_cli_sync_with_userinfo_never_prints_or_stores_the_password(team, tmp_path):
    database = tmp_path / "cli.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    async def cli(*args: str) -> tuple[int, str]:
        done = await anyio.run_process([sys.executable, "-m", "knowmesh_mcp.cli.main", *args], env=env, check=False)
        return done.returncode, done.stdout.decode() + done.stderr.decode()

    async with serving(basic_auth_required(build_app(service=team, write_limit=0), "user", "secret")) as url:
        code, synced = await cli("sync", "--from", with_userinfo(url), "--db", str(database), "--empty")
        assert code == 0, synced
        assert synced.strip() == f"synced {url}: created 1, updated 0, unchanged 0, conflicts 0, outcome reports 1"
        code_json, as_json = await cli("sync", "--from", with_userinfo(url), "--db", str(database), "--json")
        assert code_json == 0 and json.loads(as_json)["remote"] == url
    _, doctor = await cli("doctor", "--db", str(database))
    _, doctor_json = await cli("doctor", "--db", str(database), "--json")
    down = f"http://127.0.0.1:{free_port()}"
    failed_code, failed = await cli("sync", "--from", with_userinfo(down), "--db", str(database))
    usage_code, usage = await cli("sync", "--from", with_userinfo(down).replace("http:", "ftp:"), "--db", str(database))
    assert f"last sync       {url} at " in doctor
    assert failed_code == 1 and "remote_unavailable" in failed and down in failed
    assert usage_code == 2 and "not an http(s) URL" in usage
    for output in (synced, as_json, doctor, doctor_json, failed, usage):
        assert "secret" not in output, output
    files = [path for path in Path(tmp_path).iterdir() if path.name.startswith("cli.db")]
    assert files and not any(b"secret" in path.read_bytes() for path in files), "not in the database file, nor its WAL"
