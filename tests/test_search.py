"""Search through the service, the HTTP route, the MCP tool and the CLI, over the starter corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import httpx2
import pytest
from conftest import new_pg_database, opened
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.core.identity import Actor
from knowmesh_mcp.search.query import MAX_QUERY_CHARS, index_row, value_shapes
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.store import store_dir

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

SEED_CACHE: dict[str, bytes] = {}


@pytest.fixture(scope="session")
def pg_templates(postgres_server: str) -> Iterator[list[str]]:
    """The seeded PostgreSQL databases that tests copy (one a worker), dropped at the end."""
    import psycopg

    names: list[str] = []
    yield names
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        for name in names:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def seeded_pg_template(server: str, names: list[str]) -> str:
    """A database of the starter corpus, made by the first test of a worker that needs one."""
    import psycopg

    if not names:
        name = f"knowmesh_seeded_{os.getpid()}"
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8'")
        names.append(name)
        await (await Mesh.open(urlunsplit(urlsplit(server)._replace(path=f"/{name}")))).close()
    return names[0]


@pytest.fixture
async def corpus(backend, request, tmp_path) -> AsyncIterator[Mesh]:
    """A database seeded with the starter corpus (built once, copied per test), on the test's backend."""
    if backend == "postgres":
        server = request.getfixturevalue("postgres_server")
        template = await seeded_pg_template(server, request.getfixturevalue("pg_templates"))
        with new_pg_database(server, template=template) as url:
            async with opened(url) as service:
                yield service
        return
    path = tmp_path / "corpus.db"
    if "db" not in SEED_CACHE:
        service = await Mesh.open(path)
        await service.close()
        SEED_CACHE["db"] = path.read_bytes()
    else:
        path.write_bytes(SEED_CACHE["db"])
    async with opened(path) as service:
        yield service


def ids(envelope: dict) -> list[str]:
    return [result["id"] for result in envelope["results"]]


async def test_the_spec_example_finds_the_macos_sed_node(corpus: Mesh):
    envelope = await corpus.searching.search("sed in place edit fails on mac")
    assert ids(envelope)[0] == "shell/sed-in-place-bsd-vs-gnu"
    assert envelope["results"][0]["match"] == "most_terms"


async def test_raw_error_with_other_values_is_a_signature_match(corpus: Mesh):
    envelope = await corpus.searching.search("Error: listen EADDRINUSE: address already in use 127.0.0.1:5173", env="macos-14")
    top = envelope["results"][0]
    assert (top["id"], top["match"]) == ("node/eaddrinuse", "signature")
    assert top["solution"]["env"] == ["macos"]
    assert top["score"] >= 0.9


async def test_a_traceback_finds_the_node_of_its_last_line(corpus: Mesh):
    traceback = """Traceback (most recent call last):
  File "C:\\Users\\ana\\proj\\app.py", line 41, in <module>
    from setup_helpers import build
  File "C:\\Users\\ana\\proj\\setup_helpers.py", line 3, in <module>
    from distutils.core import setup
ModuleNotFoundError: No module named 'distutils'"""
    envelope = await corpus.searching.search(traceback, env="windows-11,python-3.12")
    assert ids(envelope)[0] == "python/distutils-removed-312"
    assert envelope["results"][0]["match"] == "signature"


async def test_compiler_output_finds_its_error_line(corpus: Mesh):
    output = """   Compiling demo v0.1.0 (/home/u/demo)
error[E0382]: borrow of moved value: `names`
 --> src/main.rs:9:22
  |
7 |     let moved = names;
  |                 ----- value moved here
9 |     println!("{:?}", names);
  |                      ^^^^^ value borrowed here after move
  |
help: consider cloning the value if the performance cost is acceptable
error: could not compile `demo` (bin "demo") due to 1 previous error"""
    assert ids(await corpus.searching.search(output))[0] == "rust/e0382-borrow-of-moved-value"


async def test_confusable_errors_are_told_apart_by_their_values(corpus: Mesh):
    generic = await corpus.searching.search("ModuleNotFoundError: No module named 'flask'")
    specific = await corpus.searching.search("ModuleNotFoundError: No module named 'distutils'")
    assert ids(generic)[0] == "python/module-not-found-venv"
    assert ids(specific)[0] == "python/distutils-removed-312"


async def test_synonyms_apply_to_natural_language(corpus: Mesh):
    for phrase in ("sed -i fails on osx", "sed -i error on darwin"):
        assert ids(await corpus.searching.search(phrase))[0] == "shell/sed-in-place-bsd-vs-gnu", phrase


