"""Schema, OpenAPI and behaviour agree on every bound (issue 49, point 1).

Walks every `/v1` operation of `/v1/openapi.json` (its JSON body and query parameters) and every
MCP tool of `tools/list` (through the real in-process client). For each bound a schema declares
(`maxLength`, `minLength`, `maximum`, `minimum`, `maxItems`, `minItems`, `enum`) it sends a valid
request with that one value just past the bound, which must be refused (HTTP 400 / a tool error
naming the field), and the value at the bound, which must not be refused for that field. A
description that says "at most N" of a field must say the bound the schema declares. A field a
tool and its route both have must carry the same bounds in `inputSchema` and in OpenAPI, and a
search must return what it was asked for at its bound, not silently fewer.

On the code before `wire` this fails: MCP `search` allowed limit 100 while POST /v1/search said
"At most 50" (no bound declared) and the service cut at 20; OpenAPI gave the feedback note
4,000 characters while the route took 200,000.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client

from knowmesh_mcp.wire import results
from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.core.limits import MAX_INT
from knowmesh_mcp.mcp.server import build_mcp_server
from knowmesh_mcp.services.mesh import Mesh

pytestmark = pytest.mark.anyio

NODE = "python/module-not-found-venv"
OPEN_NODE = "python/open-problem"
BOUNDS = ("maxLength", "minLength", "maximum", "minimum", "maxItems", "minItems", "enum")
MAX_STRING = 300_000  # past this a body is refused for its size, not for one field's bound
ENV = {"os": "linux", "runtime": "python-3.12", "pkg_manager": "pip"}


def client_for(service: Mesh) -> httpx2.AsyncClient:
    app = build_app(service=service, with_mcp=False, write_limit=0)
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1")


# -- valid requests, one per route and tool: each probe changes one value of one of them ---------

def valid_bodies() -> dict[tuple[str, str], dict[str, Any]]:
    agent = {"id": "agent-probe", "model": "m"}
    return {
        ("POST", "/v1/search"): {"q": "ModuleNotFoundError: No module named 'requests'", "env": "linux,python-3.12",
                                 "ecosystem": "python", "limit": 3, "fields": "id"},
        # the specification's own forms (node, environment): taken before wire, and still taken
        ("POST", "/v1/feedback"): {"node": NODE, "solution": "venv-linux", "outcome": "env_mismatch", "env": ENV,
                                   "evidence": {"verify": "true", "exit_code": 1}, "agent": agent, "reason": "r", "note": "n"},
        ("POST", "/v1/nodes/{ecosystem}/{slug}/failures"): {"environment": ENV, "summary": "tried", "steps": ["pip install x"],
                                                            "reason": "it failed", "agent": agent},
        ("PATCH", "/v1/nodes/{ecosystem}/{slug}/article"): {"base_revision": 1, "summary": "edit", "agent": agent,
                                                           "ops": [{"op": "set", "path": "/content/context", "value": "c"}]},
        ("POST", "/v1/issues"): {"title": "t", "body": "b", "endpoint": "e", "request": "r", "expected": "x", "actual": "a",
                                 "environment": "linux", "labels": ["bug"], "agent": agent},
        ("POST", "/v1/dedupe/tasks"): {"node": NODE, "candidate": OPEN_NODE, "reason": "same?", "agent": agent},
        ("POST", "/v1/dedupe/tasks/{task_id}/votes"): {"vote": "different", "agent": agent},
        ("POST", "/v1/nodes/{ecosystem}/{slug}/status"): {"status": "verified", "note": "n"},
        ("POST", "/v1/dedupe/tasks/{task_id}/merge"): {"note": "n"},
        ("POST", "/v1/issues/{number}/status"): {"status": "closed", "note": "n"},
        ("POST", "/v1/article-revisions/{revision_id}/undo"): {"summary": "undo", "agent": agent, "undo_token": "t"},
    }


def valid_arguments() -> dict[str, dict[str, Any]]:
    return {
        "search": {"q": "ModuleNotFoundError: No module named 'requests'", "env": "linux", "limit": 3},
        "read_article": {"id": NODE, "env": "linux"},
        "article_history": {"id": NODE},
        "review_queue": {"limit": 2},
        "report_outcome": {"id": NODE, "solution": "venv-linux", "outcome": "env_mismatch", "env": ENV,
                           "evidence": {"verify": "true", "exit_code": 1}, "reason": "r", "note": "n",
                           "agent": {"id": "agent-probe"}},
        "report_failed_attempt": {"id": OPEN_NODE, "env": ENV, "summary": "tried", "steps": ["pip install x"],
                                  "reason": "it failed", "agent": {"id": "agent-probe"}},
        "patch_article": {"id": NODE, "base_revision": 1, "summary": "edit", "agent": {"id": "agent-probe"},
                          "ops": [{"op": "set", "path": "/content/context", "value": "c"}]},
        "revise_article": {"id": NODE, "base_revision": 1, "summary": "edit", "article": {}},
        "undo_edit": {"revision_id": "rev_1", "undo_token": "t", "summary": "undo"},
        "create_node": {"id": "python/x", "ecosystem": "python", "title": "t", "signature": {}, "content": {}},
    }


# -- walking a schema ----------------------------------------------------------------------------

def resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return resolve({**components[ref.rsplit("/", 1)[-1]], **{k: v for k, v in schema.items() if k != "$ref"}}, components)
    return schema


def branches(schema: dict[str, Any], components: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null forms a value may take (an optional field's anyOf without null)."""
    schema = resolve(schema, components)
    if "anyOf" in schema:
        found = []
        for branch in schema["anyOf"]:
            found += branches({**branch, **({"description": schema["description"]} if "description" in schema else {})},
                              components)
        return [b for b in found if b.get("type") != "null"]
    return [schema]


