"""Every wire shape, once: the MCP tools' arguments and the `/v1` request bodies and query parameters.

Each request is one pydantic model here, and its limits are the constants of `limits`: the MCP
tools' `inputSchema` is made from these models (`tool_parameters`), `/v1/openapi.json` publishes
them (`openapi`), and the HTTP edge parses bodies and query parameters with them (`parse`), so a
bound a schema states is the bound a call meets. A shape a tool and a route share is one model
(`SearchQuery`, `ReviewQuery`, `OutcomeReport`, `FailedAttempt`) or is made of the same field types.

Names: a node is `id` and an environment is `env` (a string or an object) everywhere. The older
names (`node` of an outcome report, `environment` of a failed attempt) are still taken, renamed
by `renamed` before parsing, and the result says so in `deprecated`.

Results are the models of `results`. Depends on pydantic, `limits`, `errors`, `identity`, `model` and `outcomes` (the review reasons).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from knowmesh_mcp.core.errors import KnowmeshError, plain_words
from knowmesh_mcp.core.evidence import ReviewReason
from knowmesh_mcp.core.identity import MAX_AGENT_ID
from knowmesh_mcp.core.limits import (
    DEFAULT_BUDGET,
    DEFAULT_RESULTS,
    MAX_BUDGET,
    MAX_INT,
    MAX_ISSUE_BODY,
    MAX_ISSUE_FIELD,
    MAX_ISSUE_TITLE,
    MAX_ITEMS,
    MAX_MAINTAINER_NOTE,
    MAX_NOTE,
    MAX_RESULTS,
    MAX_REVIEW_LIMIT,
    MAX_STEPS,
    MAX_TEXT,
    MIN_BUDGET,
)
from knowmesh_mcp.core.model import MAX_SHORT_TEXT, NodeDocument

DEFAULT_TOOL_REVIEW_LIMIT = 20  # review_queue's page: items, before max_bytes cuts
SHORT_TEXT = MAX_SHORT_TEXT  # a title's bound

# -- field types: one definition each, used by every model that has the field ------------------

Revision = Annotated[int, Field(ge=1, le=MAX_INT)]
Line = Annotated[str, StringConstraints(min_length=1, max_length=500)]
Note = Annotated[str, StringConstraints(max_length=MAX_NOTE)]
Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT)]
NodeId = str  # a node's id, e.g. python/module-not-found-venv
Results = Annotated[int, Field(ge=1, le=MAX_RESULTS)]
Budget = Annotated[
    int, Field(ge=MIN_BUDGET, le=MAX_BUDGET)
]  # the largest result in bytes: a bigger one is cut (`truncated`)
Query = Annotated[str, Field(description="The raw error (a traceback is fine) or a description")]
Ecosystem = Annotated[str, Field(description="python, node, go, ... (ranks, never filters)")]
ReviewLimit = Annotated[int, Field(ge=1, le=MAX_REVIEW_LIMIT)]
Offset = Annotated[int, Field(ge=0, le=MAX_INT)]  # items to skip: next_offset of the previous page


class Body(BaseModel):
    model_config = ConfigDict(extra="allow")


class Agent(Body):
    """Who acts: a stable id (required on edits and failed reports without a token) and the model, if any."""

    id: Annotated[str, StringConstraints(min_length=1, max_length=MAX_AGENT_ID)] | None = None
    model: str | None = None


class EnvObject(Body):
    os: str | None = Field(None, description="e.g. macos-15")
    runtime: str | None = Field(None, description="e.g. python-3.12")
    pkg_manager: str | None = Field(None, description="e.g. pip")


EnvText = Annotated[str, Field(description="e.g. macos-15,python-3.12,pip")]
Env = Annotated[str | EnvObject, Field(description="e.g. macos-15,python-3.12,pip")]  # or {os, runtime, pkg_manager}


class Evidence(Body):
    verify: str | None = Field(None, description="The verify command you ran")
    exit_code: int | None = Field(None, ge=-MAX_INT - 1, le=MAX_INT, description="0 for solved")


# -- searching, reading, the review queue -------------------------------------------------------


class SearchQuery(BaseModel):
    """GET /v1/search's query parameters; POST /v1/search takes them as a JSON body."""

    model_config = ConfigDict(extra="forbid")
    q: str | None = Field(None, description="The raw error or pasted tool output (up to 1 MiB is read)")
    env: Env | None = None
    ecosystem: Ecosystem | None = None
    limit: Results | None = None
    fields: str | None = Field(None, description="Comma-separated result keys to keep")