async def test_env_picks_the_one_answer_per_result(corpus: Mesh):
    mac = (await corpus.searching.search("sed -i invalid command code", env="macos-15"))["results"][0]
    linux = (await corpus.searching.search("sed -i invalid command code", env="ubuntu-24.04"))["results"][0]
    assert mac["id"] == linux["id"] == "shell/sed-in-place-bsd-vs-gnu"
    assert "macos" in mac["solution"]["env"] and "linux" in linux["solution"]["env"]
    assert mac["env_match"] == 1.0 and mac["env_score"] == 1.0
    none = (await corpus.searching.search("sed -i invalid command code"))["results"][0]
    assert none["env_match"] is None and none["env_score"] is None


async def test_no_slot_for_the_env_says_so(corpus: Mesh):
    envelope = await corpus.searching.search("sed: 1: \"file.txt\": invalid command code f", env="freebsd-14")
    top = envelope["results"][0]
    if top["solution"] is None:
        assert top["no_known_working_solution"] is True and top["has_answer"] is True
        assert top["next"]["patch_article"]["tool"] == "patch_article"


async def test_open_problems_are_findable_and_carry_next(corpus: Mesh):
    envelope = await corpus.searching.search("jest did not exit one second after the test run has completed")
    top = envelope["results"][0]
    assert top["id"] == "node/jest-worker-failed-to-exit"
    assert top["has_answer"] is False and top["solution"] is None
    assert top["next"]["report_failed_attempt"]["tool"] == "report_failed_attempt"


async def test_ecosystem_ranks_but_never_filters(corpus: Mesh):
    plain = await corpus.searching.search("permission denied")
    docker_first = await corpus.searching.search("permission denied", ecosystem="Docker")
    assert docker_first["ecosystem"] == "docker"
    assert docker_first["results"][0]["ecosystem"] == "docker"
    assert any(r["ecosystem"] != "docker" for r in docker_first["results"]) or len(plain["results"]) == len(docker_first["results"])
    folded = await corpus.searching.search("cannot connect", ecosystem="pg")
    assert folded["ecosystem"] == "postgres"


async def test_envelope_fields_and_monotonic_scores(corpus: Mesh):
    envelope = await corpus.searching.search("permission denied", limit=50)
    assert envelope["limit"] == 20  # clamped, not refused
    scores = [r["score"] for r in envelope["results"]]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    for result in envelope["results"]:
        for key in ("match", "score", "env_match", "env_score", "sample_size", "low_confidence", "last_verified",
                    "stale", "tokens_estimate", "has_answer", "no_known_working_solution", "failed_solutions",
                    "answer_state", "solution", "path", "version"):
            assert key in result, key
        assert result["match"] in {"signature", "all_terms", "most_terms", "fuzzy"}
        assert result["tokens_estimate"] > 0


async def test_no_match_carries_guidance_with_a_ready_body(corpus: Mesh):
    envelope = await corpus.searching.search("Kotlin: kotlinx.coroutines.JobCancellationException: Job was cancelled", env="linux,java-21")
    assert envelope["results"] == []
    guidance = envelope["guidance"]
    assert guidance["reason"] == "no_match"
    body = guidance["create_node"]["body"]
    assert body["content"]["solutions"] == [] and guidance["create_node"]["tool"] == "create_node"
    created = await corpus.creation.create_node(body)  # the ready body is valid as it is
    assert created["status"] == "draft"
    assert ids(await corpus.searching.search("JobCancellationException: Job was cancelled"))[0] == created["id"]


@pytest.mark.parametrize("ecosystem, published", [
    ("Not An Ecosystem!!", "java"), ("foo/bar", "java"), ("c#", "dotnet"), ("x" * 300, "java"), ("zig", "zig"),
])
async def test_no_match_guidance_publishes_under_an_ecosystem_an_id_can_start_with(corpus: Mesh, ecosystem, published):
    # Search takes any ecosystem (it only orders by it); the ready body must still be a valid node.
    envelope = await corpus.searching.search("Kotlin: kotlinx.coroutines.JobCancellationException: Job was cancelled",
                                   env="linux,java-21", ecosystem=ecosystem)
    body = envelope["guidance"]["create_node"]["body"]
    assert body["ecosystem"] == published and body["id"].startswith(f"{published}/")
    assert (await corpus.creation.create_node(body))["status"] == "draft"


@pytest.mark.parametrize("q", [None, "", "   \n\t "])
async def test_missing_query_is_400(corpus: Mesh, q):
    with pytest.raises(KnowmeshError) as caught:
        await corpus.searching.search(q)
    assert (caught.value.status, caught.value.code) == (400, "missing_query")


async def test_limit_zero_is_400(corpus: Mesh):
    with pytest.raises(KnowmeshError) as caught:
        await corpus.searching.search("x", limit=0)
    assert caught.value.status == 400


