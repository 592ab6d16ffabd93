"""Pure article-edit logic: JSON Pointer patches, field-level diffs and undo.

The service does the I/O (revisions, tokens, validation of the patched document); this
module only transforms plain JSON dicts, so every rule of the PATCH/undo protocol can be
tested without a database. Bad agent input always surfaces as a KnowmeshError, never as
a Python exception, because the message is what tells the agent how to fix its request.
"""

from __future__ import annotations

import copy
import re
from typing import Any, NamedTuple

from knowmesh_mcp.core.errors import KnowmeshError

# Identity and server-managed fields: an edit that touches them would fork the node.
IMMUTABLE_FIELDS = frozenset({"id", "ecosystem", "license", "version", "status"})
# Server-computed fields that are never part of an article diff.
IGNORED_FIELDS = frozenset({"status", "version"})
SOLUTIONS = ("content", "solutions")

# Canonical document order for diffs; unknown keys follow, sorted, so output is deterministic.
_ORDER: dict[tuple[str, ...], tuple[str, ...]] = {
    (): ("id", "ecosystem", "title", "license", "signature", "content"),
    ("signature",): ("error", "template", "environment", "aliases"),
    ("content",): ("symptom", "context", "root_cause", "solutions", "alternatives", "failed_attempts", "boundaries"),
    ("solution",): ("id", "title", "applies_to", "env", "fix", "verify", "notes", "provenance"),
}

_INDEX = re.compile(r"0|[1-9][0-9]*")
_BAD_ESCAPE = re.compile(r"~(?![01])")


