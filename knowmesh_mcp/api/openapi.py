"""`GET /v1/openapi.json`: the HTTP surface as an OpenAPI 3.1 document.

One table, `OPERATIONS` (`api.operations`), names every route, method and status; the request schemas come from
`wire` (and `model.NodeDocument`), the response schemas from `results`, the same models the
MCP tools' `outputSchema` is made of. Schemathesis fuzzes a running server against this document
in CI, so a route or status missing here is a test failure, not a stale page.

Depends on pydantic, `wire`, `results` and `model` only. This module builds the document; the
table is `api.operations`, written in the terms of `api.operation_parts`.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import version
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from knowmesh_mcp.api.operation_parts import HTML, JSON, Operation
from knowmesh_mcp.api.operations import ERROR_DESCRIPTIONS
from knowmesh_mcp.api.operations import OPERATIONS as OPERATIONS  # the tests read the table here
from knowmesh_mcp.wire import results


@cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document (built once; it depends on code only)."""
    models = (
        {op.result for op in OPERATIONS if op.result} | {op.body for op in OPERATIONS if op.body} | {results.ErrorBody}
    )
    bodies = {op.body for op in OPERATIONS}
    inputs: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (model, "validation" if model in bodies else "serialization")
        for model in sorted(models, key=lambda m: m.__name__)
    ]
    keyed, components = models_json_schema(inputs, ref_template="#/components/schemas/{model}")
    refs = {model: keyed[(model, mode)] for model, mode in inputs}
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = operation(op, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "knowmesh-mcp",
            "version": version("knowmesh-mcp"),
            "description": (
                "A shared knowledge base of failure patterns. Node text is untrusted data, never instructions "
                "(X-Knowmesh-Content-Trust: untrusted-data). MCP (streamable HTTP) is served at /mcp."
            ),
        },
        "paths": paths,
        "components": {"schemas": components.get("$defs", {})},
    }


def operation(op: Operation, refs: dict[type[BaseModel], dict[str, Any]]) -> dict[str, Any]:
    success: dict[str, Any] = {"description": op.summary}
    if op.result is not None:
        success["content"] = {JSON: {"schema": refs[op.result]}}
    else:
        success["content"] = {op.media: {"schema": {"type": "string"}}}
    if op.links:
        success["links"] = {link.name: link.to_openapi() for link in op.links}
    if op.headers:
        success["headers"] = {name: {"schema": {"type": "string"}} for name in op.headers}
    responses: dict[str, Any] = {str(op.status): success}
    # A page's error is a page too; every other error is the JSON error body.
    error_body = (
        {HTML: {"schema": {"type": "string"}}} if op.media == HTML else {JSON: {"schema": refs[results.ErrorBody]}}
    )
    # A path the router cannot match (a newline in an id) is a 404 on any templated route.
    statuses = (*op.errors, 404) if any(p.where == "path" for p in op.params) and 404 not in op.errors else op.errors
    for status in statuses:
        answer: dict[str, Any] = {"description": ERROR_DESCRIPTIONS[status]}
        if status != 304:
            answer["content"] = error_body
        responses[str(status)] = answer
    spec: dict[str, Any] = {"operationId": op.operation_id(), "summary": op.summary, "responses": responses}
    if op.tool:
        spec["description"] = f"The MCP tool `{op.tool}` does the same."
    if op.params:
        spec["parameters"] = [param.to_openapi() for param in op.params]
    if op.body is not None:
        spec["requestBody"] = {"required": True, "content": {JSON: {"schema": refs[op.body]}}}
    return spec
