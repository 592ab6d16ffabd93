"""MCP tool contracts through the real `mcp` client: every tool's result matches its full result
model in `results` (validated here with jsonschema; the server validates it too, and the client
against the short outputSchema published in tools/list), the text copy is compact JSON, and bad
arguments are `invalid_argument` tool errors in plain words."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from knowmesh_mcp.wire import results
from knowmesh_mcp.mcp.server import build_mcp_server
from knowmesh_mcp.core.limits import MIN_BUDGET
from knowmesh_mcp.services.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgres")]

RESULT_MODELS = {
    "search": results.SearchEnvelope,
    "read_article": results.ArticleView,
    "article_history": results.ArticleHistory,
    "review_queue": results.ReviewQueue,
    "create_node": results.CreatedNode,
    "patch_article": results.PublishedEdit,
    "revise_article": results.PublishedEdit,
    "undo_edit": results.PublishedEdit,
    "report_outcome": results.FeedbackReceipt,
    "report_failed_attempt": results.FailedAttemptReceipt,
}
DOCUMENT_KEYS = ("id", "ecosystem", "title", "signature", "content")


def compact(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


class Checked:
    """A real client whose every successful tool result is validated against the full schema of the
    tool's result model with jsonschema (what `/v1/openapi.json` publishes; tools/list carries only
    `{"type": "object"}`, to keep an agent's context small), and whose text copy must be the
    compact JSON of it."""

    def __init__(self, client: Client, tools: dict[str, Any]):
        self.client = client
        self.validators = {name: Draft202012Validator(RESULT_MODELS[name].model_json_schema()) for name in tools}
        self.checked: Counter[str] = Counter()

    async def ok(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(name, arguments)
        assert not result.is_error, (name, result.content[0].text)
        body = result.structured_content
        errors = sorted(self.validators[name].iter_errors(body), key=lambda e: list(e.absolute_path))
        assert not errors, (name, [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]])
        assert [block.type for block in result.content] == ["text"]
        assert result.content[0].text == compact(body), "the text copy is the compact JSON of the result"
        self.checked[name] += 1
        return body

    async def error(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(name, arguments)
        assert result.is_error, (name, result.structured_content)
        assert result.content[0].text == compact(result.structured_content)
        return result.structured_content["error"]


async def tools_of(client: Client) -> dict[str, Any]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize("read_only", [False, True])
async def test_every_tool_declares_structured_output_and_has_a_full_result_model(service, read_only):
    async with Client(build_mcp_server(lambda: service, read_only=read_only)) as client:
        tools = await tools_of(client)
    assert set(tools) == ({"search", "read_article", "article_history", "review_queue"} if read_only else set(RESULT_MODELS))
    for name, tool in tools.items():
        assert tool.output_schema == {"type": "object"}, f"{name}: structured output, its shape in the model"
        schema = RESULT_MODELS[name].model_json_schema()
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["title"] == RESULT_MODELS[name].__name__, name
        assert schema["required"] and schema["properties"], f"{name}: a real schema, not an open object"
        for key, prop in schema["properties"].items():
            assert prop.get("description"), f"{name}.{key} has no description"
            assert prop.get("default", "absent") is not None, f"{name}.{key}: an optional key is absent, never null by default"
        assert tool.input_schema["additionalProperties"] is False, f"{name} refuses arguments it does not name"


async def test_a_result_that_breaks_its_model_is_refused_by_the_server(service):
    """The short outputSchema does not loosen the contract: the server still checks each result
    against the full model before it sends it."""

    class BrokenReview:
        async def review_queue(self, *, limit: Any = None, offset: Any = None) -> dict[str, Any]:
            return {"reasons": [], "limit": "twenty", "items": [], "trust": "untrusted-data"}

    class Broken:
        review = BrokenReview()

    async with Client(build_mcp_server(lambda: Broken())) as client:
        result = await client.call_tool("review_queue", {})
    assert result.is_error and "review_queue" in result.content[0].text


def open_problem(make_doc) -> dict[str, Any]:
    document = make_doc(id="python/open-import-problem", error="ImportError: cannot import name 'zq_widget' from 'zq_pkg'")
    document["title"] = "ImportError for a name that exists in the installed zq_pkg"
    document["content"] = {**document["content"], "solutions": [], "failed_attempts": ["pip install -U zq_pkg"]}
    return document


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_tool_result_matches_its_declared_output_schema(service, make_doc, mode, mcp_connect):
    """Every tool, in the shapes it has: hits and empty searches, bounded and selected reads, blocked
    and unanswered articles, both history forms, every edit kind, flips, failures and the queue."""
    answered, similar, unanswered = (
        make_doc(),
        make_doc(id="python/module-not-found-flask", error="ModuleNotFoundError: No module named 'flask'"),
        open_problem(make_doc),
    )
    answered["content"]["solutions"][1]["provenance"] = {"source": "field report", "url": "https://example.invalid/1"}
    linux = {"os": "ubuntu-24.04", "runtime": "python-3.12", "pkg_manager": "pip"}
    async with mcp_connect(service, mode) as raw:
        checked = Checked(raw, await tools_of(raw))
        ok = checked.ok

        created = await ok("create_node", {key: answered[key] for key in DOCUMENT_KEYS})
        assert created["similar"] == []
        assert (await ok("create_node", {key: similar[key] for key in DOCUMENT_KEYS}))["similar"], "a close node is named"
        await ok("create_node", {**{key: unanswered[key] for key in DOCUMENT_KEYS}, "agent": {"id": "opener"}})

        found = await ok("search", {"q": answered["signature"]["error"], "env": "ubuntu-24.04,python-3.12,pip"})
        assert found["results"] and found["results"][0]["solution"]["id"] == "venv-linux"
        assert "guidance" in await ok("search", {"q": "zzqx qqzv wwxk", "env": "macos-15"})
        assert (await ok("search", {"q": "ModuleNotFoundError", "limit": 20, "max_bytes": MIN_BUDGET}))["truncated"]
        await ok("search", {"q": "ImportError: cannot import name 'zq_widget'", "ecosystem": "python"})

        node = answered["id"]
        for arguments in ({}, {"env": "ubuntu-24.04,python-3.12,pip"}, {"env": "windows-11"}, {"fields": "provenance"},
                          {"fields": "symptom,verify,outcomes"}, {"include": "alternatives,archived_failures"},
                          {"solution": "venv-macos"}, {"max_bytes": MIN_BUDGET}, {"max_bytes": 2048}):
            await ok("read_article", {"id": node, **arguments})

        failed = await ok("report_failed_attempt", {"id": unanswered["id"], "environment": linux, "summary": "Reinstalled zq_pkg",
                                                    "steps": ["pip install --force-reinstall zq_pkg"], "reason": "same error",
                                                    "agent": {"id": "agent-a"}})
        assert failed["archived"] is False
        open_read = await ok("read_article", {"id": unanswered["id"], "env": "ubuntu-24.04,python-3.12,pip"})
        assert open_read["has_answer"] is False and open_read["next"]["reason"] == "no_answer" and open_read["failures"]
        await ok("read_article", {"id": unanswered["id"], "include": "archived_failures"})

        report = {"node": node, "solution": "venv-linux", "env": linux, "revision": 1}
        first = await ok("report_outcome", {**report, "outcome": "failed", "reason": "still missing", "agent": {"id": "agent-a"}})
        assert "next" not in first
        second = await ok("report_outcome", {**report, "outcome": "failed", "reason": "same", "agent": {"id": "agent-b", "model": "m"}})
        assert second["failure_state"] == "known_failed" and second["next"]["report_failed_solution"]["tool"] == "report_outcome"
        blocked = await ok("read_article", {"id": node, "env": "ubuntu-24.04,python-3.12,pip"})
        assert blocked["no_known_working_solution"] and blocked["failed_solutions"] and blocked["next"]
        hits = await ok("search", {"q": answered["signature"]["error"], "env": "ubuntu-24.04,python-3.12,pip"})
        assert hits["results"][0]["failed_solutions"] and hits["results"][0]["solution"] is None
        await ok("review_queue", {"limit": 5})
        disputed = await ok("report_outcome", {**report, "outcome": "solved", "evidence": {"verify": "python -c 1", "exit_code": 0},
                                               "agent": {"id": "agent-c"}})
        assert disputed["failure_state"] == "disputed" and disputed["next"]["reason"] == "disputed_answer"
        anonymous = await ok("report_outcome", {**report, "solution": "venv-macos", "outcome": "env_mismatch",
                                                "env": {"os": "ubuntu-24.04"}, "note": "this one is for macOS"})
        assert anonymous["anonymous"] is True

        revision = (await ok("read_article", {"id": node}))["revision"]
        patched = await ok("patch_article", {"id": node, "base_revision": revision, "summary": "clear the venv",
                                             "agent": {"id": "agent-a"},
                                             "ops": [{"op": "set", "path": "/content/solutions/venv-linux/fix/0",
                                                      "value": "python3 -m venv --clear .venv"}]})
        article = (await ok("read_article", {"id": node, "fields": "article", "max_bytes": 100_000}))["article"]
        article["title"] = "ModuleNotFoundError although pip installed the package"
        await ok("revise_article", {"id": node, "base_revision": patched["revision"], "article": article,
                                    "summary": "sharper title", "agent": {"id": "agent-b"}})
        undone = await ok("undo_edit", {"revision_id": patched["revision_id"], "undo_token": patched["undo_token"],
                                        "summary": "undo my edit", "agent": {"id": "agent-a"}})
        assert undone["kind"] == "undo"

        history = await ok("article_history", {"id": node})
        assert [r["kind"] for r in history["revisions"]] == ["create", "edit", "edit", "undo"]
        assert (await ok("article_history", {"id": node, "from_revision": 1, "to_revision": 3}))["changes"]
        await ok("article_history", {"id": unanswered["id"], "from_revision": 1})
        queue = await ok("review_queue", {})
        assert {"unsolved", "disputed"} <= {item["reason"] for item in queue["items"]}

    assert set(checked.checked) == set(RESULT_MODELS), "every tool was validated"


async def test_starter_corpus_results_match_their_schemas(tmp_path):
    """Real articles (the starter corpus): reads in several environments and budgets, searches by
    title and by error, and each node's history, all within the declared schemas."""
    corpus = await Mesh.open(tmp_path / "starter.db")
    try:
        async with Client(build_mcp_server(lambda: corpus)) as raw:
            checked = Checked(raw, await tools_of(raw))
            async for document in corpus.documents.export_documents():
                node = document["id"]
                for arguments in ({}, {"env": "macos-15,python-3.12,pip"}, {"env": "ubuntu-24.04,node-20,npm,arm64"},
                                  {"max_bytes": MIN_BUDGET}, {"include": "alternatives", "max_bytes": 3000}):
                    await checked.ok("read_article", {"id": node, **arguments})
                await checked.ok("article_history", {"id": node})
                await checked.ok("search", {"q": document["signature"]["error"], "env": "linux", "limit": 3})
                await checked.ok("search", {"q": document["title"], "max_bytes": MIN_BUDGET})
            await checked.ok("review_queue", {"limit": 200})
    finally:
        await corpus.close()
    assert checked.checked["read_article"] >= 5 * 60


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