class _Sentinel:
    """A marker that survives deepcopy as itself (so `is` checks keep working)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"

    def __deepcopy__(self, memo: dict[int, Any]) -> _Sentinel:
        return self


# Stands in for an array element removed earlier in the same patch, so later elements keep
# their base-revision index until the patch is finished.
_REMOVED = _Sentinel("removed")
# A field missing from a document (a change's absent "old"/"new" side).
_ABSENT = _Sentinel("absent")


# --- JSON Pointer -------------------------------------------------------------------


def parse_pointer(path: str) -> list[str]:
    """Split an RFC 6901 JSON Pointer into unescaped segments (`""` is the root, `[]`)."""
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise KnowmeshError(
            400,
            "invalid_path",
            f"path {path!r} is not a JSON Pointer: it must be empty or start with '/', "
            "for example /content/solutions/<solution-id>/fix/0",
            field="path",
        )
    if _BAD_ESCAPE.search(path):
        raise KnowmeshError(
            400,
            "invalid_path",
            f"path {path!r} has a '~' that is not '~0' (for '~') or '~1' (for '/')",
            field="path",
        )
    if path == "":
        return []
    return [seg.replace("~1", "/").replace("~0", "~") for seg in path[1:].split("/")]


def escape_segment(segment: str) -> str:
    """Escape one key for a JSON Pointer ('~' first, so '/' -> '~1' is not re-escaped)."""
    return segment.replace("~", "~0").replace("/", "~1")


def _pointer(segments: list[str] | tuple[str, ...]) -> str:
    return "".join("/" + escape_segment(s) for s in segments)


# --- apply_ops ----------------------------------------------------------------------


def apply_ops(document: dict[str, Any], ops: Any) -> dict[str, Any]:
    """Apply set/remove ops in order to a deep copy of `document` and return the copy.

    Plain-array indices refer to the base document for the whole patch (an agent writes
    every op against the revision it read); solutions are addressed by id because reads
    reorder them by rating.
    """
    if not isinstance(ops, list):
        raise KnowmeshError(
            400,
            "invalid_op",
            'ops must be a list of {"op": "set"|"remove", "path": "/json/pointer", "value": ...}',
            field="ops",
        )
    result = copy.deepcopy(document)
    for index, op in enumerate(ops):
        kind, segments, value = _check_op(op, index)
        context = _OpContext(index, op["path"])
        _apply_one(result, kind, segments, value, context)
        if tuple(segments[:2]) == SOLUTIONS or segments == ["content"]:
            _check_unique_ids(result, context)
    return _strip_removed(result)


class _OpContext:
    """Which op is being applied, so every error names its index and path."""

    def __init__(self, index: int, path: str):
        self.index = index
        self.path = path

    def error(self, status: int, code: str, message: str, **details: Any) -> KnowmeshError:
        return KnowmeshError(
            status,
            code,
            f"ops[{self.index}] ({self.path}): {message}",
            field=self.path,
            op_index=self.index,
            **details,
        )


class _CheckedOp(NamedTuple):
    """One op of a patch, its shape checked."""

    kind: str  # set | remove
    segments: list[str]  # its path, parsed
    value: Any  # a copy of the op's value (None for remove)


def _check_op(op: Any, index: int) -> _CheckedOp:
    """Validate the shape of one op; return it checked."""

    def bad(message: str) -> KnowmeshError:
        return KnowmeshError(400, "invalid_op", f"ops[{index}]: {message}", field=f"ops/{index}", op_index=index)

    if not isinstance(op, dict):
        raise bad('each op must be an object: {"op": "set"|"remove", "path": ..., "value": ...}')
    extra = sorted(str(k) for k in op if k not in ("op", "path", "value"))
    if extra:
        raise bad(f"unknown key(s) {extra}; an op has only op, path and value")
    kind = op.get("op")
    if kind not in ("set", "remove"):
        raise bad(f"op must be 'set' or 'remove', not {kind!r} (add/replace are both spelled 'set')")
    if kind == "set" and "value" not in op:
        raise bad("'set' needs a value")
    if kind == "remove" and "value" in op:
        raise bad("'remove' takes no value")
    path = op.get("path")
    if not isinstance(path, str):
        raise bad("path must be a JSON Pointer string such as /content/solutions/<solution-id>/fix/0")
    try:
        segments = parse_pointer(path)
    except KnowmeshError as error:
        raise KnowmeshError(400, error.code, f"ops[{index}]: {error.message}", field=path, op_index=index) from None
    if not segments or segments[0] in IMMUTABLE_FIELDS:
        raise KnowmeshError(
            400,
            "immutable_field",
            f"ops[{index}]: {path or '(root)'} cannot be edited; id, ecosystem, license, version and "
            "status are fixed (to replace the whole article, POST it to /article/revisions)",
            field=path,
            op_index=index,
        )
    return _CheckedOp(kind, segments, copy.deepcopy(op.get("value")))


def _apply_one(doc: dict[str, Any], kind: str, segments: list[str], value: Any, ctx: _OpContext) -> None:
    if tuple(segments) == SOLUTIONS:
        if kind == "remove":
            raise ctx.error(400, "invalid_path", "content.solutions is required; set it to [] to clear all answers")
        if not isinstance(value, list):
            raise ctx.error(400, "invalid_path", "content.solutions can only be replaced by a list of solutions")
    parent: Any = doc
    for depth, segment in enumerate(segments[:-1]):
        parent = _child(parent, segment, segments[:depth], ctx)
    last, prefix = segments[-1], tuple(segments[:-1])
    if isinstance(parent, dict):
        if kind == "set":
            parent[last] = value
        elif last in parent:
            del parent[last]
        else:
            raise ctx.error(400, "invalid_path", f"there is no member {last!r} to remove")
    elif isinstance(parent, list) and prefix == SOLUTIONS:
        _apply_solution(parent, kind, last, value, ctx)
    elif isinstance(parent, list):
        if last == "-":
            if kind == "remove":
                raise ctx.error(400, "invalid_path", "'-' means 'append'; remove needs an existing index")
            parent.append(value)
            return
        position = _array_index(parent, last, ctx)
        parent[position] = value if kind == "set" else _REMOVED
    else:
        raise ctx.error(400, "invalid_path", f"{_pointer(prefix)} is a {_kind(parent)}, not an object or array")


def _apply_solution(solutions: list[Any], kind: str, segment: str, value: Any, ctx: _OpContext) -> None:
    """Append, replace or delete a whole solution, addressed by id (or '-' to append)."""
    if segment == "-" and kind == "remove":
        raise ctx.error(400, "invalid_path", "'-' means 'append'; remove a solution by its id")
    position = None if segment == "-" else _solution_index(solutions, segment, ctx)
    if kind == "set" and not isinstance(value, dict):
        raise ctx.error(400, "invalid_path", "a solution must be an object with id, fix and verify")
    if position is None:
        solutions.append(value)
    elif kind == "remove":
        del solutions[position]
    else:
        solutions[position] = value


def _check_unique_ids(doc: dict[str, Any], ctx: _OpContext) -> None:
    """Solution ids must stay unique inside a patch, or later ops would be ambiguous."""
    content = doc.get("content")
    solutions = content.get("solutions") if isinstance(content, dict) else None
    seen: set[Any] = set()
    for solution in solutions if isinstance(solutions, list) else []:
        sid = solution.get("id") if isinstance(solution, dict) else None
        if isinstance(sid, str) and sid in seen:
            raise ctx.error(
                400,
                "duplicate_solution_id",
                f"solution id {sid!r} is already used; edit /content/solutions/{escape_segment(sid)} instead",
            )
        seen.add(sid)


def _child(node: Any, segment: str, prefix: list[str], ctx: _OpContext) -> Any:
    """Step one segment down while walking to an op's parent; the parent must exist."""
    if isinstance(node, dict):
        if segment not in node:
            raise ctx.error(400, "invalid_path", f"{_pointer([*prefix, segment])} does not exist; set it first")
        return node[segment]
    if isinstance(node, list) and tuple(prefix) == SOLUTIONS:
        return node[_solution_index(node, segment, ctx)]
    if isinstance(node, list):
        return node[_array_index(node, segment, ctx)]
    raise ctx.error(400, "invalid_path", f"{_pointer(prefix)} is a {_kind(node)}; it has no {segment!r}")


