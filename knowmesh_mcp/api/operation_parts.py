"""What the OpenAPI table (`api.operations`) is written in: an `Operation` (one method on one path,
what it takes and every status it answers with), a `Param`, the media types, and the parameter and
status sets many operations share. A query's parameters come from the `wire` model the route
parses them with (`model_params`), so their bounds are the ones the route enforces."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from knowmesh_mcp.core.limits import MAX_INT
from knowmesh_mcp.core.model import SEGMENT
from knowmesh_mcp.services.reading import FIELD_SECTIONS
from knowmesh_mcp.wire import requests as wire

JSON = "application/json"
MARKDOWN = "text/markdown"
HTML = "text/html"
NDJSON = "application/x-ndjson"

EXAMPLE_ECOSYSTEM, EXAMPLE_SLUG = "python", "module-not-found-venv"  # a starter node


@dataclass(frozen=True)
class Param:
    name: str
    description: str
    where: str = "query"
    integer: bool = False
    pattern: str | None = None
    example: Any = None
    schema: tuple[tuple[str, Any], ...] = ()  # a `wire` model's schema of the parameter (`model_params`)

    def to_openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = (
            {"type": "integer", "minimum": -MAX_INT - 1, "maximum": MAX_INT} if self.integer else {"type": "string"}
        )
        if self.schema:
            schema = dict(self.schema)
        if self.pattern:
            schema["pattern"] = self.pattern
        param = {
            "name": self.name,
            "in": self.where,
            "required": self.where == "path",
            "description": self.description,
            "schema": schema,
        }
        if self.example is not None:
            param["example"] = self.example
        return param


@dataclass(frozen=True)
class Link:
    """An OpenAPI link from a success response: another operation and its parameters, each as a
    runtime expression (`$request.path.slug`, `$response.body#/version`). Schemathesis follows
    them in its stateful phase."""

    name: str
    operation_id: str  # the target's `Operation.operation_id()`
    parameters: tuple[tuple[str, str], ...]  # (parameter name, runtime expression)

    def to_openapi(self) -> dict[str, Any]:
        return {"operationId": self.operation_id, "parameters": dict(self.parameters)}


@dataclass(frozen=True)
class Operation:
    """One method on one path: what it takes and every status it answers with."""

    method: str
    path: str
    summary: str
    result: type[BaseModel] | None = None  # the JSON success body; None for text or HTML
    status: int = 200
    media: str = JSON
    body: type[BaseModel] | None = None
    params: tuple[Param, ...] = ()
    errors: tuple[int, ...] = (400,)
    tool: str | None = None  # the MCP tool that does the same
    headers: tuple[str, ...] = ()
    links: tuple[Link, ...] = ()  # OpenAPI links from the success response

    def operation_id(self) -> str:
        words = [part.strip("{}").replace(".", "_").replace("-", "_") for part in self.path.split("/") if part]
        return "_".join([self.method.lower(), *words])


def query_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema from its field's in a `wire` model: what a URL can carry (an
    optional field's null branch and an object form left out)."""
    branches = [
        branch
        for branch in schema.get("anyOf", [schema])
        if branch.get("type") not in ("null", "object") and "$ref" not in branch
    ]
    inner = branches[0] if len(branches) == 1 else {"type": "string"}
    if "anyOf" in inner:
        return query_schema(inner)
    return {key: value for key, value in inner.items() if key not in ("title", "description", "default")}


def model_params(model: type[BaseModel], descriptions: dict[str, str]) -> tuple[Param, ...]:
    """The query parameters a route parses with `model` (`wire.query`), each with its bounds."""
    properties = model.model_json_schema()["properties"]
    return tuple(
        Param(
            name,
            descriptions.get(name) or properties[name].get("description", name),
            schema=tuple(query_schema(properties[name]).items()),
        )
        for name in model.model_fields
    )


ECOSYSTEM = Param(
    "ecosystem", "The node's ecosystem, e.g. python", "path", pattern=f"^{SEGMENT}$", example=EXAMPLE_ECOSYSTEM
)
SLUG = Param("slug", "The node's slug inside its ecosystem", "path", pattern=f"^{SEGMENT}$", example=EXAMPLE_SLUG)
NODE = (ECOSYSTEM, SLUG)
SAME_NODE = (("ecosystem", "$request.path.ecosystem"), ("slug", "$request.path.slug"))
LIMIT = Param("limit", "How many to return", integer=True)
READ = (
    Param("env", "Your environment, e.g. macos-15,python-3.12,pip,arm64: serves the one answer for it"),
    Param("solution", "Serve this answer id only"),
    Param(
        "fields",
        "Comma-separated sections to keep, of " + ", ".join(FIELD_SECTIONS) + " (article: the document to edit)",
    ),
    Param("include", "alternatives, archived_failures (comma-separated)"),
)
SEARCH = model_params(
    wire.SearchQuery,
    {
        "q": "The raw error line or pasted tool output, or a description in words",
        "env": "Your environment string, e.g. macos-15,python-3.12,pip",
        "ecosystem": "Rank this ecosystem first (never filters)",
        "limit": f"How many results (default {wire.DEFAULT_RESULTS}, at most {wire.MAX_RESULTS})",
    },
)
REVIEW = model_params(wire.ReviewQuery, {})
READ_HEADERS = (
    "ETag",
    "Cache-Control",
    "X-Knowmesh-Article-Revision",
    "X-Knowmesh-Node-Version",
    "X-Knowmesh-Has-Answer",
)
# A write is refused on a read-only server or cross-site (403), for its size (413), its media
# type (415) or the write limit (429); every write can also meet a malformed body (400), another
# process or server holding the mesh's write lock too long (503), and a full disk (507).
WRITE = (400, 401, 403, 413, 415, 429, 503, 507)
MAINTAIN = (*WRITE, 404, 409)
NODE_WRITE = (*WRITE, 404, 409)
