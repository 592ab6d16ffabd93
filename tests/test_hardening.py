"""The edges hold: no 500 on any input, bounded work, no cross-site write (issue 11)."""

from __future__ import annotations

import json
import time

import httpx2
import pytest

from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.core.limits import MAX_ANSWERS, MAX_DEPTH, MAX_ITEMS
from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

NODE = "python/module-not-found-venv"
WRITE_ROUTES = [
    ("POST", "/v1/nodes"),
    ("POST", "/v1/feedback"),
    ("POST", f"/v1/nodes/{NODE}/failures"),
    ("PATCH", f"/v1/nodes/{NODE}/article"),
    ("POST", f"/v1/nodes/{NODE}/article/revisions"),
    ("POST", "/v1/article-revisions/rev_0123/undo"),
    ("POST", "/v1/dedupe/tasks"),
    ("POST", "/v1/dedupe/tasks/1/votes"),
    ("POST", "/v1/issues"),
    ("POST", "/v1/search"),
]


def client_for(service: Mesh, **options) -> httpx2.AsyncClient:
    app = build_app(service=service, with_mcp=False, **options)
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1")


async def written(service: Mesh) -> list:
    return [d async for d in service.documents.export_documents()]


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(("method", "path"), WRITE_ROUTES)
@pytest.mark.parametrize("body", [
    deep(1_100),  # RecursionError in the parser
    '{"a": ' + deep(MAX_DEPTH + 2) + "}",  # parses, but deeper than the bound
    '{"id": ' + "9" * 4_400 + "}",  # past Python's 4,300-digit limit
    '{"id": 92233720368547758070}',  # past 64 bits
    '{"id": "\\ud800"}',  # a lone surrogate
    '{"agent": {"id": "\\udfff"}, "summary": "x"}',
])
async def test_hostile_json_is_a_400_on_every_write_route(service: Mesh, make_doc, method, path, body):
    await service.creation.create_node(make_doc())
    before = await written(service)
    async with client_for(service, write_limit=0) as client:
        response = await client.request(method, path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert response.json()["error"]["code"].startswith("invalid_")
    assert await written(service) == before


@pytest.mark.parametrize("agent", [["x"], {"id": ["a"]}, {"id": {"a": 1}}, {"id": 10**30}, {"id": 0}, "agent-a1"])
async def test_create_validates_its_agent_like_every_write(service: Mesh, make_doc, agent):
    async with client_for(service) as client:
        response = await client.post("/v1/nodes", json={**make_doc(), "agent": agent})
    assert response.status_code == 400 and "agent" in response.json()["error"]["field"]
    assert await written(service) == []


@pytest.mark.parametrize("path", [
    "/issues/9223372036854775808", "/issues/-1", "/issues/99999999999999999999999",
    "/v1/changes?since=" + "eyJhZnRlciI6ICI5OTk5OTk5OTk5OTk5OTk5OTk5OTk5In0",  # {"after": "9999999999999999999999"}
    "/v1/changes?since=not-a-cursor", "/v1/changes.jsonl?since=%00%ff",
    "/v1/changes?since=" + "W1tbW1tbW1tbW1tbW1tbXV1dXV1dXV1dXV1dXV1d",  # a nested list
    "/v1/nodes?cursor=eyJhZnRlciI6IDF9",  # {"after": 1}
    f"/v1/nodes/{NODE}/feedback?after=92233720368547758070",
    f"/v1/nodes/{NODE}/article/revisions?from_revision=92233720368547758070&to_revision=1",
    "/v1/search?q=x&limit=92233720368547758070", "/v1/search?q=x&limit=%C2%B2", "/v1/review?limit=-9" + "9" * 30,
])
async def test_huge_and_malformed_numbers_in_urls_are_4xx(service: Mesh, make_doc, path):
    await service.creation.create_node(make_doc())
    async with client_for(service) as client:
        response = await client.get(path)
    assert response.status_code in {400, 404}, (path, response.status_code, response.text[:300])
    assert response.json()["error"]["code"]


async def test_dedupe_task_ids_past_64_bits_are_404(service: Mesh, make_doc):
    async with client_for(service) as client:
        response = await client.post("/v1/dedupe/tasks/9223372036854775808/votes",
                                     json={"vote": "same", "agent": {"id": "a"}})
    assert response.status_code == 404


async def test_documents_are_bounded_before_they_are_checked(service: Mesh, make_doc):
    solution = make_doc()["content"]["solutions"][0]
    many = [{**solution, "id": f"s{i}", "env": [f"label{i}"]} for i in range(MAX_ANSWERS + 1)]
    too_many_answers = make_doc()
    too_many_answers["content"]["solutions"] = many
    long_fix = make_doc()
    long_fix["content"]["solutions"][0]["fix"] = ["echo x"] * (MAX_ITEMS + 1)
    huge = make_doc()
    huge["content"]["symptom"] = "x" * 19_000
    huge["content"]["boundaries"] = ["y" * 19_000] * 11
    nested = make_doc()
    nested["content"]["alternatives"] = [json.loads('{"a": ' + deep(MAX_DEPTH) + "}")]
    for document, field in ((too_many_answers, "/content/solutions"), (long_fix, "/content/solutions/0/fix"),
                            (huge, "/"), (nested, "/content/alternatives/0/a")):
        async with client_for(service) as client:
            response = await client.post("/v1/nodes", json=document)
        assert response.status_code == 400, response.text[:200]
        assert response.json()["error"]["field"].startswith(field)
    assert await written(service) == []


async def test_overlapping_answers_report_a_few_conflicts_quickly(service: Mesh, make_doc):
    solution = make_doc()["content"]["solutions"][0]
    document = make_doc()
    document["content"]["solutions"] = [{**solution, "id": f"s{i}", "env": []} for i in range(MAX_ANSWERS)]
    started = time.perf_counter()
    async with client_for(service) as client:
        response = await client.post("/v1/nodes", json=document)
    assert time.perf_counter() - started < 5  # was minutes for 1,200 answers; the bound makes it trivial
    assert response.status_code == 409 and len(response.json()["error"]["conflicting_answers"]) == 5


# -- cross-site writes ------------------------------------------------------------------------


@pytest.mark.parametrize(("content_type", "body"), [
    ("text/plain", '{"node": "python/module-not-found-venv", "outcome": "failed"}'),
    ("application/x-www-form-urlencoded", "id=python%2Fx&title=x"),
    ("multipart/form-data; boundary=x", "--x--"),
])
async def test_writes_take_json_only(service: Mesh, make_doc, content_type, body):
    await service.creation.create_node(make_doc())
    before = await written(service)
    async with client_for(service) as client:
        for path in ("/v1/feedback", "/v1/nodes"):
            response = await client.post(path, content=body, headers={"content-type": content_type})
            assert response.status_code == 415 and response.json()["error"]["code"] == "unsupported_media_type"
    assert await written(service) == before


async def test_a_loopback_server_refuses_writes_from_other_sites(service: Mesh, make_doc):
    document = make_doc()
    async with client_for(service) as client:
        evil = await client.post("/v1/nodes", json=document, headers={"origin": "https://evil.example"})
        rebound = await client.post("/v1/nodes", json=document, headers={"host": "evil.example:8765"})
        local = await client.post("/v1/nodes", json=document, headers={"origin": "http://localhost:8765"})
        preflight = await client.options("/v1/nodes", headers={"origin": "https://evil.example",
                                                               "access-control-request-method": "POST"})
        read = await client.get(f"/v1/nodes/{document['id']}", headers={"origin": "https://evil.example"})
    assert (evil.status_code, evil.json()["error"]["code"]) == (403, "forbidden_origin")
    assert b'{"error":{"code":"forbidden_origin",' in evil.content  # compact, as every other body
    assert (rebound.status_code, rebound.json()["error"]["code"]) == (403, "forbidden_host")
    assert local.status_code == 201
    assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
    assert read.status_code == 200 and "access-control-allow-origin" not in read.headers  # no CORS by default


async def test_a_loopback_server_answers_loopback_names_only(service: Mesh, make_doc):
    """A page rebound to 127.0.0.1 sends its own name as Host: `127.0.0.1.attacker.example` only
    starts like a loopback address (it was trusted, so such a page could create and patch nodes),
    and reads are its to take as much as writes."""
    await service.creation.create_node(make_doc())
    before = await written(service)
    rebound = "127.0.0.1.attacker.example:8765"
    issue = {"title": "planted", "body": "planted", "agent": {"id": "a"}}
    async with client_for(service) as client:
        filed = await client.post("/v1/issues", json=issue, headers={"host": rebound, "origin": f"http://{rebound}"})
        patched = await client.patch(f"/v1/nodes/{NODE}/article", headers={"host": rebound}, json={
            "base_revision": 1, "summary": "x", "ops": [{"op": "set", "path": "/content/context", "value": "x"}]})
        reads = [await client.get(path, headers={"host": rebound}) for path in (f"/v1/nodes/{NODE}", "/v1/health", "/")]
        loopbacks = [await client.get(f"/v1/nodes/{NODE}", headers={"host": host})
                     for host in ("127.0.0.2:8765", "[::1]:8765", "localhost:8765", "127.0.0.1")]
    for refused in (filed, patched, *reads):
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden_host")
    assert [answer.status_code for answer in loopbacks] == [200] * 4
    assert await written(service) == before and await service.issues.list_issues() == []


async def test_cors_is_an_allow_list(service: Mesh, make_doc):
    allowed = "https://ide.example"
    async with client_for(service, cors_origins=(allowed,)) as client:
        preflight = await client.options("/v1/feedback", headers={"origin": allowed,
                                                                  "access-control-request-method": "POST"})
        created = await client.post("/v1/nodes", json=make_doc(), headers={"origin": allowed})
        other = await client.post("/v1/nodes", json=make_doc(), headers={"origin": "https://evil.example"})
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == allowed
    assert created.status_code == 201 and created.headers["access-control-allow-origin"] == allowed
    assert other.status_code == 403


async def test_issue_pages_get_the_pages_policy(service: Mesh):
    await service.issues.file_issue({"title": "<script>x</script>", "body": "b", "agent": {"id": "a"}})
    async with client_for(service) as client:
        page = await client.get("/issues", headers={"accept": "text/html"})
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script>x" not in page.text


# -- the contract's loose ends ----------------------------------------------------------------


async def test_the_old_solutions_route_is_gone(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    async with client_for(service) as client:
        response = await client.post(f"/v1/nodes/{NODE}/solutions", json={"id": "x"})
    assert response.status_code == 410 and "PATCH" in response.json()["error"]["message"]


async def test_article_reads_restore_archived_failures_and_carry_next(service: Mesh, make_doc):
    open_problem = make_doc(id="python/open-one", error="OpenError: nobody knows yet")
    open_problem["content"]["solutions"] = []
    await service.creation.create_node(open_problem)
    attempt = {"environment": {"os": "linux"}, "summary": "reinstalled", "steps": ["pip install x"],
               "reason": "same error", "agent": {"id": "a1"}}
    await service.failures.report_failed_attempt("python/open-one", attempt)
    async with client_for(service) as client:
        unsolved = (await client.get("/v1/nodes/python/open-one/article")).json()
        answer = make_doc()["content"]["solutions"][1]
        patched = await client.patch("/v1/nodes/python/open-one/article", json={
            "base_revision": unsolved["revision"], "agent": {"id": "a2"}, "summary": "Add the linux answer",
            "ops": [{"op": "set", "path": "/content/solutions/-", "value": answer}]})
        plain = (await client.get("/v1/nodes/python/open-one/article")).json()
        archived = (await client.get("/v1/nodes/python/open-one/article?include=archived_failures")).json()
        markdown = await client.get("/v1/nodes/python/open-one.md?include=archived_failures")
    assert unsolved["next"]["patch_article"]["body"]["base_revision"] == unsolved["revision"]
    assert patched.status_code == 200
    assert "next" not in plain and "failures" not in plain
    assert [f["archived"] for f in archived["failures"]] == [True]
    assert markdown.status_code == 200
    assert "## Approaches that did not work" in markdown.text
    assert "- (archived: an answer now covers this environment; os linux) reinstalled" in markdown.text
    assert "  - Ran `pip install x`" in markdown.text and "  - Why: same error" in markdown.text


async def test_failure_reports_stay_listed_after_evidence_clears_them(service: Mesh, make_doc):
    await service.creation.create_node(make_doc())
    linux = {"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"}
    for agent, outcome in (("f1", "failed"), ("f2", "failed"), ("s1", "solved"), ("s2", "solved")):
        report = {"node": NODE, "solution": "venv-linux", "outcome": outcome, "env": linux, "agent": {"id": agent}}
        if outcome == "failed":
            report["reason"] = "still ModuleNotFoundError"
        else:
            report["evidence"] = {"verify": ".venv/bin/python -c 'import requests'", "exit_code": 0}
        await service.outcomes.report_outcome(report)
    async with client_for(service) as client:
        listed = (await client.get(f"/v1/nodes/{NODE}/failures")).json()
        read = (await client.get(f"/v1/nodes/{NODE}", params={"env": "ubuntu-24.04,python-3.12,pip"})).json()
    assert [r["agent"]["id"] for r in listed["failed_reports"]] == ["f1", "f2"]
    assert read["content"]["solutions"][0]["id"] == "venv-linux"  # cleared: served again, evidence kept


async def test_dotnet_aliases_fold(service: Mesh, make_doc):
    for alias, slug in ((".net", "a"), ("c#", "b"), ("csharp", "c")):
        document = make_doc(id=f"dotnet/{slug}", ecosystem=alias, error=f"error NU1101: Unable to find package Pkg{slug}x")
        created = await service.creation.create_node(document)
        assert created["id"] == f"dotnet/{slug}"
    assert {n["ecosystem"] for n in (await service.nodes.list_nodes(ecosystem=".net"))["nodes"]} == {"dotnet"}


async def test_the_asked_ecosystem_scores_strictly_above_the_others(tmp_path):
    service = await Mesh.open(tmp_path / "seeded.db")
    try:
        envelope = await service.searching.search("permission denied", ecosystem="docker", limit=10)
    finally:
        await service.close()
    results = envelope["results"]
    matching = [r["score"] for r in results if r["ecosystem"] == "docker"]
    others = [r["score"] for r in results if r["ecosystem"] != "docker"]
    assert matching and others and min(matching) > max(others)


async def test_a_reader_can_recompute_the_version_it_read(service: Mesh, make_doc):
    import hashlib

    await service.creation.create_node(make_doc())
    async with client_for(service) as client:
        read = (await client.get(f"/v1/nodes/{NODE}/article")).json()
    article = {key: value for key, value in read["article"].items() if key not in ("status", "version")}
    article["content"]["solutions"] = [{k: v for k, v in s.items() if k != "revision"}
                                       for s in article["content"]["solutions"]]
    canonical = json.dumps(article, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest() == read["version"]


# -- client addresses -------------------------------------------------------------------------


async def test_forwarded_for_is_ignored_unless_the_proxy_is_trusted(service: Mesh, make_doc):
    from conftest import serving

    async def creates(trust_proxy: str | None) -> list[int]:
        statuses = []
        async with serving(build_app(service=service, with_mcp=False, write_limit=2), trust_proxy=trust_proxy) as url:
            async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
                for n in range(4):
                    document = make_doc(id=f"python/forwarded-{trust_proxy}-{n}".replace("None", "x").replace(".", "-"),
                                        error=f"ForwardedError: attempt{n}x{trust_proxy}")
                    response = await client.post("/v1/nodes", json=document,
                                                 headers={"x-forwarded-for": f"203.0.113.{n}"})
                    statuses.append(response.status_code)
        return statuses

    assert await creates(None) == [201, 201, 429, 429]  # one address, whatever the header says
    assert await creates("127.0.0.1") == [201, 201, 201, 201]  # a named proxy's header is believed


async def test_the_address_secret_lives_outside_the_database(tmp_path, monkeypatch):
    import os
    import sqlite3

    from knowmesh_mcp.core.addresses import SECRET_ENV, secret_file

    monkeypatch.delenv(SECRET_ENV, raising=False)
    path = tmp_path / "mesh.db"
    service = await Mesh.open(path, seed=False)
    try:
        first = await service.addresses.ip_hash("198.51.100.7")
    finally:
        await service.close()
    secret = secret_file(str(path))
    assert secret.is_file() and secret.stat().st_mode & 0o777 == 0o600
    assert secret.read_text().strip() not in path.read_bytes().decode("latin-1")
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM meta WHERE key = 'ip_hash_secret'").fetchone()[0] == 0
    reopened = await Mesh.open(path, seed=False)
    try:
        assert await reopened.addresses.ip_hash("198.51.100.7") == first  # stable across restarts
    finally:
        await reopened.close()
    monkeypatch.setenv(SECRET_ENV, "from-the-environment")
    other = await Mesh.open(path, seed=False)
    try:
        assert await other.addresses.ip_hash("198.51.100.7") != first
    finally:
        await other.close()
    assert os.environ[SECRET_ENV] == "from-the-environment"


async def test_an_older_database_secret_moves_out_and_keeps_its_hashes(tmp_path, monkeypatch):
    import hashlib
    import hmac
    import sqlite3

    from knowmesh_mcp.core.addresses import SECRET_ENV, secret_file

    monkeypatch.delenv(SECRET_ENV, raising=False)
    path = tmp_path / "old.db"
    service = await Mesh.open(path, seed=False)
    await service.close()
    with sqlite3.connect(path) as connection:
        connection.execute("INSERT INTO meta (key, value) VALUES ('ip_hash_secret', 'old-secret')")
    service = await Mesh.open(path, seed=False)
    try:
        hashed = await service.addresses.ip_hash("192.0.2.1")
    finally:
        await service.close()
    assert hashed == hmac.new(b"old-secret", b"192.0.2.1", hashlib.sha256).hexdigest()
    assert secret_file(str(path)).read_text().strip() == "old-secret"
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM meta WHERE key = 'ip_hash_secret'").fetchone()[0] == 0


async def test_a_write_waiting_on_another_process_is_a_503_and_nothing_is_written(tmp_path, make_doc, monkeypatch):
    """Another process on the same SQLite file (an import, a second server) holds its write lock past
    the busy timeout: the write is 503 database_busy with Retry-After, over HTTP and as an MCP tool
    error, nothing is half written, and the same request succeeds once the lock is free."""
    import sqlite3

    from mcp import Client

    from knowmesh_mcp.mcp.server import build_mcp_server
    from knowmesh_mcp.store.sqlite import connection as sqlite_store

    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 200)  # not 10 s of waiting in a test
    path = tmp_path / "busy.db"
    service = await Mesh.open(path, seed=False)
    other = sqlite3.connect(path, isolation_level=None)  # the other process
    try:
        other.execute("BEGIN IMMEDIATE")
        document = make_doc(id="python/busy-node", error="BusyError: lock held by 'importer'")
        async with client_for(service, write_limit=0) as http:
            response = await http.post("/v1/nodes", json=document)
            assert response.status_code == 503, response.text
            assert response.headers["Retry-After"] == "5"
            assert response.json()["error"]["code"] == "database_busy"
            async with Client(build_mcp_server(lambda: service)) as client:
                result = await client.call_tool("create_node", document)
            assert result.is_error and result.structured_content["error"]["code"] == "database_busy"
            assert await written(service) == []
            other.execute("ROLLBACK")
            assert (await http.post("/v1/nodes", json=document)).status_code == 201
        assert [d["id"] for d in await written(service)] == ["python/busy-node"]
    finally:
        other.close()
        await service.close()