ARGUMENT_ERRORS = [
    ("search", {"query": "ModuleNotFoundError"}, "query", "unknown argument 'query'; did you mean 'q'?"),
    ("search", {"q": "x", "enviroment": "linux"}, "enviroment", "unknown argument 'enviroment'; did you mean 'env'?"),
    ("search", {"q": "x", "zzz": 1}, "zzz", "unknown argument 'zzz'; search takes q, env, ecosystem, limit, max_bytes"),
    ("search", {"q": "x", "limit": 1000}, "limit", "limit must be an integer between 1 and 20"),
    ("search", {"q": "x", "limit": 21}, "limit", "limit must be an integer between 1 and 20"),
    ("search", {"q": "x", "limit": 0}, "limit", "limit must be an integer between 1 and 20"),
    ("search", {"q": "x", "limit": "many"}, "limit", "limit must be an integer between 1 and 20, not a string"),
    ("search", {}, "q", "q is required: the raw error (a traceback is fine) or a description"),
    ("search", {"q": ["ModuleNotFoundError"]}, "q", "q must be a string, not an array"),
    ("search", {"q": "x", "env": 3}, "env", "env must be a string or an object, not an integer"),
    ("search", {"q": "\ud800"}, "q", ("q: ", "surrogate")),  # the wording of the bounds is `limits`'
    ("search", {"q": "x", "env": nested(40)}, "env", ("env/0/0/0/0/…: ", "nested deeper than 32 levels")),
    ("create_node", {"id": "python/x", "ecosystem": "python", "title": "t", "signature": {"error": "e"},
                     "content": {"solutions": [{"title": "\udfff"}]}}, "content", ("content/solutions/0/title: ", "surrogate")),
    ("read_article", {"node": "python/x"}, "node", "unknown argument 'node'; did you mean 'id'?"),
    ("read_article", {"id": "python/x", "max_bytes": 10}, "max_bytes", "max_bytes must be an integer between 1024 and 1000000"),
    ("article_history", {"id": "python/x", "from_revision": 0}, "from_revision", "from_revision must be an integer of at least 1"),
    ("article_history", {"id": "python/x", "to_revision": 2**70}, "to_revision", ("to_revision: ", "64 bits")),
    ("review_queue", {"limit": 201}, "limit", "limit must be an integer between 1 and 200"),
    ("review_queue", {"reason": "bogus"}, "reason", ("reason ", "failed_answer")),
    ("review_queue", {"max_bytes": 100}, "max_bytes", "max_bytes must be an integer between 1024 and 1000000"),
    ("report_failed_attempt", {"id": "python/x", "enviroment": {"os": "linux"}, "summary": "s", "steps": ["a"], "reason": "r"},
     "enviroment", "unknown argument 'enviroment'; did you mean 'env'?"),
    ("report_failed_attempt", {"id": "python/x", "env": {"os": "linux"}, "summary": "s", "steps": "pip install x",
                               "reason": "r"}, "steps", "steps must be an array of strings, not a string"),
    ("report_outcome", {"node_id": "python/x", "solution": "s", "outcome": "solved", "env": {}}, "node_id",
     "unknown argument 'node_id'; did you mean 'id'?"),
    ("report_outcome", {"id": "python/x", "solution": "s", "outcome": "solved", "env": {}, "note": "n" * 4001}, "note",
     "note must be at most 4,000 characters"),
    ("patch_article", {"id": "python/x", "base_revision": 0, "ops": [], "summary": "s"}, "base_revision",
     "base_revision must be an integer of at least 1"),
    ("patch_article", {"id": "python/x", "base_revision": 1, "ops": ["set /title"], "summary": "s"}, "ops",
     "ops/0 must be an object, not a string"),
    ("undo_edit", {"revision_id": "rev_1", "token": "t", "summary": "s"}, "token", "unknown argument 'token'; did you mean 'undo_token'?"),
    ("create_node", {"id": "python/x", "ecosystem": "python", "title": "t", "signature": "ModuleNotFoundError", "content": {}},
     "signature", "signature must be an object, not a string"),
]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_argument_errors_name_the_argument_in_plain_words(service, mode):
    async with Client(build_mcp_server(lambda: service), mode=mode) as client:
        for tool, arguments, field, message in ARGUMENT_ERRORS:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            error = result.structured_content["error"]
            assert result.structured_content == {"error": {"code": "invalid_argument", "message": error["message"], "field": field}}
            if isinstance(message, tuple):  # (how it starts, what it says)
                assert error["message"].startswith(message[0]) and message[1] in error["message"], error
            else:
                assert error["message"] == message, (tool, arguments)
            text = result.content[0].text
            assert text == compact(result.structured_content)
            assert "pydantic" not in text and "validation error" not in text.lower()
        assert await service.store.count_nodes() == 0, "no refused call reached the service"
        assert not (await client.call_tool("search", {"q": "ModuleNotFoundError", "limit": "3"})).is_error, \
            "what the parameter type accepts (a numeric string) still passes"
