"""Node documents: the pydantic models of spec/schema.md and their validation.

`validate_node` turns untrusted JSON into a `NodeDocument` or raises `InvalidNode` with
every problem at once, each naming its field as a JSON Pointer and the rule broken.
`document_version` is the content hash of DESIGN.md. Depends only on `normalize`.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from knowmesh_mcp.core.errors import plain_words
from knowmesh_mcp.core.limits import MAX_ANSWERS, MAX_DOCUMENT_CHARS, MAX_ITEMS, json_problem
from knowmesh_mcp.core.normalize import canonical_ecosystem, normalize_signature

LICENSE: Final = "CC0-1.0"
STATUSES = ("draft", "verified", "deprecated")
SEGMENT = r"[a-z0-9][a-z0-9._-]*"
SEGMENT_RE = re.compile(rf"^{SEGMENT}$")
NODE_ID_RE = re.compile(rf"^({SEGMENT})/({SEGMENT})$")
ECOSYSTEM_RE = re.compile(r"^[a-z0-9][a-z0-9.#+_-]*$")
MAX_ID_LENGTH = 200
MAX_SHORT_TEXT = 500  # a title's bound

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20_000)]
ShortText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_SHORT_TEXT)]
Slug = Annotated[str, StringConstraints(pattern=rf"^{SEGMENT}$", max_length=100)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Signature(_Strict):
    error: Text = Field(description="The raw error line as observed.")
    template: Text | None = Field(None, description="Normalized pattern; derived from `error` when omitted.")
    environment: list[ShortText] = Field(
        default_factory=list, max_length=MAX_ITEMS, description='Constraints such as "python>=3.8", "linux", "pip".'
    )
    aliases: list[Text] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Other wordings of the same error."
    )


class Verify(_Strict):
    command: Text = Field(description="A command that fails before the fix and passes after.")
    expected: Text | None = Field(None, description='Expected output or exit code, e.g. "exit 0".')


class Solution(_Strict):
    id: Slug = Field(description="Stable slug inside the node, e.g. gnu-sed.")
    title: ShortText | None = None
    applies_to: ShortText | None = None
    env: list[ShortText] = Field(
        default_factory=list, max_length=MAX_ITEMS, description='Tags such as ["linux", "gnu-sed"].'
    )
    fix: list[Text] = Field(min_length=1, max_length=MAX_ITEMS, description="Ordered executable steps.")
    verify: Verify
    notes: Text | Annotated[list[Text], Field(max_length=MAX_ITEMS)] | None = None
    provenance: dict[str, Any] | None = None
    # Server-managed: accepted on input so a read can be sent back unchanged, never trusted.
    revision: int | None = Field(None, exclude=True)


class Content(_Strict):
    symptom: Text
    context: Text
    root_cause: Text
    solutions: list[Solution] = Field(max_length=MAX_ANSWERS, description="Answer slots; [] means no answer yet.")
    alternatives: list[Text | dict[str, Any]] = Field(default_factory=list, max_length=MAX_ITEMS)
    failed_attempts: list[Text] = Field(max_length=MAX_ITEMS, description="Dead ends already ruled out; may be [].")
    boundaries: list[Text] = Field(default_factory=list, max_length=MAX_ITEMS)


class Snapshot(NamedTuple):
    """What a node version stores: its content body, the body's canonical JSON and its version."""

    body: dict[str, Any]
    body_json: str  # its canonical JSON: the exact bytes the version hashes
    version: str  # "sha256:" + hex