def _solution_index(solutions: list[Any], segment: str, ctx: _OpContext) -> int:
    for position, solution in enumerate(solutions):
        if isinstance(solution, dict) and solution.get("id") == segment:
            return position
    existing = [s["id"] for s in solutions if isinstance(s, dict) and isinstance(s.get("id"), str)]
    if segment.isascii() and segment.isdigit():
        raise ctx.error(
            400,
            "id_addressing_required",
            f"solutions are addressed by id because reads reorder them by rating; use "
            f"/content/solutions/<id>/... with one of {existing}",
            solutions=existing,
        )
    raise ctx.error(
        404, "solution_not_found", f"no solution has id {segment!r}; existing ids: {existing}", solutions=existing
    )


def _array_index(array: list[Any], segment: str, ctx: _OpContext) -> int:
    """A base-revision index of an element that still exists in this patch."""
    if segment == "-":
        raise ctx.error(400, "invalid_path", "'-' (append) can only be the last segment of a set")
    if not _INDEX.fullmatch(segment):
        raise ctx.error(400, "invalid_path", f"{segment!r} is not an array index (0, 1, 2, ... without leading zeros)")
    position = int(segment)
    if position >= len(array):
        raise ctx.error(
            400,
            "invalid_path",
            f"index {position} is out of range: the array has {len(array)} element(s); use /- to append",
        )
    if array[position] is _REMOVED:
        raise ctx.error(
            400,
            "invalid_path",
            f"element {position} was already removed by an earlier op in this patch "
            "(indices refer to the base revision)",
        )
    return position