HOSTILE = [
    'title:x', 'status: done', 'a AND', 'OR', 'NOT dogs', 'NEAR(a b)', 'cats NOT dogs', '"unterminated', "don't",
    "a'b", 'multi-agent', 'grammar::fa', 'ubuntu 20.04', 'health.base', 'Downloads/transcripts', '@nasa #tag a=b 50% why?',
    '[br] {x} (y) ^z *', '=', '\\', 'skill-audit, x', '\x00\x01\x1b[31m', '💥🔥 ModuleNotFoundError 💥', '"' * 40,
    'x' * MAX_QUERY_CHARS * 2, ('error: ' + 'a b c ' * 3000),
]


@pytest.mark.parametrize("q", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_queries_never_break_fts(corpus: Mesh, q):
    envelope = await corpus.searching.search(q)
    assert len(envelope["query"]) <= MAX_QUERY_CHARS
    assert "results" in envelope


async def test_hostile_query_that_names_real_terms_still_finds(corpus: Mesh):
    # Operators and punctuation must not silently turn a real query into "no results".
    assert ids(await corpus.searching.search('"EADDRINUSE" AND (address already in use) OR NOT title:*'))[0] == "node/eaddrinuse"


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=st.text(min_size=1, max_size=300))
async def test_any_string_is_a_valid_query(corpus: Mesh, q):
    if not q.strip():
        with pytest.raises(KnowmeshError):
            await corpus.searching.search(q)
        return
    envelope = await corpus.searching.search(q, env=q[:40], ecosystem=q[:10])
    scores = [r["score"] for r in envelope["results"]]
    assert scores == sorted(scores, reverse=True)
    assert envelope["results"] or envelope["guidance"]["reason"] == "no_match"


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=st.text(max_size=200), limit=st.one_of(st.none(), st.text(max_size=4)))
async def test_search_route_is_never_a_500(corpus: Mesh, q, limit):
    app = build_app(service=corpus, with_mcp=False)
    params = {"q": q} if limit is None else {"q": q, "limit": limit}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        response = await client.get("/v1/search", params=params)
    assert response.status_code in {200, 400}, response.text
    if response.status_code == 400:
        assert response.json()["error"]["code"] in {"missing_query", "invalid_parameter"}


async def test_http_route(corpus: Mesh):
    app = build_app(service=corpus, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        found = await client.get("/v1/search", params={"q": "fatal: detected dubious ownership in repository at '/srv/app'", "limit": 3})
        missing = await client.get("/v1/search")
    assert found.status_code == 200 and found.headers["x-knowmesh-content-trust"] == "untrusted-data"
    assert found.json()["results"][0]["id"] == "git/dubious-ownership"
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "missing_query"


async def test_mcp_tool_is_bounded_and_says_what_it_cut(corpus: Mesh, mcp_connect):
    async with mcp_connect(corpus, mode="legacy") as client:
        full = await client.call_tool("search", {"q": "permission denied", "limit": 20, "max_bytes": 1_000_000})
        small = await client.call_tool("search", {"q": "permission denied", "limit": 20, "max_bytes": 4096})
        blank = await client.call_tool("search", {"q": "  "})
    assert not full.is_error and full.structured_content["truncated"] == []
    body = small.structured_content
    assert len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()) <= 4096
    assert body["truncated"] and body["results"][0]["id"] == full.structured_content["results"][0]["id"]
    assert blank.is_error and json.loads(blank.content[0].text)["error"]["code"] == "missing_query"