SearchBody = SearchQuery  # the POST's body: the same shape


class SearchArgs(BaseModel):
    """The `search` tool."""

    q: Query
    env: Env | None = None
    ecosystem: Ecosystem | None = None
    limit: Results = DEFAULT_RESULTS
    max_bytes: Budget = DEFAULT_BUDGET


class ReadArgs(BaseModel):
    """The `read_article` tool (GET /v1/nodes/{id}'s query parameters, and max_bytes)."""

    id: NodeId
    env: Env | None = None
    solution: str | None = Field(None, description="This solution id instead")
    fields: str | None = Field(
        None,
        description="Some of symptom, context, root_cause, solutions, fix, verify, "
        "outcomes, failed, boundaries, provenance, article",
    )
    include: str | None = Field(None, description="alternatives, archived_failures")
    max_bytes: Budget = DEFAULT_BUDGET


class HistoryQuery(BaseModel):
    """GET /v1/nodes/{id}/article/revisions' query parameters."""

    from_revision: Revision | None = Field(None, description="Diff from this revision")
    to_revision: Revision | None = Field(None, description="Diff to this revision (default: current)")
    after: Annotated[int, Field(ge=0, le=MAX_INT)] | None = Field(None, description="Only revisions after this number")
    include: str | None = Field(None, description="documents: each revision's whole document (what sync copies)")


class HistoryArgs(BaseModel):
    """The `article_history` tool."""

    id: NodeId
    from_revision: Revision | None = None
    to_revision: Revision | None = Field(None, description="Default: current")


class ReviewQuery(BaseModel):
    """GET /v1/review's query parameters."""

    limit: ReviewLimit | None = Field(None, description=f"Items per page, 1 to {MAX_REVIEW_LIMIT} (default 50)")
    offset: Offset | None = Field(None, description="Items to skip: next_offset of the previous page")
    reason: ReviewReason | None = Field(None, description="Only this reason's items, e.g. unsolved")


class ReviewArgs(BaseModel):
    """The `review_queue` tool: GET /v1/review's parameters, and max_bytes."""

    limit: ReviewLimit = DEFAULT_TOOL_REVIEW_LIMIT
    offset: Offset = 0
    reason: ReviewReason | None = None  # only this reason's items
    max_bytes: Budget = DEFAULT_BUDGET


# -- writes -----------------------------------------------------------------------------------