class NodeDocument(_Strict):
    id: str
    ecosystem: str
    title: ShortText
    status: Literal["draft", "verified", "deprecated"] = "draft"
    license: Literal["CC0-1.0"] = LICENSE
    signature: Signature
    content: Content
    # Derived: accepted on input (an exported document reads back), recomputed on write.
    version: str | None = Field(None, exclude=True)

    def snapshot(self) -> Snapshot:
        """What a node version stores: its content body, its canonical JSON, its version.

        The stored bytes are exactly the bytes the version hashes; status lives on the node.
        """
        body = self.model_dump(mode="json", exclude_none=True, exclude={"status"})
        text = canonical_json(body)
        return Snapshot(body, text, "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest())


class Problem(BaseModel):
    field: str
    rule: str
    message: str


class InvalidNode(Exception):
    """A submitted document broke one or more rules; `problems` lists all of them."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))


def json_pointer(loc: tuple[int | str, ...]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in loc)


def _pydantic_problems(error: ValidationError) -> list[Problem]:
    problems = []
    for item in error.errors(include_url=False):
        # Union members add their type name to loc ("str", "list[...]"); drop those parts.
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and ("[" in p or p in {"str", "dict"})))
        problems.append(Problem(field=json_pointer(loc) or "/", rule=item["type"], message=plain_words(item)))
    return problems


def check_node_id(node_id: Any) -> list[Problem]:
    """Rules for `{ecosystem}/{slug}`; also used on ids taken from URLs."""
    if not isinstance(node_id, str) or not node_id:
        return [Problem(field="/id", rule="required", message="id must be a non-empty string")]
    if len(node_id) > MAX_ID_LENGTH:
        return [Problem(field="/id", rule="max_length", message=f"id is longer than {MAX_ID_LENGTH} characters")]
    match = NODE_ID_RE.match(node_id)
    if not match:
        return [
            Problem(
                field="/id",
                rule="id_format",
                message="id must be {ecosystem}/{slug}: exactly two lowercase segments of [a-z0-9._-], "
                "each starting with a letter or digit",
            )
        ]
    if match.group(2).endswith(".md"):
        return [
            Problem(field="/id", rule="id_format", message="a slug may not end in .md (reserved for Markdown reads)")
        ]
    return []


def _dedupe_problems(problems: list[Problem]) -> list[Problem]:
    seen: set[tuple[str, str]] = set()
    unique = []
    for p in problems:
        if (p.field, p.rule) not in seen:
            seen.add((p.field, p.rule))
            unique.append(p)
    return unique


def _raw_problems(raw: dict[str, Any]) -> list[Problem]:
    """Rules pydantic cannot state per field; checked on the raw input so all errors surface at once."""
    problems = check_node_id(raw.get("id"))
    ecosystem = raw.get("ecosystem")
    if not isinstance(ecosystem, str) or not ECOSYSTEM_RE.match(canonical_ecosystem(ecosystem)):  # `.net` folds first
        problems.append(
            Problem(
                field="/ecosystem",
                rule="ecosystem_format",
                message="ecosystem must be a short lowercase name such as python, node or go",
            )
        )
    elif not problems:
        prefix = raw["id"].split("/", 1)[0]
        if canonical_ecosystem(prefix) != canonical_ecosystem(ecosystem):
            problems.append(
                Problem(
                    field="/id",
                    rule="ecosystem_mismatch",
                    message=f"id prefix {prefix!r} is not an alias of ecosystem {ecosystem!r}",
                )
            )
    content = raw.get("content")
    if isinstance(content, dict):
        for legacy in ("fix", "verify"):
            if legacy in content:
                problems.append(
                    Problem(
                        field=f"/content/{legacy}",
                        rule="legacy_field",
                        message=f"top-level content.{legacy} is no longer accepted: put it inside a "
                        "content.solutions[] entry",
                    )
                )
        solutions = content.get("solutions")
        if isinstance(solutions, list):
            seen: dict[str, int] = {}
            for index, solution in enumerate(solutions):
                sid = solution.get("id") if isinstance(solution, dict) else None
                if isinstance(sid, str):
                    if sid in seen:
                        problems.append(
                            Problem(
                                field=f"/content/solutions/{index}/id",
                                rule="duplicate_solution_id",
                                message=f"solution id {sid!r} is already used by /content/solutions/{seen[sid]}",
                            )
                        )
                    seen.setdefault(sid, index)
    return problems


def validate_node(raw: Any) -> NodeDocument:
    """Validate untrusted input into a NodeDocument, folding the ecosystem to its canonical name."""
    if not isinstance(raw, dict):
        raise InvalidNode([Problem(field="/", rule="type", message="a node document must be a JSON object")])
    bound = json_problem(raw)  # before anything walks it: depth, lone surrogates, 64-bit integers
    if bound is not None:
        raise InvalidNode([Problem(field=bound.pointer, rule="json_bound", message=bound.reason)])
    size = len(canonical_json(raw))
    if size > MAX_DOCUMENT_CHARS:
        raise InvalidNode(
            [
                Problem(
                    field="/",
                    rule="max_size",
                    message=f"the document is {size:,} characters of JSON; at most {MAX_DOCUMENT_CHARS:,}",
                )
            ]
        )
    problems = _raw_problems(raw)
    document = None
    try:
        document = NodeDocument.model_validate(raw)
    except ValidationError as error:
        problems.extend(p for p in _pydantic_problems(error) if p.field not in {"/content/fix", "/content/verify"})
    if problems:
        raise InvalidNode(_dedupe_problems(problems))
    assert document is not None
    document.ecosystem = canonical_ecosystem(document.ecosystem)
    if document.signature.template is None:
        document.signature.template = normalize_signature(document.signature.error)
    return document


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def document_version(document: NodeDocument) -> str:
    """`sha256:` + hex SHA-256 of the canonical JSON of {id, ecosystem, title, license, signature, content}.

    Status and timestamps are not content: promoting a node does not change its version.
    """
    return document.snapshot().version