def bounded(schema: dict[str, Any], components: dict[str, Any], path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """(path of a value, its schema) for every value under `schema` that declares a bound."""
    for form in branches(schema, components):
        if path and any(key in form for key in BOUNDS):
            yield path, form
        if form.get("type") == "object" or "properties" in form:
            for name, child in form.get("properties", {}).items():
                yield from bounded(child, components, (*path, name))
        if form.get("type") == "array" and isinstance(form.get("items"), dict):
            yield from bounded(form["items"], components, (*path, 0))


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and isinstance(step, int) and step < len(value):
            value = value[step]
        else:
            return None
    return value


def with_value(base: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(base)
    target: Any = body
    for step, following in zip(path[:-1], path[1:], strict=False):
        if isinstance(target, dict):
            target = target.setdefault(step, [] if isinstance(following, int) else {})
        else:
            while len(target) <= step:
                target.append({} if not isinstance(following, int) else [])
            target = target[step]
    if isinstance(target, list):
        while len(target) <= path[-1]:
            target.append(None)
    target[path[-1]] = value
    return body


def probes(schema: dict[str, Any], current: Any) -> Iterator[tuple[str, Any, Any]]:
    """(bound, a value just past it, the value at it) for each bound `schema` declares."""
    if "maxLength" in schema and schema["maxLength"] < MAX_STRING:
        n = schema["maxLength"]
        start = "/" if schema.get("pattern") == "^/" else ""
        yield "maxLength", start + "x" * (n + 1 - len(start)), start + "x" * (n - len(start))
    if schema.get("minLength", 0) > 0:
        n = schema["minLength"]
        yield "minLength", "", "x" * n
    if "maximum" in schema:
        yield "maximum", schema["maximum"] + 1, schema["maximum"]
    if "minimum" in schema:
        yield "minimum", schema["minimum"] - 1, schema["minimum"]
    item = current[0] if isinstance(current, list) and current else "x"
    if "maxItems" in schema:
        yield "maxItems", [item] * (schema["maxItems"] + 1), [item] * schema["maxItems"]
    if schema.get("minItems", 0) > 0:
        yield "minItems", [], [item] * schema["minItems"]
    if "enum" in schema:
        yield "enum", "not-one-of-them", schema["enum"][0]


def said_bounds(description: str) -> list[int]:
    """The numbers a description gives as a bound: "at most 20", "At most 50 results", "1-200"."""
    return [int(n.replace(",", "")) for n in re.findall(r"[Aa]t most ([\d,]+)", description)]


def declared_max(schema: dict[str, Any]) -> int | None:
    for key in ("maximum", "maxLength", "maxItems"):
        if key in schema:
            return schema[key]
    return None


def same_bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """The bounds to compare across interfaces (the 64-bit range every integer has left out)."""
    found = {key: schema[key] for key in BOUNDS if key in schema}
    if found.get("maximum") == MAX_INT:
        del found["maximum"]
    if found.get("minimum") == -MAX_INT - 1:
        del found["minimum"]
    if found.get("minLength") == 1:  # "not empty": the service's words on either interface
        del found["minLength"]
    return found


# -- the mesh the probes run against -------------------------------------------------------------

async def mesh(service: Mesh, make_doc) -> Mesh:
    await service.creation.create_node(make_doc())
    open_problem = make_doc(id=OPEN_NODE, error="ImportError: cannot import name 'zq' from 'zq_pkg'")
    open_problem["content"] = {**open_problem["content"], "solutions": []}
    await service.creation.create_node(open_problem)
    return service


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in document["paths"].items():
        if path.startswith("/v1/"):
            for method, spec in methods.items():
                yield method.upper(), path, spec


def concrete(path: str) -> str:
    return (path.replace("{ecosystem}", "python").replace("{slug}", "module-not-found-venv")
            .replace("{task_id}", "1").replace("{number}", "1").replace("{revision_id}", "rev_1")
            .replace("{version}", "sha256:0").replace("{name}", "protocol.md"))


def refused_for(response: httpx2.Response, name: str) -> bool:
    """Was the request refused because of this field (400 naming it, or a body too large)?"""
    if response.status_code == 413:
        return True
    if response.status_code != 400:
        return False
    error = response.json().get("error", {})
    field = ".".join(step for step in re.split(r"[./]", str(error.get("field", ""))) if step and not step.isdigit())
    return field == name or field.startswith(name + ".") or error.get("code") == "invalid_json"


MAINTAINER_ROUTES = {"/v1/nodes/{ecosystem}/{slug}/status", "/v1/dedupe/tasks/{task_id}/merge", "/v1/issues/{number}/status"}


async def test_every_v1_bound_is_what_the_route_does(service: Mesh, make_doc):
    await mesh(service, make_doc)
    maintainer = {"Authorization": f"Bearer {(await service.tokens.add_token('maintainer-probe', role='maintainer'))['token']}"}
    findings: list[str] = []
    bodies = valid_bodies()
    async with client_for(service) as client:
        document = (await client.get("/v1/openapi.json")).json()
        components = document["components"]["schemas"]
        for method, path, spec in operations(document):
            target = concrete(path).replace("module-not-found-venv", "open-problem") if path.endswith("/failures") \
                else concrete(path)
            # query parameters
            for param in spec.get("parameters", []):
                if param["in"] != "query":
                    continue
                schema = param["schema"]
                said = said_bounds(param.get("description", ""))
                if said and said != [declared_max(schema)]:
                    findings.append(f"{method} {path} ?{param['name']}: described as at most {said}, declared {declared_max(schema)}")
                for bound, past, bounded_value in probes(schema, None):
                    url = f"{target}?q=ModuleNotFoundError&{param['name']}={past}" if path == "/v1/search" \
                        else f"{target}?{param['name']}={past}"
                    response = await client.request(method, url)
                    if not (refused_for(response, param["name"]) or response.status_code == 404):
                        findings.append(f"{method} {path} ?{param['name']}={str(past)[:20]} past {bound}: "
                                        f"{response.status_code} {response.text[:100]}")
                    if schema.get(bound) in (MAX_INT, -MAX_INT - 1):
                        continue  # the 64-bit range: a value at it is refused by what it names (no such revision)
                    url = url.replace(f"{param['name']}={past}", f"{param['name']}={bounded_value}")
                    response = await client.request(method, url)
                    if refused_for(response, param["name"]):
                        findings.append(f"{method} {path} ?{param['name']}={bounded_value} at {bound} refused: {response.text[:120]}")
                    elif path == "/v1/search" and param["name"] == "limit" and response.status_code == 200 \
                            and response.json()["limit"] != bounded_value:
                        findings.append(f"GET /v1/search limit={bounded_value}: answered limit {response.json()['limit']}")
            # the JSON body
            body_schema = spec.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body_schema is None or (method, path) not in bodies:
                continue
            base = bodies[(method, path)]
            headers = maintainer if path in MAINTAINER_ROUTES else {}  # else refused as not a maintainer's, first
            for where, schema in bounded(body_schema, components):
                name = ".".join(str(step) for step in where)
                said = said_bounds(schema.get("description", ""))
                if said and said != [declared_max(schema)]:
                    findings.append(f"{method} {path} {name}: described as at most {said}, declared {declared_max(schema)}")
                for bound, past, bounded_value in probes(schema, at(base, where)):
                    field = ".".join(str(step) for step in where if not isinstance(step, int))
                    response = await client.request(method, target, json=with_value(base, where, past), headers=headers)
                    if not refused_for(response, field):
                        findings.append(f"{method} {path} {name} past {bound} ({str(past)[:20]}...): "
                                        f"{response.status_code} {response.text[:100]}")
                    response = await client.request(method, target, json=with_value(base, where, bounded_value),
                                                    headers=headers)
                    if refused_for(response, field):
                        findings.append(f"{method} {path} {name} at {bound} refused: {response.text[:160]}")
                    if path == "/v1/search" and where == ("limit",) and response.status_code == 200 \
                            and response.json()["limit"] != bounded_value:
                        findings.append(f"POST /v1/search limit={bounded_value}: answered limit {response.json()['limit']}")
    assert not findings, "\n".join(findings)


async def test_every_tool_bound_is_what_the_tool_does(service: Mesh, make_doc):
    await mesh(service, make_doc)
    findings: list[str] = []
    arguments = valid_arguments()
    async with Client(build_mcp_server(lambda: service), mode="auto") as client:
        tools = (await client.list_tools()).tools
        assert {tool.name for tool in tools} == set(arguments)
        for tool in tools:
            schema = tool.input_schema
            for name, field in schema["properties"].items():
                said = said_bounds(field.get("description", ""))
                if said and said != [declared_max(field)]:
                    findings.append(f"{tool.name} {name}: described as at most {said}, declared {declared_max(field)}")
            for where, field in bounded(schema, {}):
                base = arguments[tool.name]
                for bound, past, bounded_value in probes(field, at(base, where)):
                    result = await client.call_tool(tool.name, with_value(base, where, past))
                    error = (result.structured_content or {}).get("error", {}) if result.is_error else {}
                    if error.get("code") != "invalid_argument" or error.get("field") != where[0]:
                        findings.append(f"{tool.name} {where} past {bound}: {'accepted' if not result.is_error else error}")
                    result = await client.call_tool(tool.name, with_value(base, where, bounded_value))
                    error = (result.structured_content or {}).get("error", {}) if result.is_error else {}
                    if error.get("code") == "invalid_argument" and error.get("field") == where[0]:
                        findings.append(f"{tool.name} {where} at {bound} refused: {error.get('message')}")
                    if tool.name == "search" and where == ("limit",) and not result.is_error \
                            and result.structured_content["limit"] != bounded_value:
                        findings.append(f"search limit={bounded_value}: answered limit {result.structured_content['limit']}")
    assert not findings, "\n".join(findings)


async def test_a_tool_and_its_route_state_the_same_bounds(service: Mesh):
    """Fields a tool shares with its route (body, or query of a GET) carry the same bounds, and a result's
    description of a bound ("at most 20") says the bound the request declares."""
    findings: list[str] = []
    async with client_for(service) as http:
        document = (await http.get("/v1/openapi.json")).json()
    components = document["components"]["schemas"]
    async with Client(build_mcp_server(lambda: service), mode="auto") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for method, path, spec in operations(document):
        found = re.search(r"MCP tool `(\w+)`", spec.get("description", ""))
        if not found or found.group(1) not in tools:
            continue
        properties = tools[found.group(1)].input_schema["properties"]
        route: dict[str, dict[str, Any]] = {param["name"]: param["schema"] for param in spec.get("parameters", [])
                                            if param["in"] == "query"}
        body = spec.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body is not None:
            for form in branches(body, components):
                for name, child in form.get("properties", {}).items():
                    forms = [f for f in branches(child, components) if f.get("type") != "object"]
                    route[name] = forms[0] if forms else {}
        for name, schema in properties.items():
            if name not in route:
                continue
            mcp_bounds = same_bounds(schema)
            http_bounds = same_bounds(route[name])
            if mcp_bounds != http_bounds:
                findings.append(f"{found.group(1)}.{name} {mcp_bounds} but {method} {path} {name} {http_bounds}")
    # A result that describes a request's bound must say the same number.
    limit = tools["search"].input_schema["properties"]["limit"]
    said = said_bounds(results.SearchEnvelope.model_fields["limit"].description or "")
    if said and said != [limit.get("maximum")]:
        findings.append(f"search envelope says limit at most {said}; the search tool declares {limit.get('maximum')}")
    assert not findings, "\n".join(findings)


async def test_the_feedback_note_of_the_issue_is_refused(service: Mesh, make_doc):
    """Issue 49 measured OpenAPI's 4,000-character note against a 202 for 200,000 characters."""
    await mesh(service, make_doc)
    body = {**valid_bodies()[("POST", "/v1/feedback")], "note": "x" * 200_000}
    async with client_for(service) as client:
        response = await client.post("/v1/feedback", json=body)
        declared = (await client.get("/v1/openapi.json")).json()["components"]["schemas"]["Feedback"]["properties"]["note"]
    assert response.status_code == 400 and response.json()["error"]["field"] == "note", response.text[:200]
    assert str(4000) in json.dumps(declared)


# -- one name for one thing (issue 49, point 2) ------------------------------------------------


def receipt(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def test_old_names_still_work_with_a_deprecation_note(service: Mesh, make_doc):
    await mesh(service, make_doc)
    report = {"solution": "venv-linux", "outcome": "env_mismatch", "agent": {"id": "old-client"}}
    async with Client(build_mcp_server(lambda: service)) as client:
        old = receipt(await client.call_tool("report_outcome", {**report, "node": NODE, "env": ENV}))
        new = receipt(await client.call_tool("report_outcome", {**report, "id": NODE, "env": "macos-15,python-3.12,pip",
                                                                "agent": {"id": "new-client"}}))
        attempt = {"summary": "tried", "steps": ["pip install zq"], "reason": "no such version"}
        old_attempt = receipt(await client.call_tool("report_failed_attempt", {
            **attempt, "id": OPEN_NODE, "environment": ENV, "agent": {"id": "old-client"}}))
        new_attempt = receipt(await client.call_tool("report_failed_attempt", {
            **attempt, "id": OPEN_NODE, "env": "windows-11,python-3.11,pip", "agent": {"id": "new-client"}}))
        both = await client.call_tool("report_outcome", {**report, "node": NODE, "id": OPEN_NODE, "env": ENV})
    assert old["deprecated"] == ["node -> id"] and old["node"] == NODE and old["accepted"]
    assert "deprecated" not in new and new["accepted"] and new["cluster"].startswith("macos")
    assert old_attempt["deprecated"] == ["environment -> env"]
    assert "deprecated" not in new_attempt
    assert both.is_error and both.structured_content["error"]["field"] == "node"
    async with client_for(service) as http:
        spec_form = await http.post("/v1/feedback", json={**report, "node": NODE, "env": ENV, "agent": {"id": "http-a"}})
        new_form = await http.post("/v1/feedback", json={**report, "id": NODE, "env": "linux,python-3.12",
                                                         "agent": {"id": "http-b"}})
        failures = await http.post(f"/v1/nodes/{OPEN_NODE}/failures", json={**attempt, "env": "linux,python-3.10,pip",
                                                                            "agent": {"id": "http-c"}})
        spec_failures = await http.post(f"/v1/nodes/{OPEN_NODE}/failures", json={
            **attempt, "environment": {"os": "freebsd-14"}, "agent": {"id": "http-d"}})
    assert spec_form.status_code == 202 and spec_form.json()["deprecated"] == ["node -> id"]
    assert new_form.status_code == 202 and "deprecated" not in new_form.json()
    assert failures.status_code == 202 and "deprecated" not in failures.json(), failures.text
    assert spec_failures.status_code == 202 and spec_failures.json()["deprecated"] == ["environment -> env"]


async def test_env_is_a_string_or_an_object_everywhere(service: Mesh, make_doc):
    await mesh(service, make_doc)
    async with Client(build_mcp_server(lambda: service)) as client:
        as_text = receipt(await client.call_tool("read_article", {"id": NODE, "env": "linux,python-3.12,pip"}))
        as_object = receipt(await client.call_tool("read_article", {"id": NODE, "env": ENV}))
        search_text = receipt(await client.call_tool("search", {"q": "No module named 'requests'", "env": "macos-15,python-3.12"}))
        search_object = receipt(await client.call_tool("search", {"q": "No module named 'requests'",
                                                                  "env": {"os": "macos-15", "runtime": "python-3.12"}}))
    answers = [[solution["id"] for solution in read["content"]["solutions"]] for read in (as_text, as_object)]
    assert answers[0] == answers[1] == ["venv-linux"] and as_text["env"] == as_object["env"]
    assert search_text["results"][0]["solution"]["id"] == search_object["results"][0]["solution"]["id"] == "venv-macos"


async def test_ready_calls_use_the_tools_names(service: Mesh, make_doc):
    """The `next` blocks an agent copies name the node `id` and the environment `env` in their MCP call."""
    await mesh(service, make_doc)
    async with Client(build_mcp_server(lambda: service)) as client:
        queue = receipt(await client.call_tool("review_queue", {"max_bytes": 1_000_000}))
    calls = [step for item in queue["items"] for step in item.get("next", {}).values()]
    assert calls, queue
    for call in calls:
        assert not set(call["arguments"]) & {"node", "environment"}, call["arguments"]


async def test_every_tool_names_a_node_id_and_an_environment_env():
    async with Client(build_mcp_server(lambda: None)) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        names = set(tool.input_schema["properties"])
        assert not names & {"node", "node_id", "environment"}, (tool.name, names)
        if "env" in names:
            kinds = tool.input_schema["properties"]["env"].get("type")
            assert isinstance(kinds, list) and set(kinds) == {"string", "object"}, (tool.name, kinds)


async def test_review_queue_is_bounded_and_takes_a_reason(service: Mesh, make_doc):
    for index in range(40):  # forty open problems: a default page of 20 is far past 8 KB with its ready calls
        document = make_doc(id=f"python/open-{index}", error=f"ImportError: cannot import name 'w{index}' from 'p{index}'")
        document["content"] = {**document["content"], "solutions": []}
        await service.creation.create_node(document)
    async with Client(build_mcp_server(lambda: service)) as client:
        default = receipt(await client.call_tool("review_queue", {}))
        whole = receipt(await client.call_tool("review_queue", {"max_bytes": 1_000_000}))
        unsolved = receipt(await client.call_tool("review_queue", {"reason": "unsolved", "max_bytes": 1_000_000}))
        stale = receipt(await client.call_tool("review_queue", {"reason": "stale"}))
        following = receipt(await client.call_tool("review_queue", {"offset": default["next_offset"]}))
    size = len(json.dumps(default, ensure_ascii=False, separators=(",", ":")).encode())
    assert size <= 8192, size
    assert default["truncated"] and "items after" in default["truncated"][0]
    assert len(whole["items"]) == 20 and len(whole.get("truncated", [])) == 0
    assert len(default["items"]) < 20 and default["next_offset"] == len(default["items"])
    assert following["items"][0]["id"] == whole["items"][len(default["items"])]["id"]
    assert unsolved["reason"] == "unsolved" and {item["reason"] for item in unsolved["items"]} == {"unsolved"}
    assert stale["items"] == [] or {item["reason"] for item in stale["items"]} == {"stale"}
    async with client_for(service) as http:
        page = (await http.get("/v1/review?reason=unsolved&limit=5")).json()
        bogus = await http.get("/v1/review?reason=bogus")
    assert [item["id"] for item in page["items"]] == [item["id"] for item in unsolved["items"][:5]]
    assert bogus.status_code == 400 and bogus.json()["error"]["field"] == "reason"
