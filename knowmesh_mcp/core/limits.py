"""Bounds on untrusted input, and the checks that hold every request inside them.

Nothing a client sends may reach the store, a serializer or a quadratic check unbounded: JSON
deeper than `MAX_DEPTH`, a string holding a lone surrogate (valid JSON, but not encodable as
UTF-8), or an integer past SQLite's 64 bits is refused with a 400 naming where it is, before
anything else looks at it. Depends on `errors` only.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter

MAX_DEPTH = 32  # nesting of arrays and objects in any JSON a client sends
MAX_INT = 2**63 - 1  # SQLite's largest integer
MAX_ANSWERS = 20  # solutions per node: the one-answer-per-scope check compares every pair
MAX_ITEMS = 100  # items of any list inside a node document (fix steps, aliases, failed attempts, ...)
MAX_DOCUMENT_CHARS = 200_000  # a node document's canonical JSON
MAX_CONFLICTS = 5  # overlapping answer pairs a 409 lists

# Limits of the wire shapes (`wire` states them in every schema; the service enforces them).
MAX_RESULTS = 20  # search results (protocol: "limit defaults to 5, maximum 20"); more is refused, not cut
DEFAULT_RESULTS = 5
MAX_NOTE = 4000  # an outcome report's note and reason, characters
MAX_TEXT = 4000  # a failed attempt's summary, reason and each step, characters
MAX_STEPS = 50  # steps of a failed attempt
MAX_REVIEW_LIMIT = 200  # review items per page (protocol: "?limit= (1-200, default 50)")
DEFAULT_REVIEW_LIMIT = 50
MIN_BUDGET = 1024  # the smallest max_bytes of a bounded MCP result
MAX_BUDGET = 1_000_000
DEFAULT_BUDGET = 8192  # max_bytes of an MCP search, read and review queue
MAX_MAINTAINER_NOTE = 2000  # a maintainer's note on a status change, merge or issue resolution, characters
MAX_ISSUE_TITLE = 200  # a service issue's title, characters
MAX_ISSUE_BODY = 8000
MAX_ISSUE_FIELD = 2000  # each of a service issue's optional fields (endpoint, request, ...)


class JsonProblem(NamedTuple):
    """The first part of a JSON value outside the bounds (`json_problem`)."""

    pointer: str  # a JSON Pointer to it ("/" for the whole value)
    reason: str  # what is wrong with it, in words


def json_problem(value: Any) -> JsonProblem | None:
    """The first part of `value` outside the bounds (its JSON Pointer, what is wrong), or None.

    Iterative, so a document nested 100,000 deep costs a loop, not the interpreter's stack. The
    pointer is built only for a value that breaks a bound (a second walk): building one for every
    item was most of the cost of checking a good document.
    """
    return None if _within_bounds(value) else _first_problem(value)


def _within_bounds(value: Any) -> bool:
    strings: list[Any] = []  # every key and string, encoded once at the end: a lone surrogate fails it
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth >= MAX_DEPTH:
                return False
            strings.extend(item)
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            if depth >= MAX_DEPTH:
                return False
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            strings.append(item)
        elif isinstance(item, int) and not isinstance(item, bool) and not -MAX_INT - 1 <= item <= MAX_INT:
            return False
    try:
        "".join(strings).encode("utf-8")
    except (TypeError, UnicodeEncodeError):  # a key that is not a string: the careful walk judges it
        return False
    return True


def _first_problem(value: Any) -> JsonProblem | None:
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, dict):
            if depth >= MAX_DEPTH:
                return JsonProblem(where or "/", f"nested deeper than {MAX_DEPTH} levels")
            for key, child in item.items():
                if isinstance(key, str) and _surrogate(key):
                    return JsonProblem(where or "/", "a key holds a lone surrogate (not valid UTF-8)")
                stack.append((child, f"{where}/{_escape(key)}", depth + 1))
        elif isinstance(item, list):
            if depth >= MAX_DEPTH:
                return JsonProblem(where or "/", f"nested deeper than {MAX_DEPTH} levels")
            stack.extend((child, f"{where}/{index}", depth + 1) for index, child in enumerate(item))
        elif isinstance(item, str):
            if _surrogate(item):
                return JsonProblem(where or "/", "the string holds a lone surrogate (not valid UTF-8)")
        elif isinstance(item, int) and not isinstance(item, bool) and not -MAX_INT - 1 <= item <= MAX_INT:
            return JsonProblem(where or "/", "the integer does not fit in 64 bits")
    return None


def check_json(value: Any) -> Any:
    """`value`, or 400 invalid_json naming the first place it breaks a bound."""
    problem = json_problem(value)
    if problem is not None:
        raise KnowmeshError(400, "invalid_json", f"{problem.pointer}: {problem.reason}", field=problem.pointer)
    return value


def to_int(
    value: Any,
    name: str,
    *,
    lowest: int = 0,
    highest: int = MAX_INT,
    code: str = "invalid_parameter",
    what: str = "an integer",
) -> int:
    """An integer parameter (from a URL, a cursor or a body) within [lowest, highest], else 400."""
    if isinstance(value, bool):
        raise bad_parameter(name, f"{name} must be {what}", code=code)
    if isinstance(value, str):
        if not _INTEGER.match(value.strip()):  # ASCII digits, at most 20 of them: no long parse
            raise bad_parameter(name, f"{name} must be {what}", code=code)
        value = int(value)
    if not isinstance(value, int):
        raise bad_parameter(name, f"{name} must be {what}", code=code)
    if not lowest <= value <= highest:
        raise bad_parameter(name, f"{name} must be between {lowest} and {highest}", code=code)
    return value


_INTEGER = re.compile(r"-?[0-9]{1,20}\Z")


def _surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")