def _strip_removed(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _strip_removed(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_strip_removed(item) for item in node if item is not _REMOVED]
    return node


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else type(value).__name__


# --- field_changes ------------------------------------------------------------------


def field_changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Field-level diff of two documents, in canonical document order.

    The granularity is what undo can safely reverse: top-level, signature and content
    fields as leaves, and solutions matched by id (one change per differing solution field),
    so an undo only conflicts with later edits that touched the same field. Lists are
    compared whole. `status` and `version` are server-computed and ignored.
    """
    changes: list[dict[str, Any]] = []
    for key in _keys(old, new, ()):
        if key in IGNORED_FIELDS:
            continue
        if key in ("signature", "content") and isinstance(old.get(key), dict) and isinstance(new.get(key), dict):
            for sub in _keys(old[key], new[key], (key,)):
                if key == "content" and sub == "solutions" and _by_id(old[key].get(sub)) and _by_id(new[key].get(sub)):
                    changes += _solution_changes(old[key][sub], new[key][sub])
                else:
                    _leaf(changes, [key, sub], old[key], new[key])
        else:
            _leaf(changes, [key], old, new)
    return changes


def _keys(old: dict[str, Any], new: dict[str, Any], where: tuple[str, ...]) -> list[str]:
    order = _ORDER[where]
    present = set(old) | set(new)
    return [k for k in order if k in present] + sorted(k for k in present if k not in order)


def _leaf(changes: list[dict[str, Any]], segments: list[str], old: dict[str, Any], new: dict[str, Any]) -> None:
    key = segments[-1]
    if key in old and key in new:
        if not _same(old[key], new[key]):
            changes.append(
                {
                    "op": "set",
                    "path": _pointer(segments),
                    "old": copy.deepcopy(old[key]),
                    "new": copy.deepcopy(new[key]),
                }
            )
    elif key in new:
        changes.append({"op": "add", "path": _pointer(segments), "new": copy.deepcopy(new[key])})
    elif key in old:
        changes.append({"op": "remove", "path": _pointer(segments), "old": copy.deepcopy(old[key])})


def _by_id(solutions: Any) -> bool:
    """Solutions can be diffed by id only if every one has a unique string id."""
    if not isinstance(solutions, list):
        return False
    if not all(isinstance(s, dict) and isinstance(s.get("id"), str) for s in solutions):
        return False
    return len({s["id"] for s in solutions}) == len(solutions)


def _solution_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    old_by_id = {s["id"]: s for s in old}
    new_by_id = {s["id"]: s for s in new}
    order = [s["id"] for s in old] + [s["id"] for s in new if s["id"] not in old_by_id]
    changes: list[dict[str, Any]] = []
    for sid in order:
        path = [*SOLUTIONS, sid]
        if sid not in new_by_id:
            changes.append({"op": "remove", "path": _pointer(path), "old": copy.deepcopy(old_by_id[sid])})
        elif sid not in old_by_id:
            changes.append({"op": "add", "path": _pointer(path), "new": copy.deepcopy(new_by_id[sid])})
        else:
            for field in _keys(old_by_id[sid], new_by_id[sid], ("solution",)):
                _leaf(changes, [*path, field], old_by_id[sid], new_by_id[sid])
    return changes


def _same(a: Any, b: Any) -> bool:
    """JSON equality: unlike Python's ==, true is not 1 and key order does not matter."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(b, (dict, list)):
        return False
    return bool(a == b) and (a is None) == (b is None)


# --- revert_changes -----------------------------------------------------------------


class Merged(NamedTuple):
    """A document with changes applied, and the paths where they met a different later value."""

    document: dict[str, Any]
    conflicts: list[str]


def revert_changes(current: dict[str, Any], changes: list[dict[str, Any]]) -> Merged:
    """Undo a revision's `changes` on `current`; refuse fields a later edit touched.

    Returns the reverted copy without conflicts or, if any changed field no longer holds the
    revision's `new` value (or its parent is gone), an unchanged copy with the conflicting
    paths: undo never overwrites somebody else's later work.
    """
    conflicts: list[str] = []
    for change in changes:
        path, segments = _change_path(change)
        expected = change.get("new", _ABSENT)
        actual = _get(current, segments)
        parent_ok = "old" not in change or isinstance(_get(current, segments[:-1]), (dict, list))
        if not parent_ok or not _same_or_absent(actual, expected):
            conflicts.append(path)
    result = copy.deepcopy(current)
    if conflicts:
        return Merged(result, conflicts)
    for change in changes:
        _put(result, _change_path(change).segments, copy.deepcopy(change.get("old", _ABSENT)))
    return Merged(result, [])


def rebase_changes(base: dict[str, Any], local: dict[str, Any], target: dict[str, Any]) -> Merged:
    """Three-way merge for sync: the field changes base → local, applied on top of `target`.

    Returns the merged copy with the paths that `target` changed too, to a different value:
    there the local value is kept, and the caller reports it (the other value stays in history).
    """
    merged = copy.deepcopy(target)
    both: list[str] = []
    for change in field_changes(base, local):
        path, segments = _change_path(change)
        theirs = _get(target, segments)
        ours = change.get("new", _ABSENT)
        if not _same_or_absent(theirs, change.get("old", _ABSENT)) and not _same_or_absent(theirs, ours):
            both.append(path)
        _put(merged, segments, copy.deepcopy(ours))
    return Merged(merged, both)


class _ChangePath(NamedTuple):
    path: str  # as the revision stores it
    segments: list[str]  # parsed


def _change_path(change: Any) -> _ChangePath:
    """The path of one stored revision change; a change without one is a broken revision."""
    if not isinstance(change, dict) or not isinstance(change.get("path"), str) or not change["path"]:
        raise KnowmeshError(500, "invalid_revision", f"stored revision change {change!r} has no usable path")
    return _ChangePath(change["path"], parse_pointer(change["path"]))


def _same_or_absent(actual: Any, expected: Any) -> bool:
    if actual is _ABSENT or expected is _ABSENT:
        return actual is expected
    return _same(actual, expected)


def _get(doc: Any, segments: list[str]) -> Any:
    """The value at `segments` (solutions by id), or _ABSENT."""
    node = doc
    for depth, segment in enumerate(segments):
        if isinstance(node, dict):
            node = node.get(segment, _ABSENT)
        elif isinstance(node, list) and tuple(segments[:depth]) == SOLUTIONS:
            node = next((s for s in node if isinstance(s, dict) and s.get("id") == segment), _ABSENT)
        elif isinstance(node, list) and _INDEX.fullmatch(segment) and int(segment) < len(node):
            node = node[int(segment)]
        else:
            return _ABSENT
        if node is _ABSENT:
            return _ABSENT
    return node


def _put(doc: dict[str, Any], segments: list[str], value: Any) -> None:
    """Set (or, for _ABSENT, delete) the value at `segments`; a missing solution is appended."""
    parent = _get(doc, segments[:-1])
    last = segments[-1]
    if isinstance(parent, list) and tuple(segments[:-1]) == SOLUTIONS:
        position = next((i for i, s in enumerate(parent) if isinstance(s, dict) and s.get("id") == last), None)
        if value is _ABSENT:
            if position is not None:
                del parent[position]
        elif position is None:
            parent.append(value)
        else:
            parent[position] = value
    elif isinstance(parent, list):
        if value is _ABSENT:
            del parent[int(last)]
        else:
            parent[int(last)] = value
    elif isinstance(parent, dict):
        if value is _ABSENT:
            parent.pop(last, None)
        else:
            parent[last] = value