class PatchOp(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: Literal["set", "remove"]
    path: Annotated[str, StringConstraints(pattern=r"^/", max_length=500)] = Field(
        description="JSON Pointer; answers are addressed by id: /content/solutions/<id>/fix/0, /content/solutions/-"
    )
    value: Any = Field(None, description="The new value (set only)")


Ops = Annotated[
    list[PatchOp],
    Field(min_length=1, max_length=MAX_ITEMS, description="[{op: set or remove, path: JSON Pointer, value}]"),
]
Summary = Annotated[Line, Field(description="One line: what changes")]


class ArticlePatch(Body):
    """PATCH /v1/nodes/{ecosystem}/{slug}/article: focused edits against the revision you read."""

    base_revision: Revision
    ops: Ops
    agent: Agent | None = None  # with a bearer token the token's agent acts
    summary: Summary


class PatchArgs(BaseModel):
    """The `patch_article` tool: the PATCH's body and the node's id."""

    id: NodeId
    base_revision: Revision
    ops: Ops
    summary: Summary
    agent: Agent | None = None


class ArticleRevision(Body):
    """POST /v1/nodes/{ecosystem}/{slug}/article/revisions: the whole document, replaced."""

    base_revision: Revision
    article: NodeDocument
    agent: Agent | None = None
    summary: Summary


class ReviseArgs(BaseModel):
    """The `revise_article` tool."""

    id: NodeId
    base_revision: Revision
    article: dict[str, Any]  # read_article's `article` (fields=article), edited: the tool's description says so
    summary: Summary
    agent: Agent | None = None


class Undo(Body):
    """POST /v1/article-revisions/{revision_id}/undo, with `Authorization: Bearer <undo_token>`, or on a
    mesh with auth on the agent's token as the bearer and the undo token in the body."""

    agent: Agent | None = None
    summary: Line
    undo_token: str | None = Field(None, description="The edit's undo token, when the bearer is your agent token")


class UndoArgs(BaseModel):
    """The `undo_edit` tool."""

    revision_id: str
    undo_token: str
    summary: Annotated[Line, Field(description="One line: why")]
    agent: Agent | None = None


Outcome = Annotated[
    Literal["solved", "failed", "env_mismatch", "dangerous"],
    Field(description="solved needs evidence.exit_code 0; failed and dangerous need reason"),
]


class OutcomeReport(BaseModel):
    """What happened when you ran an answer's fix and its verify command: the `report_outcome`
    tool's arguments; POST /v1/feedback's body is `Feedback`, the same with `node` still named."""

    id: NodeId
    solution: Annotated[str, StringConstraints(min_length=1)]
    outcome: Outcome
    env: Env
    revision: Revision | None = Field(None, description="The one you ran (default: current)")
    node_version: str | None = Field(None, description="The `version` you read")
    evidence: Evidence | None = Field(None, description="{verify: command, exit_code: 0}")
    reason: Note | None = None
    note: Note | None = None
    agent: Agent | None = None


class Feedback(Body):
    """POST /v1/feedback: what happened when you ran an answer's fix and its verify command.

    `id` is the node's id (`node`, the specification's name, is taken too, with a deprecation note)."""

    id: NodeId | None = None
    node: str | None = Field(None, description="Old name of id (deprecated)", json_schema_extra={"deprecated": True})
    node_version: str | None = None
    solution: Annotated[str, StringConstraints(min_length=1)]
    revision: Revision | None = Field(None, description="The answer revision you ran (default: current)")
    outcome: Outcome
    env: Env | None = None
    evidence: Evidence | None = None
    agent: Agent | None = None
    reason: Note | None = Field(None, description="Required for failed and dangerous")
    note: Note | None = None


Steps = Annotated[list[Text], Field(min_length=1, max_length=MAX_STEPS, description="Commands you ran, in order")]


class FailedAttempt(Body):
    """POST /v1/nodes/{ecosystem}/{slug}/failures: an approach you tried that did not work.

    `env` is where (`environment`, the specification's name, is taken too, with a deprecation note)."""

    env: Env | None = None
    environment: EnvObject | None = Field(
        None, description="Old name of env (deprecated)", json_schema_extra={"deprecated": True}
    )
    summary: Text
    steps: Steps
    reason: Text
    agent: Agent | None = None


class FailedAttemptArgs(BaseModel):
    """The `report_failed_attempt` tool."""

    id: NodeId
    env: Env
    summary: Annotated[Text, Field(description="What you tried, one sentence")]
    steps: Steps
    reason: Text
    agent: Agent | None = None


class NewNode(NodeDocument):
    """POST /v1/nodes: a node document, with the author beside it."""

    agent: Agent | None = None


class CreateArgs(BaseModel):
    """The `create_node` tool: a node document's fields (checked in full by the service)."""

    id: Annotated[str, Field(description="{ecosystem}/{slug}, lowercase [a-z0-9._-]")]
    ecosystem: str
    title: Annotated[str, StringConstraints(max_length=SHORT_TEXT)]  # empty: the service's invalid_node, as over HTTP
    signature: dict[str, Any] = Field(description="{error, environment: [linux, python>=3.8], aliases}")
    content: dict[str, Any] = Field(
        description="{symptom, context, root_cause, solutions: [{id, title, env, fix, verify: {command, expected}}]}"
    )
    agent: Agent | None = None


class DedupeTask(Body):
    """POST /v1/dedupe/tasks: two nodes that may be the same problem."""

    node: str
    candidate: str
    reason: str | None = None
    agent: Agent | None = None


class DedupeVote(Body):
    """POST /v1/dedupe/tasks/{task_id}/votes."""

    vote: Literal["same", "different"]
    canonical_id: str | None = Field(None, description="With vote same: the node to keep")
    agent: Agent | None = None


MaintainerNote = Annotated[str, StringConstraints(min_length=1, max_length=MAX_MAINTAINER_NOTE)]


class StatusChange(Body):
    """POST /v1/nodes/{ecosystem}/{slug}/status (maintainers): promote, set back to draft, deprecate."""

    status: Literal["draft", "verified", "deprecated"]
    note: MaintainerNote | None = None


class MergeConfirmation(Body):
    """POST /v1/dedupe/tasks/{task_id}/merge (maintainers): a flagged pair becomes one node."""

    canonical_id: str | None = Field(None, description="The node to keep (default: the one the votes agreed on)")
    note: MaintainerNote | None = None


class IssueResolution(Body):
    """POST /v1/issues/{number}/status (maintainers)."""

    status: Literal["closed", "discarded"] = Field(description="closed: fixed; discarded: not accepted")
    note: MaintainerNote


IssueField = Annotated[str, StringConstraints(max_length=MAX_ISSUE_FIELD)]


class Issue(Body):
    """POST /v1/issues: a problem with the service itself."""

    title: Annotated[str, StringConstraints(min_length=1, max_length=MAX_ISSUE_TITLE)]
    body: Annotated[str, StringConstraints(min_length=1, max_length=MAX_ISSUE_BODY)]
    endpoint: IssueField | None = None
    request: IssueField | None = None
    expected: IssueField | None = None
    actual: IssueField | None = None
    environment: IssueField | None = None
    labels: list[Annotated[str, StringConstraints(max_length=50)]] = Field(default_factory=list, max_length=10)
    agent: Agent | None = None


# Each MCP tool's arguments.
TOOL_ARGUMENTS: dict[str, type[BaseModel]] = {
    "search": SearchArgs,
    "read_article": ReadArgs,
    "article_history": HistoryArgs,
    "review_queue": ReviewArgs,
    "create_node": CreateArgs,
    "patch_article": PatchArgs,
    "revise_article": ReviseArgs,
    "undo_edit": UndoArgs,
    "report_outcome": OutcomeReport,
    "report_failed_attempt": FailedAttemptArgs,
}

# Old names still taken: tool or body -> {old: new}.
DEPRECATED_NAMES: dict[str, dict[str, str]] = {
    "report_outcome": {"node": "id", "environment": "env"},
    "report_failed_attempt": {"environment": "env", "node": "id"},
    "feedback": {"node": "id"},
    "failures": {"environment": "env"},
}


class Renamed(NamedTuple):
    """Arguments under their current names, and a note for each old name they came with."""

    arguments: dict[str, Any]
    notes: list[str]  # e.g. "node -> id"


def renamed(shape: str, arguments: Mapping[str, Any]) -> Renamed:
    """`arguments` with the old names of `shape`'s fields replaced by the new ones, and a note for
    each (`"node -> id"`). Both names at once: 400 unless they agree."""
    names = DEPRECATED_NAMES.get(shape, {})
    result = dict(arguments)
    notes: list[str] = []
    for old, new in names.items():
        if old not in result:
            continue
        value = result.pop(old)
        if new in result and result[new] != value:
            raise KnowmeshError(400, "invalid_argument", f"{old} is the old name of {new}: send {new} only", field=old)
        result[new] = value
        notes.append(f"{old} -> {new}")
    return Renamed(result, notes)


def deprecation(notes: list[str]) -> dict[str, Any]:
    """What a result says about old names it was sent (nothing when none)."""
    return {"deprecated": notes} if notes else {}


ENV_KEYS = ("os", "runtime", "pkg_manager", "arch", "labels")


def env_text(env: Any) -> str | None:
    """An env string from either form (the object's values in order, comma-separated)."""
    if env is None or isinstance(env, str):
        return env
    mapping = env.model_dump(exclude_none=True) if isinstance(env, BaseModel) else dict(env)
    parts: list[str] = []
    for key in ENV_KEYS:
        value = mapping.get(key)
        if isinstance(value, str) and value.strip():
            parts.append(value.strip())
        elif isinstance(value, list):
            parts.extend(str(item) for item in value if isinstance(item, str))
    return ",".join(parts)


def env_object(env: Any) -> dict[str, Any]:
    """The env object from either form: a string's tokens are recognised by kind all the same
    (`environment.env_from_mapping` parses each value as an env string)."""
    if env is None:
        return {}
    if isinstance(env, str):
        return {"labels": env}
    return env.model_dump(exclude_none=True) if isinstance(env, BaseModel) else dict(env)


# -- parsing at the edge ----------------------------------------------------------------------

# Errors the service answers itself with its own code and words (a missing field): the edge leaves
# them to it, so one rule keeps one answer. Every other error, an empty value too, is the edge's.
SERVICE_CHECKED = {"missing"}
UNION_TAGS = {"str", "int", "EnvObject", "Agent", "Evidence"}  # the branch of a union in an error's loc, not a field


class EdgeProblem(NamedTuple):
    """The first error of a parse that the edge answers."""

    field: str  # dotted, or "body"
    message: str  # the field, then plain words
    rule: str  # pydantic's error type


def problem(error: ValidationError) -> EdgeProblem | None:
    """The first error the edge answers, or None."""
    for item in error.errors(include_url=False):
        if item["type"] in SERVICE_CHECKED:
            continue
        loc = [
            str(part) for part in item["loc"] if str(part) not in UNION_TAGS and not str(part).startswith("function-")
        ]
        field = ".".join(loc) or "body"
        return EdgeProblem(field, f"{field} {plain_words(item)}", item["type"])
    return None


def parse(
    model: type[BaseModel], data: Any, *, code: str = "invalid_parameter", codes: Mapping[str, str] | None = None
) -> BaseModel | None:
    """`data` parsed with `model`; a value outside a bound is 400 `code` (or `codes[field]`) naming
    the field. Returns None when only what the service checks itself (a missing or empty field) is
    wrong: the caller hands the service the data as it came, and it answers."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        found = problem(error)
        if found is None:
            return None
        raise KnowmeshError(
            400, (codes or {}).get(found.field.split(".")[0], code), found.message, field=found.field
        ) from None


def query(model: type[BaseModel], params: Mapping[str, str], *, code: str = "invalid_parameter") -> dict[str, Any]:
    """A route's query parameters parsed with `model` (an empty value is no value): the values
    as typed, absent ones left out."""
    given = {name: value for name, value in params.items() if value != "" and name in model.model_fields}
    try:
        parsed = model.model_validate(given)
    except ValidationError as error:
        found = problem(error)
        if found is None:
            raise
        raise KnowmeshError(400, code, found.message, field=found.field) from None
    return parsed.model_dump(include=set(given))
