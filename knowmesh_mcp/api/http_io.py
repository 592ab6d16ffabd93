"""What the `/v1` handlers share to read a request and to answer: the body limits, a JSON body
parsed and checked with its `wire` model, path and query parameters, and answers marked as
untrusted data."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from knowmesh_mcp.api.state import api
from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter
from knowmesh_mcp.core.limits import MAX_DEPTH, MAX_INT, check_json, to_int
from knowmesh_mcp.services.publishing import require_node_id
from knowmesh_mcp.services.reading import ReadResult
from knowmesh_mcp.wire import requests as wire

MAX_BODY_BYTES = 1_048_576  # documented in README: larger bodies get 413 payload_too_large
# POST /v1/search carries up to 1 MiB of pasted output, which JSON escaping can grow.
SEARCH_BODY_BYTES = 4 * MAX_BODY_BYTES
TRUST_HEADER = {"X-Knowmesh-Content-Trust": "untrusted-data"}
MARKDOWN = "text/markdown; charset=utf-8"


class WireBody(NamedTuple):
    """A write's JSON body as `wire_body` reads it."""

    payload: Any  # the body, parsed and checked, its old field names renamed
    notes: list[str]  # a note on each old field name it used (`wire.deprecation`)


class EditBody(NamedTuple):
    """An edit as `edit_body` reads it: the node of the path and the body."""

    node_id: str
    payload: dict[str, Any]


async def read_json(request: Request, limit: int = MAX_BODY_BYTES) -> Any:
    """The request body as JSON, refusing oversized bodies (413) and malformed JSON (400)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise KnowmeshError(413, "payload_too_large", f"request bodies are limited to {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise KnowmeshError(413, "payload_too_large", f"request bodies are limited to {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise KnowmeshError(400, "invalid_json", "the request body is empty; send a JSON object")
    try:
        payload = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise KnowmeshError(400, "invalid_json", f"the request body is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, integers past 4,300 digits
        raise KnowmeshError(400, "invalid_json", f"the request body is not valid UTF-8 JSON: {error}") from None
    return check_json(payload)


def search_body(payload: Any) -> dict[str, Any]:
    """A POST /v1/search body: the GET's fields (`wire.SearchQuery`), parsed with its model."""
    if not isinstance(payload, dict):
        raise KnowmeshError(400, "invalid_json", 'the body must be a JSON object such as {"q": "<the error>"}')
    for name in payload:
        if name not in wire.SearchQuery.model_fields:
            raise bad_parameter(
                name, f"unknown field {name!r}; a search takes {', '.join(wire.SearchQuery.model_fields)}"
            )
    for name, value in payload.items():  # JSON types as they are: "5" is no integer in a body
        if isinstance(value, bool) or (name == "limit" and value is not None and not isinstance(value, int)):
            raise bad_parameter(name, f"{name} must be {'an integer' if name == 'limit' else 'a string'}")
    parsed = wire.parse(wire.SearchQuery, payload)
    return {name: getattr(parsed, name) for name in payload} if parsed is not None else payload


async def wire_body(
    request: Request, model: type[Any], *, code: str, codes: dict[str, str] | None = None, shape: str | None = None
) -> WireBody:
    """A write's JSON body parsed with its `wire` model (a value past a bound: 400 `code` naming the
    field), its old field names (`shape` of `wire.DEPRECATED_NAMES`) renamed; and the notes on them."""
    payload = await read_json(request)
    notes: list[str] = []
    if shape is not None and isinstance(payload, dict):
        payload, notes = wire.renamed(shape, payload)
    wire.parse(model, payload, code=code, codes=codes)
    return WireBody(payload, notes)


async def json_object(request: Request) -> dict[str, Any]:
    payload = await read_json(request)
    if not isinstance(payload, dict):
        raise KnowmeshError(400, "invalid_json", "the request body must be a JSON object")
    return payload


async def parsed_object(request: Request, model: type[Any], codes: dict[str, str] | None = None) -> dict[str, Any]:
    """A write's JSON object checked with its `wire` model, on a writable server."""
    api(request).writable()
    payload = await json_object(request)
    wire.parse(model, payload, codes=codes)
    return payload


async def edit_body(request: Request, model: type[Any], codes: dict[str, str] | None = None) -> EditBody:
    """The node id of the path, and the body of an edit to it."""
    node_id = require_node_id(node_of(request))
    return EditBody(node_id, await parsed_object(request, model, codes))


def node_of(request: Request) -> str:
    """The node id of a `/v1/nodes/{node:path}/...` path, as given (checked by `require_node_id`)."""
    node: str = request.path_params["node"]
    return node


def agent_field(payload: Any) -> Any:
    """The `agent` object a write body names (its shape is checked by `identity.claimed`)."""
    return payload.get("agent") if isinstance(payload, dict) else None


def int_param(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    return to_int(value, name, lowest=-MAX_INT - 1)


def answer(body: Any, status_code: int = 200) -> JSONResponse:
    """A JSON answer marked as untrusted data (node text is written by agents)."""
    return JSONResponse(body, status_code=status_code, headers=TRUST_HEADER)


def markdown_answer(text: str) -> PlainTextResponse:
    return PlainTextResponse(text, media_type=MARKDOWN, headers=TRUST_HEADER)


def read_response(request: Request, result: ReadResult, *, markdown: bool) -> Response:
    headers = result.headers()
    if request.headers.get("if-none-match") in {result.etag, f"W/{result.etag}"}:
        return Response(status_code=304, headers=headers)
    if markdown:
        return PlainTextResponse(result.markdown(), headers=headers, media_type=MARKDOWN)
    return JSONResponse(result.body, headers=headers)