def test_cli_search_table_and_json(tmp_path):
    command = [sys.executable, "-m", "knowmesh_mcp.cli.main", "search", "--db", str(tmp_path / "k.db")]
    table = subprocess.run([*command, "sed in place edit fails on mac", "--env", "macos-15"], capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split()[:3] == ["SCORE", "MATCH", "ID"]
    assert "shell/sed-in-place-bsd-vs-gnu" in table.stdout.splitlines()[1]
    as_json = subprocess.run([*command, "-", "--json"], input="Error: Cannot find module 'left-pad'\nRequire stack:\n- /app/index.js",
                             capture_output=True, text=True, timeout=60)
    assert json.loads(as_json.stdout)["results"][0]["id"] == "node/cannot-find-module"
    blank = subprocess.run([*command, " "], capture_output=True, text=True, timeout=60)
    assert blank.returncode == 2 and "missing_query" in blank.stderr


# -- any tool's output, shared templates, calibrated scores, long input, races --------------

PASTED = [
    # (what was pasted, the node it is about)
    ("#8 [4/5] RUN pip install -r requirements.txt\n#8 0.915 Collecting flask==9.9\n"
     "#8 1.203 ERROR: Could not find a version that satisfies the requirement flask==9.9 (from versions: 0.1, 0.2)\n"
     "#8 1.204 ERROR: No matching distribution found for flask==9.9\n"
     '#8 ERROR: process "/bin/sh -c pip install -r requirements.txt" did not complete successfully: exit code: 1',
     "python/no-matching-distribution"),
    ("2024-05-01T10:00:01.1234567Z npm ERR! code ERESOLVE\n2024-05-01T10:00:01.1234567Z npm ERR! ERESOLVE unable to "
     "resolve dependency tree\n2024-05-01T10:00:01.1234567Z npm ERR! A complete log of this run can be found in: "
     "/home/runner/.npm/_logs/x.log\n2024-05-01T10:00:02.0000000Z ##[error]Process completed with exit code 1.",
     "node/eresolve-peer-deps"),
    ("_________________ ERROR at setup of test_sends_mail _________________\nfile /home/u/app/tests/test_mail.py, line 4\n"
     "  def test_sends_mail(mocker):\nE       fixture 'mocker' not found\n>       available fixtures: cache, capfd, "
     "monkeypatch, tmp_path\n>       use 'pytest --fixtures [testpath]' for help on them.\n"
     "=========================== short test summary info ============================\n"
     "ERROR tests/test_mail.py::test_sends_mail\n=============================== 1 error in 0.03s "
     "===============================", "python/pytest-fixture-not-found"),
    ("2024-01-01T00:00:00.000000+00:00 app[web.1]: Error: listen EADDRINUSE: address already in use :::3000",
     "node/eaddrinuse"),
    ("# command-line-arguments\n./main.go:21:9: undefined: parseConfig\nmake: *** [Makefile:3: build] Error 1",
     "go/undefined-file-not-in-build"),
    ("* What went wrong:\nExecution failed for task ':app:compileJava'.\n> Could not resolve all files for configuration "
     "':app:compileClasspath'.\n   > Could not find com.squareup.okhttp3:okhttp:9.9.9.\n\nBUILD FAILED in 3s",
     "java/gradle-could-not-resolve-dependency"),
]


@pytest.mark.parametrize(("output", "node"), PASTED, ids=[node for _, node in PASTED])
async def test_pasted_tool_output_finds_the_node_of_its_cause(corpus: Mesh, output, node):
    assert ids(await corpus.searching.search(output))[0] == node


@pytest.mark.parametrize(("query", "node"), [
    ("ModuleNotFoundError: No module named 'cv2'", "python/no-module-cv2-opencv"),
    ("ModuleNotFoundError: No module named 'flask'", "python/module-not-found-venv"),
    ("bash: nvm: command not found", "shell/nvm-command-not-found"),
    ("zsh: command not found: nvm", "shell/nvm-command-not-found"),
    ("./deploy.sh: line 3: python: command not found", "shell/python-command-not-found-python3-only"),
    ("zsh: command not found: brew", "shell/brew-command-not-found-apple-silicon"),
])
async def test_nodes_sharing_a_template_are_told_apart_by_the_value(corpus: Mesh, query, node):
    assert ids(await corpus.searching.search(query))[0] == node


async def test_tied_nodes_come_by_id_and_deprecated_ones_give_way(corpus: Mesh, make_doc):
    """Nodes the ranking cannot tell apart come in id order, however many tie and in whatever
    order they were written; a deprecated one is never shown and the next one takes its place."""
    letters = "bcdfghjkmnpqrs"  # no stopword among the ids' words ("a", "i")
    for letter in reversed(letters):  # written last-id first: node order is not id order
        await corpus.creation.create_node(make_doc(id=f"python/widget-{letter}", title="ZzqError: frobnicated widget",
                                          error=f"ZzqError: frobnicated widget '{letter}{letter}'"))
    found = (await corpus.searching.search("ZzqError: frobnicated widget 'other'", limit=3))["results"]
    assert len({r["score"] for r in found}) == 1
    assert ids({"results": found}) == ["python/widget-b", "python/widget-c", "python/widget-d"]
    await corpus.maintenance.set_status("python/widget-b", "deprecated", note="superseded", actor=Actor("mia", "token", role="maintainer"))
    found = await corpus.searching.search("ZzqError: frobnicated widget 'other'", limit=3)
    assert ids(found) == ["python/widget-c", "python/widget-d", "python/widget-f"]


async def test_a_node_about_a_function_word_value_is_not_generic(corpus: Mesh, make_doc):
    """`(reading 'then')` names what the node is about although `then` is a stopword: another
    value's query must not take it as the generic answer, and its own value finds it."""
    document = make_doc(id="node/cannot-read-properties-then", ecosystem="node",
                        title="Cannot read properties of undefined (reading 'then'): not a promise",
                        error="TypeError: Cannot read properties of undefined (reading 'then')")
    document["signature"].update(environment=["node>=16"], aliases=[])
    assert index_row(document).specific
    await corpus.creation.create_node(document)
    own = await corpus.searching.search("TypeError: Cannot read properties of undefined (reading 'then')")
    assert own["results"][0]["id"] == "node/cannot-read-properties-then"
    assert own["results"][0]["score"] >= 0.5
    other = await corpus.searching.search("TypeError: Cannot read properties of undefined (reading 'map')")
    assert all(r["score"] < 0.5 for r in other["results"] if r["id"] == "node/cannot-read-properties-then")


async def test_a_wrapper_line_alone_is_a_hint_not_an_answer(corpus: Mesh):
    envelope = await corpus.searching.search("=========================== 1 failed in 0.12s ===========================")
    assert all(result["score"] < 0.5 for result in envelope["results"])
    assert envelope["guidance"]["reason"] == ("weak_match" if envelope["results"] else "no_match")
    assert envelope["guidance"]["create_node"]["body"]["content"]["solutions"] == []


async def test_a_sure_answer_says_so_and_brings_no_guidance(corpus: Mesh):
    envelope = await corpus.searching.search("./deploy.sh: line 3: nvm: command not found")
    assert envelope["results"][0]["id"] == "shell/nvm-command-not-found"
    assert envelope["results"][0]["score"] >= 0.5 and "guidance" not in envelope


def _long_log(error: str) -> str:
    noise = "".join(f"2024-05-01T10:00:{i % 60:02d}.1234567Z step {i}: compiling module_{i}.c\n" for i in range(22_000))
    return (noise + f"2024-05-01T10:09:59.0Z {error}\n##[error]Process completed with exit code 1.\n")[-(1 << 20):]


LONG = _long_log("ModuleNotFoundError: No module named 'distutils'")


async def test_a_long_log_is_read_whole_and_its_error_at_the_end_found(corpus: Mesh):
    assert len(LONG) == 1 << 20
    envelope = await corpus.searching.search("x" * 500_000 + LONG)  # past 1 MiB the tail is read
    assert ids(envelope)[0] == "python/distutils-removed-312"
    assert envelope["query_length"] == 500_000 + len(LONG) and len(envelope["query"]) <= MAX_QUERY_CHARS


async def test_post_search_takes_the_get_fields_as_json(corpus: Mesh):
    app = build_app(service=corpus, with_mcp=False)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        query = {"q": "fatal: detected dubious ownership in repository at '/srv/app'", "limit": 3}
        got = await client.get("/v1/search", params=query)
        posted = await client.post("/v1/search", json=query)
        long = await client.post("/v1/search", json={"q": LONG, "env": "ubuntu-24.04,python-3.12"})
        unknown = await client.post("/v1/search", json={"query": "x"})
        typed = await client.post("/v1/search", json={"q": "x", "limit": "3"})
        huge = await client.post("/v1/search", json={"q": "x" * (4 * 1_048_576)})
        not_object = await client.post("/v1/search", json=["q"])
    assert posted.status_code == 200 and posted.json() == got.json()
    assert posted.headers["x-knowmesh-content-trust"] == "untrusted-data"
    assert long.status_code == 200 and long.json()["results"][0]["id"] == "python/distutils-removed-312"
    assert (unknown.status_code, unknown.json()["error"]["field"]) == (400, "query")
    assert (typed.status_code, typed.json()["error"]["field"]) == (400, "limit")
    assert (huge.status_code, huge.json()["error"]["code"]) == (413, "payload_too_large")
    assert not_object.status_code == 400


async def test_mcp_search_reads_a_long_paste(corpus: Mesh, mcp_connect):
    async with mcp_connect(corpus) as client:
        result = await client.call_tool("search", {"q": LONG, "limit": 3})
    assert not result.is_error
    assert result.structured_content["results"][0]["id"] == "python/distutils-removed-312"


def test_cli_search_reads_a_long_log_from_stdin(tmp_path):
    command = [sys.executable, "-m", "knowmesh_mcp.cli.main", "search", "-", "--json", "--db", str(tmp_path / "k.db")]
    done = subprocess.run(command, input=LONG, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"][0]["id"] == "python/distutils-removed-312"


@pytest.mark.slow
async def test_searches_racing_writes_never_fail(corpus: Mesh, make_doc):
    """4 searchers and 1 writer through the HTTP app: every answer is a 200 or 201, none a 500."""
    import anyio

    app = build_app(service=corpus, with_mcp=False, write_limit=0)
    statuses: list[int] = []
    queries = ["sed in place edit fails on mac", "ModuleNotFoundError: No module named 'yaml'",
               "docker permission denied on the socket", "error[E0382]: borrow of moved value: `v`"]

    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        async def searcher(n: int) -> None:
            for i in range(420):
                response = await client.get("/v1/search", params={"q": f"{queries[(n + i) % 4]} word{i % 37}"})
                statuses.append(response.status_code)

        async def writer() -> None:
            for i in range(320):
                document = make_doc(id=f"python/race-{i}", error=f"RaceError: lease lost by worker{i}x")
                response = await client.post("/v1/nodes", json=document)
                statuses.append(response.status_code)

        async with anyio.create_task_group() as group:
            for n in range(4):
                group.start_soon(searcher, n)
            group.start_soon(writer)
    assert len(statuses) >= 2000
    assert set(statuses) <= {200, 201}, sorted(set(statuses))


async def test_a_search_finds_a_node_another_process_wrote(corpus: Mesh, make_doc, tmp_path):
    """Two agents' servers (or a server and the CLI) share one personal mesh: a node the other process
    wrote is found at once, though this process had counted its words as absent and wrote nothing since."""
    query = "qzxjy vvkwq"
    assert (await corpus.searching.search(query))["results"] == []  # its words are now counted here as in no node
    document = make_doc(id="python/qzxjy-vvkwq", title="qzxjy vvkwq will not start",
                        error="QzxjyError: vvkwq needs 'main'")
    (tmp_path / "new.json").write_text(json.dumps(document))
    done = subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", "import", str(tmp_path / "new.json"),
                           "--db", corpus.store.path], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = (await corpus.searching.search(query))["results"]
    assert [r["id"] for r in results][:1] == ["python/qzxjy-vvkwq"]
    assert results[0]["score"] >= 0.5


COMPOSE_PORT_OUTPUT = (  # https://github.com/paunin/PostDock/issues/123: compose v1, progress lines run together
    "Starting dockercompose_pgslave1_1 ...\nStarting dockercompose_pgpool_1 ... error\n\nERROR: for dockercompose_pgpool_1  "
    "Cannot start service pgpool: driver failed programming external connectivity on endpoint dockercompose_pgpool_1 "
    "(190a688ccfa12bd33d76cb41ecd3d0ae84c50b61a6f963be1ed1beaStarting dockercompose_pgslave2_1 ... done\n\nERROR: for pgpool  "
    "Cannot start service pgpool: driver failed programming external connectivity on endpoint dockercompose_pgpool_1 "
    "(190a688ccfa12bd33d76cb41ecd3d0ae84c50b61a6f963be1ed1beade7375b00): Bind for 0.0.0.0:9898 failed: port is already "
    "allocated\nERROR: Encountered errors while bringing up the project.")


async def test_siblings_about_other_services_do_not_hide_the_generic_node(corpus: Mesh):
    """Ninety nodes each about one compose service's endpoint, written from compose's output, read closer
    to the pasted output than the generic port-already-allocated node and fill every ranked channel's
    pool; the generic node, which shares their template, still comes first."""
    generic = json.loads((store_dir() / "starter" / "docker__port-already-allocated.json").read_text())
    siblings = []
    # more than a ranked channel's pool (4 x its limit): the generic node is not among its best matches
    for service in (f"{team}_{role}" for team in ("acme", "northwind", "contoso", "globex", "initech", "hooli", "umbrella",
                                                  "vandelay", "piedpiper", "stark") for role in
                    ("api", "job", "cache", "db", "webhook", "billing", "ledger", "prompt", "user")):
        sibling = json.loads(json.dumps(generic))
        sibling["id"] = f"docker/port-allocated-{service.replace('_', '-')}"
        sibling["title"] = f"Cannot start service {service}: port is already allocated"
        sibling["signature"] = {"error": "docker: Error response from daemon: driver failed programming external "
                                         f"connectivity on endpoint {service} (a1b2c3d4e5f6): Bind for 0.0.0.0:9898 "
                                         "failed: port is already allocated.", "environment": ["docker"]}
        sibling["content"]["context"] = (f"docker compose up: Starting {service} ... error. "
                                         "ERROR: Encountered errors while bringing up the project.")
        siblings.append((sibling["id"], sibling))
    report = await corpus.documents.import_documents(siblings)
    assert len(report.created) == 90, report
    found = ids(await corpus.searching.search(COMPOSE_PORT_OUTPUT, limit=5))
    assert found[0] == "docker/port-already-allocated", found


async def test_a_node_about_a_go_module_path_is_not_generic(corpus: Mesh):
    """A Go module path (`github.com/spf13/cobra`) names a package, not a file: nodes each about one
    module are specific (the domain names nothing), so output naming another module finds the generic
    imported-and-not-used node first, and a module's own output still finds its node."""
    generic = json.loads((store_dir() / "starter" / "go__imported-and-not-used.json").read_text())
    siblings = []
    for owner, name in (("spf13", "cobra"), ("gin-gonic", "gin"), ("stretchr", "testify"), ("sirupsen", "logrus"),
                        ("pkg", "errors"), ("google", "uuid")):
        sibling = json.loads(json.dumps(generic))
        sibling["id"] = f"go/imported-not-used-github.com-{owner}-{name}"
        sibling["title"] = f'Go compile error: "github.com/{owner}/{name}" imported and not used'
        sibling["signature"] = {"error": f'./cmd/main.go:7:2: "github.com/{owner}/{name}" imported and not used',
                                "environment": ["go"]}
        siblings.append((sibling["id"], sibling))
    assert index_row(siblings[0][1]).specific and not index_row(generic).specific
    report = await corpus.documents.import_documents(siblings)
    assert len(report.created) == len(siblings), report
    found = await corpus.searching.search('viewer/viewer.go:8:2: imported and not used: "github.com/mattn/go-runewidth" as runewidth')
    assert ids(found)[0] == "go/imported-and-not-used", ids(found)
    own = await corpus.searching.search('./cmd/main.go:7:2: "github.com/spf13/cobra" imported and not used')
    assert ids(own)[0] == "go/imported-not-used-github.com-spf13-cobra", ids(own)


@pytest.mark.parametrize("remote", ["https://gitlab.com/acme/{}.git", "git@gitlab.com:acme/{}.git"])
async def test_a_node_about_one_repository_is_not_generic(corpus: Mesh, remote: str):
    """A repository's address (a URL or git's scp-like form) is named by its repository, not its host or
    owner: nodes each about one repository are specific, and a push to another repository scores
    them as nodes about a value the query does not name."""
    generic = json.loads((store_dir() / "starter" / "git__push-rejected-fetch-first.json").read_text())
    siblings = []
    for name in ("frame-builder", "user-service", "account-loader", "ledger-utils", "billing-api", "web-shell"):
        sibling = json.loads(json.dumps(generic))
        sibling["id"] = f"git/push-rejected-gitlab.com-acme-{name}"
        sibling["title"] = f"git push to gitlab.com/acme/{name} rejected"
        sibling["signature"] = {"error": f"error: failed to push some refs to '{remote.format(name)}'", "environment": ["git"]}
        siblings.append(sibling)
    assert index_row(siblings[0]).specific and not index_row(generic).specific
    assert set(index_row(siblings[0]).value_terms.split()) == {"frame", "builder"}  # not gitlab, com, acme
    report = await corpus.documents.import_documents([(s["id"], s) for s in siblings])
    assert len(report.created) == len(siblings), report
    query = f"error: failed to push some refs to '{remote.format('backend')}'"
    found = await corpus.searching.search(query, limit=10)
    scores = {result["id"]: result["score"] for result in found["results"]}
    assert "git/push-rejected-fetch-first" in scores, ids(found)
    assert all(scores[s["id"]] < 0.5 for s in siblings if s["id"] in scores), scores  # hints, not answers
    own = await corpus.searching.search(f"error: failed to push some refs to '{remote.format('ledger-utils')}'")
    assert ids(own)[0] == "git/push-rejected-gitlab.com-acme-ledger-utils", ids(own)


@pytest.mark.parametrize(("value", "shape"), [
    ("github.com/spf13/cobra", "name"), ("k8s.io/client-go/kubernetes", "name"), ("golang.org/x/net", "name"),
    ("@angular/core", "name"), ("left-pad", "name"),
    ("@/components/Button", "path"), ("src/index.ts", "path"), ("./dist/main", "path"), ("C:\\app\\main.py", "path"),
    ("https://gitlab.com/acme/backend.git", "path"),
])
def test_a_package_named_by_a_path_is_a_name(value, shape):
    """What `value_shape_conflict` compares: a Go module or a scoped npm package is a package, a file is a path."""
    assert value_shapes([value]) == shape


def test_a_node_about_a_scoped_npm_package_is_specific(make_doc):
    document = make_doc(id="node/cannot-find-module-angular-core", ecosystem="node",
                        title="Cannot find module '@angular/core'", error="Error: Cannot find module '@angular/core'")
    assert index_row(document).specific


@pytest.mark.anyio
@pytest.mark.parametrize(("query", "env"), [
    ("TypeError: Cannot read properties of undefined (reading 'map')", "node-20,npm"),
    ("SyntaxError: Unexpected token '<', \"<!DOCTYPE \"... is not valid JSON", "node-20,npm"),
])
async def test_an_environment_alone_never_lifts_a_node_to_a_likely_match(corpus: Mesh, query: str, env: str):
    """The environment chooses the answer within a node; it is weak evidence that the node is
    right. `--env node-20,npm` lifted go/undefined-file-not-in-build from 0.42 to 0.53 for this
    TypeError (and node/cannot-use-import-statement 0.47 -> 0.68 for the JSON error), and the
    weak-match guidance went away. It may still reorder the guesses."""
    plain = await corpus.searching.search(query, limit=5)
    fitted = await corpus.searching.search(query, env=env, limit=5)
    assert plain["results"][0]["score"] < 0.5
    assert fitted["results"][0]["score"] < 0.5, fitted["results"][0]
    assert fitted["guidance"]["reason"] == "weak_match"


PYTEST_COLLECTION_ERROR = """\
============================= test session starts ==============================
platform linux -- Python 3.11.4, pytest-7.4.0, pluggy-1.2.0
rootdir: /home/dev/proj
collected 0 items / 1 error

==================================== ERRORS ====================================
_____________________ ERROR collecting tests/test_client.py ____________________
ImportError while importing test module '/home/dev/proj/tests/test_client.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/usr/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
tests/test_client.py:3: in <module>
    import requests
E   ModuleNotFoundError: No module named 'requests'
=========================== short test summary info ============================
ERROR tests/test_client.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.12s ==============================="""


async def test_a_missing_dependency_under_pytest_finds_the_venv_node(corpus: Mesh):
    """pytest's collection error for a third-party package: the rootdir node's own boundaries send
    `requests` to python/module-not-found-venv, whose error is exactly this line. It ranked the rootdir
    node at 0.94 and the venv node at 0.03 (issue 48)."""
    found = ids(await corpus.searching.search(PYTEST_COLLECTION_ERROR, limit=5))
    assert found[0] == "python/module-not-found-venv", found


@pytest.mark.parametrize("where", ["error", "alias"])
async def test_an_exact_signature_ranks_first_against_a_richer_competitor(corpus: Mesh, make_doc, where: str):
    """Protocol section 1: exact signatures and aliases rank first. The competitor's title, symptom
    and context repeat every word of the query around another signature; the exact node says little
    else. Without the tier the competitor came first."""
    query = "ZooKeeperError: quorum lost on ensemble 'orders-east' after leader fencing"
    exact = make_doc(id="java/zookeeper-quorum-lost", ecosystem="java", title="Coordination service lost its majority",
                     error=query if where == "error" else "ZooKeeperError: session expired for client 0x1f",
                     content={**make_doc()["content"], "symptom": "The service stops.", "context": "Three nodes."})
    if where == "alias":
        exact["signature"]["aliases"] = [query]
    competitor = make_doc(
        id="java/zookeeper-leader-fencing", ecosystem="java",
        title="ZooKeeperError quorum lost on ensemble orders-east after leader fencing",
        error="ZooKeeperError: leader fencing rejected the write",
        content={**make_doc()["content"],
                 "symptom": "ZooKeeperError: quorum lost on ensemble 'orders-east' after leader fencing, and quorum "
                            "is lost again after every leader fencing on the orders-east ensemble.",
                 "context": "ZooKeeper ensemble orders-east, quorum, leader fencing, lost writes."})
    report = await corpus.documents.import_documents([(exact["id"], exact), (competitor["id"], competitor)])
    assert len(report.created) == 2, report
    results = (await corpus.searching.search(query, limit=5))["results"]
    assert [r["id"] for r in results[:2]] == [exact["id"], competitor["id"]], results
    assert results[0]["score"] >= results[1]["score"]  # the score descends in the final order (protocol section 1)


async def test_an_error_quoted_as_inline_code_is_read_as_the_error(corpus: Mesh):
    """People paste an error line in backticks (an issue, a chat): the backticks are not part of it."""
    plain = ids(await corpus.searching.search("ModuleNotFoundError: No module named 'requests'", limit=3))
    quoted = ids(await corpus.searching.search("`ModuleNotFoundError: No module named 'requests'`", limit=3))
    assert quoted == plain and plain[0] == "python/module-not-found-venv"


async def test_a_close_call_between_two_nodes_is_a_guess(corpus: Mesh, make_doc):
    """Two nodes with the same error and nothing in the query to tell them apart: whichever comes
    first is a guess (issue 48), not a likely match, and the search says so."""
    error = "QuasarLinkError: relocation overflow in segment 'hot_text' of module 'engine_core'"
    twins = [make_doc(id=f"cpp/quasar-relocation-overflow-{which}", ecosystem="cpp", error=f"{error} ({which} build)",
                      title=f"Quasar linker relocation overflow ({which} build)") for which in ("debug", "release")]
    for twin in twins:  # two nodes may not share an error: each has the query as an alias
        twin["signature"]["aliases"] = [error]
    report = await corpus.documents.import_documents([(doc["id"], doc) for doc in twins])
    assert len(report.created) == 2, report
    envelope = await corpus.searching.search(error, limit=5)
    assert {r["id"] for r in envelope["results"][:2]} == {doc["id"] for doc in twins}
    assert envelope["results"][0]["score"] < 0.5, envelope["results"]
    assert envelope["guidance"]["reason"] == "weak_match"
