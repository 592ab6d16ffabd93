"""The pure article-edit rules: JSON Pointer patches, field-level diffs and undo."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from knowmesh_mcp.core.articles import (
    apply_ops,
    field_changes,
    parse_pointer,
    revert_changes,
)
from knowmesh_mcp.core.errors import KnowmeshError

DOC: dict[str, Any] = {
    "id": "shell/sed-in-place-bsd-vs-gnu",
    "ecosystem": "shell",
    "title": "sed -i fails: BSD sed needs a suffix argument",
    "status": "draft",
    "license": "CC0-1.0",
    "signature": {
        "error": 'sed: 1: "file.txt": invalid command code f',
        "environment": ["sed"],
        "aliases": ["sed: can't read s/foo/bar/: No such file or directory"],
    },
    "content": {
        "symptom": "sed -i works on one OS and fails on the other.",
        "context": "Scripts shared between macOS and Linux.",
        "root_cause": "BSD sed's -i takes a mandatory suffix argument.",
        "solutions": [
            {
                "id": "bsd-sed",
                "title": "Give BSD sed an empty suffix",
                "env": ["macos"],
                "fix": ["sed -i '' 's/foo/bar/' file.txt", "or: brew install gnu-sed"],
                "verify": {"command": "grep -q bar file.txt", "expected": "exit 0"},
                "provenance": {"a/b~c": "weird key", "agent": "a1"},
            },
            {
                "id": "gnu-sed",
                "title": "Use -i without a separate suffix",
                "env": ["linux"],
                "fix": ["sed -i 's/foo/bar/' file.txt"],
                "verify": {"command": "grep -q bar file.txt", "expected": "exit 0"},
            },
        ],
        "alternatives": ["sed -i.bak 's/foo/bar/' file.txt && rm file.txt.bak"],
        "failed_attempts": ["f0", "f1", "f2", "f3"],
        "boundaries": ["Not for BusyBox sed older than 1.20."],
    },
}


def doc() -> dict[str, Any]:
    return copy.deepcopy(DOC)


def set_(path: str, value: Any) -> dict[str, Any]:
    return {"op": "set", "path": path, "value": value}


def remove(path: str) -> dict[str, Any]:
    return {"op": "remove", "path": path}


def error_of(document: dict[str, Any], ops: Any) -> KnowmeshError:
    with pytest.raises(KnowmeshError) as caught:
        apply_ops(document, ops)
    return caught.value


# --- parse_pointer ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "segments"),
    [
        ("", []),
        ("/", [""]),
        ("/a/b", ["a", "b"]),
        ("/a~1b", ["a/b"]),
        ("/m~0n", ["m~n"]),
        ("/~01", ["~1"]),  # ~1 is decoded first, so ~01 is a literal "~1"
        ("/a~1b~0c", ["a/b~c"]),
        ("/content/solutions/-", ["content", "solutions", "-"]),
    ],
)
def test_parse_pointer(path: str, segments: list[str]) -> None:
    assert parse_pointer(path) == segments


@pytest.mark.parametrize("path", ["a/b", "content", "#/a", "/a~2", "/a~"])
def test_parse_pointer_rejects_malformed(path: str) -> None:
    with pytest.raises(KnowmeshError) as caught:
        parse_pointer(path)
    assert (caught.value.status, caught.value.code, caught.value.details["field"]) == (400, "invalid_path", "path")


# --- apply_ops: objects and plain arrays ---------------------------------------------


def test_set_and_remove_object_members_without_touching_the_input() -> None:
    base = doc()
    new = apply_ops(base, [
        set_("/title", "New title"),
        set_("/signature/template", "sed: <n>: <path>: invalid command code <*>"),
        remove("/content/boundaries"),
        set_("/content/solutions/gnu-sed/notes", "BusyBox too"),
    ])
    assert base == DOC
    assert new["title"] == "New title"
    assert new["signature"]["template"].startswith("sed:")
    assert "boundaries" not in new["content"]
    assert new["content"]["solutions"][1]["notes"] == "BusyBox too"


def test_values_are_copied_so_later_ops_do_not_alias_the_request() -> None:
    value = {"command": "true"}
    ops = [set_("/content/solutions/gnu-sed/verify", value), set_("/content/solutions/gnu-sed/verify/command", "x")]
    new = apply_ops(doc(), ops)
    assert value == {"command": "true"}
    assert new["content"]["solutions"][1]["verify"] == {"command": "x"}


def test_escaped_keys() -> None:
    new = apply_ops(doc(), [set_("/content/solutions/bsd-sed/provenance/a~1b~0c", "changed")])
    assert new["content"]["solutions"][0]["provenance"]["a/b~c"] == "changed"
    new = apply_ops(doc(), [remove("/content/solutions/bsd-sed/provenance/a~1b~0c")])
    assert new["content"]["solutions"][0]["provenance"] == {"agent": "a1"}


def test_indices_refer_to_the_base_revision_for_the_whole_patch() -> None:
    new = apply_ops(doc(), [remove("/content/failed_attempts/0"), set_("/content/failed_attempts/2", "x")])
    assert new["content"]["failed_attempts"] == ["f1", "x", "f3"]
    new = apply_ops(doc(), [
        remove("/content/failed_attempts/1"),
        remove("/content/failed_attempts/2"),
        set_("/content/failed_attempts/3", "three"),
        set_("/content/failed_attempts/-", "appended"),
        set_("/content/failed_attempts/0", "zero"),
    ])
    assert new["content"]["failed_attempts"] == ["zero", "three", "appended"]


def test_solution_fix_indices_are_base_relative_too() -> None:
    new = apply_ops(doc(), [remove("/content/solutions/bsd-sed/fix/0"), set_("/content/solutions/bsd-sed/fix/1", "y")])
    assert new["content"]["solutions"][0]["fix"] == ["y"]


def test_append_with_dash() -> None:
    new = apply_ops(doc(), [set_("/content/solutions/gnu-sed/fix/-", "step 2"), set_("/signature/aliases/-", "alias")])
    assert new["content"]["solutions"][1]["fix"] == ["sed -i 's/foo/bar/' file.txt", "step 2"]
    assert new["signature"]["aliases"][-1] == "alias"


def test_whole_array_replacement_resets_the_base() -> None:
    new = apply_ops(doc(), [set_("/content/failed_attempts", ["a", "b"]), remove("/content/failed_attempts/1")])
    assert new["content"]["failed_attempts"] == ["a"]


@pytest.mark.parametrize(
    "ops",
    [
        [set_("/content/failed_attempts/4", "x")],  # out of range
        [set_("/content/failed_attempts/01", "x")],  # leading zero
        [set_("/content/failed_attempts/-1", "x")],  # negative
        [set_("/content/failed_attempts/one", "x")],
        [remove("/content/failed_attempts/-")],
        [set_("/content/failed_attempts/-/x", "x")],
        [remove("/content/failed_attempts/0"), set_("/content/failed_attempts/0", "x")],  # removed earlier
        [remove("/content/failed_attempts/0"), remove("/content/failed_attempts/0")],
        [set_("/content/nope/child", 1)],  # parent missing
        [set_("/title/child", 1)],  # parent is a string
        [remove("/content/notes")],  # missing member
        [remove("/content/solutions")],
        [set_("/content/solutions", {"not": "a list"})],
        [set_("/content/solutions/-", "not an object")],
        [remove("/content/solutions/-")],
        [set_("/content/solutions/gnu-sed", ["not an object"])],
    ],
)
def test_invalid_paths(ops: list[dict[str, Any]]) -> None:
    error = error_of(doc(), ops)
    assert (error.status, error.code) == (400, "invalid_path")
    assert error.details["field"] == ops[-1]["path"]
    assert error.details["op_index"] == len(ops) - 1


def test_removed_element_error_explains_base_indices() -> None:
    error = error_of(doc(), [remove("/content/failed_attempts/2"), remove("/content/failed_attempts/2")])
    assert "already removed" in error.message and "base revision" in error.message


def test_input_document_never_mutated_even_on_error() -> None:
    base = doc()
    with pytest.raises(KnowmeshError):
        apply_ops(base, [remove("/content/failed_attempts/0"), set_("/title", "x"), set_("/id", "other/id")])
    assert base == DOC


# --- apply_ops: solutions -------------------------------------------------------------

NEW_SOLUTION = {"id": "busybox", "env": ["alpine"], "fix": ["sed -i s/a/b/ f"], "verify": {"command": "true"}}


def test_solutions_are_addressed_by_id() -> None:
    new = apply_ops(doc(), [set_("/content/solutions/gnu-sed/verify/command", "test -s file.txt")])
    assert new["content"]["solutions"][1]["verify"]["command"] == "test -s file.txt"


def test_append_replace_and_remove_solutions() -> None:
    new = apply_ops(doc(), [
        set_("/content/solutions/-", NEW_SOLUTION),
        set_("/content/solutions/busybox/notes", "edited in the same patch"),
        remove("/content/solutions/bsd-sed"),
    ])
    assert [s["id"] for s in new["content"]["solutions"]] == ["gnu-sed", "busybox"]
    assert new["content"]["solutions"][1]["notes"] == "edited in the same patch"
    replacement = {**NEW_SOLUTION, "id": "gnu-sed"}
    new = apply_ops(doc(), [set_("/content/solutions/gnu-sed", replacement)])
    assert new["content"]["solutions"][1] == replacement
    new = apply_ops(doc(), [set_("/content/solutions", [])])
    assert new["content"]["solutions"] == []


def test_numeric_solution_index_requires_id_addressing() -> None:
    for path in ("/content/solutions/0/fix/0", "/content/solutions/1"):
        error = error_of(doc(), [set_(path, "x")])
        assert (error.status, error.code, error.details["field"]) == (400, "id_addressing_required", path)
        assert "reorder" in error.message
        assert error.details["solutions"] == ["bsd-sed", "gnu-sed"]


def test_unknown_solution_id() -> None:
    error = error_of(doc(), [remove("/content/solutions/nope")])
    assert (error.status, error.code) == (404, "solution_not_found")
    assert error.details["solutions"] == ["bsd-sed", "gnu-sed"]
    assert error.details["field"] == "/content/solutions/nope"
    error = error_of(doc(), [remove("/content/solutions/gnu-sed"), set_("/content/solutions/gnu-sed/title", "x")])
    assert (error.code, error.details["solutions"]) == ("solution_not_found", ["bsd-sed"])


@pytest.mark.parametrize(
    "op",
    [
        set_("/content/solutions/-", {**NEW_SOLUTION, "id": "gnu-sed"}),
        set_("/content/solutions/bsd-sed", {**NEW_SOLUTION, "id": "gnu-sed"}),
        set_("/content/solutions/bsd-sed/id", "gnu-sed"),
    ],
)
def test_solution_ids_stay_unique(op: dict[str, Any]) -> None:
    error = error_of(doc(), [op])
    assert (error.status, error.code) == (400, "duplicate_solution_id")


# --- apply_ops: immutable fields and malformed ops ------------------------------------


@pytest.mark.parametrize("path", ["", "/id", "/ecosystem", "/license", "/version", "/status", "/status/x"])
def test_immutable_fields(path: str) -> None:
    for op in (set_(path, "x"), remove(path)):
        error = error_of(doc(), [op])
        assert (error.status, error.code, error.details["field"]) == (400, "immutable_field", path)


@pytest.mark.parametrize(
    "op",
    [
        {"op": "set", "path": "/title"},  # set needs value
        {"op": "remove", "path": "/title", "value": "x"},  # remove forbids value
        {"op": "set", "path": "/title", "value": "x", "from": "/a"},  # extra key
        {"op": "add", "path": "/title", "value": "x"},
        {"op": "replace", "path": "/title", "value": "x"},
        {"path": "/title", "value": "x"},
        {"op": "set", "value": "x"},
        {"op": "set", "path": 3, "value": "x"},
        {"op": ["set"], "path": "/title", "value": "x"},
        "set /title x",
        None,
        ["set", "/title", "x"],
    ],
)
def test_invalid_ops_name_their_index(op: Any) -> None:
    error = error_of(doc(), [set_("/title", "ok"), op])
    assert (error.status, error.code, error.details["field"]) == (400, "invalid_op", "ops/1")


@pytest.mark.parametrize("ops", [None, {"op": "set", "path": "/title", "value": "x"}, "ops", 1])
def test_ops_must_be_a_list(ops: Any) -> None:
    error = error_of(doc(), ops)
    assert (error.status, error.code, error.details["field"]) == (400, "invalid_op", "ops")


def test_path_syntax_errors_name_the_op() -> None:
    error = error_of(doc(), [set_("title", "x")])
    assert (error.code, error.details["field"], error.details["op_index"]) == ("invalid_path", "title", 0)


def test_empty_ops_return_an_equal_copy() -> None:
    base = doc()
    new = apply_ops(base, [])
    assert new == base and new is not base and new["content"] is not base["content"]


# --- field_changes ------------------------------------------------------------------


def test_no_changes() -> None:
    assert field_changes(doc(), doc()) == []
    other = doc()
    other["status"], other["version"] = "verified", "sha256:abc"
    other["content"]["solutions"].reverse()  # order is not content: reads reorder solutions
    assert field_changes(doc(), other) == []


def test_plain_field_changes_in_document_order() -> None:
    new = apply_ops(doc(), [
        remove("/content/boundaries"),
        set_("/content/failed_attempts/-", "f4"),
        set_("/content/a~1b~0c", 1),
        set_("/signature/template", "t"),
        set_("/title", "T"),
    ])
    assert field_changes(doc(), new) == [
        {"op": "set", "path": "/title", "old": DOC["title"], "new": "T"},
        {"op": "add", "path": "/signature/template", "new": "t"},
        {"op": "set", "path": "/content/failed_attempts", "old": ["f0", "f1", "f2", "f3"],
         "new": ["f0", "f1", "f2", "f3", "f4"]},
        {"op": "remove", "path": "/content/boundaries", "old": DOC["content"]["boundaries"]},
        {"op": "add", "path": "/content/a~1b~0c", "new": 1},
    ]


def test_solution_changes_by_id() -> None:
    new = apply_ops(doc(), [
        set_("/content/solutions/-", NEW_SOLUTION),
        remove("/content/solutions/bsd-sed"),
        set_("/content/solutions/gnu-sed/fix/0", "sed -i -e s/a/b/ f"),
        remove("/content/solutions/gnu-sed/title"),
        set_("/content/solutions/gnu-sed/notes", "n"),
    ])
    old_gnu = DOC["content"]["solutions"][1]
    assert field_changes(doc(), new) == [
        {"op": "remove", "path": "/content/solutions/bsd-sed", "old": DOC["content"]["solutions"][0]},
        {"op": "remove", "path": "/content/solutions/gnu-sed/title", "old": old_gnu["title"]},
        {"op": "set", "path": "/content/solutions/gnu-sed/fix", "old": old_gnu["fix"], "new": ["sed -i -e s/a/b/ f"]},
        {"op": "add", "path": "/content/solutions/gnu-sed/notes", "new": "n"},
        {"op": "add", "path": "/content/solutions/busybox", "new": NEW_SOLUTION},
    ]


def test_field_changes_is_json_typed() -> None:
    old, new = doc(), doc()
    old["content"]["extra"], new["content"]["extra"] = 1, True  # 1 == True in Python, not in JSON
    assert [c["path"] for c in field_changes(old, new)] == ["/content/extra"]


def test_field_changes_do_not_alias_the_documents() -> None:
    new = apply_ops(doc(), [set_("/content/failed_attempts", ["x"])])
    changes = field_changes(doc(), new)
    changes[0]["new"].append("y")
    assert new["content"]["failed_attempts"] == ["x"]


def test_solutions_without_usable_ids_are_compared_whole() -> None:
    old, new = doc(), doc()
    new["content"]["solutions"] = [{"fix": []}]
    assert [c["path"] for c in field_changes(old, new)] == ["/content/solutions"]


# --- revert_changes -----------------------------------------------------------------


def test_revert_round_trip() -> None:
    base = doc()
    new = apply_ops(base, [
        set_("/title", "T"),
        remove("/content/solutions/bsd-sed"),
        set_("/content/solutions/-", NEW_SOLUTION),
        set_("/content/solutions/gnu-sed/fix/-", "x"),
        remove("/signature/aliases"),
    ])
    reverted, conflicts = revert_changes(new, field_changes(base, new))
    assert conflicts == []
    assert field_changes(base, reverted) == []
    # a removed solution comes back at the end
    assert [s["id"] for s in reverted["content"]["solutions"]] == ["gnu-sed", "bsd-sed"]


def test_revert_refuses_fields_changed_by_a_later_edit() -> None:
    base = doc()
    first = apply_ops(base, [set_("/content/solutions/gnu-sed/fix/0", "mine"), set_("/title", "mine")])
    changes = field_changes(base, first)
    later = apply_ops(first, [set_("/content/solutions/gnu-sed/fix/0", "theirs")])
    result, conflicts = revert_changes(later, changes)
    assert conflicts == ["/content/solutions/gnu-sed/fix"]
    assert result == later and result is not later


def test_revert_keeps_unrelated_later_edits() -> None:
    base = doc()
    first = apply_ops(base, [set_("/title", "mine")])
    later = apply_ops(first, [set_("/content/solutions/gnu-sed/fix/0", "theirs")])
    result, conflicts = revert_changes(later, field_changes(base, first))
    assert conflicts == []
    assert result["title"] == DOC["title"]
    assert result["content"]["solutions"][1]["fix"] == ["theirs"]


@pytest.mark.parametrize(
    ("edit", "later", "conflict"),
    [
        # the edit added a solution; a later edit changed it
        ([set_("/content/solutions/-", NEW_SOLUTION)], [set_("/content/solutions/busybox/notes", "n")],
         "/content/solutions/busybox"),
        # the edit removed a field; a later edit re-added it
        ([remove("/content/boundaries")], [set_("/content/boundaries", [])], "/content/boundaries"),
        # the edit removed a solution; a later edit re-created one with that id
        ([remove("/content/solutions/gnu-sed")], [set_("/content/solutions/-", {**NEW_SOLUTION, "id": "gnu-sed"})],
         "/content/solutions/gnu-sed"),
        # the edit removed a solution field; a later edit removed the whole solution
        ([remove("/content/solutions/gnu-sed/title")], [remove("/content/solutions/gnu-sed")],
         "/content/solutions/gnu-sed/title"),
    ],
)
def test_revert_conflicts(edit: list[Any], later: list[Any], conflict: str) -> None:
    base = doc()
    first = apply_ops(base, edit)
    current = apply_ops(first, later)
    result, conflicts = revert_changes(current, field_changes(base, first))
    assert conflicts == [conflict]
    assert result == current


def test_revert_rejects_corrupt_changes_with_a_domain_error() -> None:
    with pytest.raises(KnowmeshError):
        revert_changes(doc(), [{"op": "set", "new": 1}])


# --- properties -----------------------------------------------------------------------

text = st.text(max_size=8)
EDITS = st.lists(
    st.one_of(
        text.map(lambda t: set_("/title", t)),
        text.map(lambda t: set_("/signature/template", t)),
        st.just(remove("/signature/aliases")),
        text.map(lambda t: set_("/signature/aliases/-", t)),
        st.integers(0, 3).map(lambda i: remove(f"/content/failed_attempts/{i}")),
        st.tuples(st.integers(0, 3), text).map(lambda p: set_(f"/content/failed_attempts/{p[0]}", p[1])),
        text.map(lambda t: set_("/content/failed_attempts/-", t)),
        st.just(remove("/content/boundaries")),
        text.map(lambda t: set_("/content/a~1b~0c", t)),
        st.sampled_from(["bsd-sed", "gnu-sed"]).map(lambda s: remove(f"/content/solutions/{s}")),
        st.sampled_from(["bsd-sed", "gnu-sed"]).flatmap(
            lambda s: text.map(lambda t: set_(f"/content/solutions/{s}/fix/0", t))),
        st.sampled_from(["bsd-sed", "gnu-sed"]).flatmap(
            lambda s: text.map(lambda t: set_(f"/content/solutions/{s}/notes", t))),
        st.sampled_from(["bsd-sed", "gnu-sed"]).map(lambda s: remove(f"/content/solutions/{s}/title")),
        text.map(lambda t: set_("/content/solutions/bsd-sed/provenance/a~1b~0c", t)),
        st.sampled_from(["busybox", "toybox"]).map(lambda s: set_("/content/solutions/-", {**NEW_SOLUTION, "id": s})),
    ),
    max_size=8,
)


def by_solution_id(document: dict[str, Any]) -> dict[str, Any]:
    document = copy.deepcopy(document)
    document["content"]["solutions"].sort(key=lambda s: s["id"])
    return document


@pytest.mark.slow
@settings(max_examples=300, suppress_health_check=[HealthCheck.filter_too_much])
@given(EDITS)
def test_revert_of_apply_is_identity(ops: list[dict[str, Any]]) -> None:
    base = doc()
    try:
        new = apply_ops(base, ops)
    except KnowmeshError:
        assume(False)
        raise
    assert base == DOC
    changes = field_changes(base, new)
    reverted, conflicts = revert_changes(new, changes)
    assert conflicts == []
    assert by_solution_id(reverted) == by_solution_id(base)
    assert field_changes(base, reverted) == []
    assert field_changes(new, new) == []


@given(
    st.lists(text, min_size=1, max_size=8).flatmap(
        lambda items: st.tuples(
            st.just(items),
            st.lists(st.tuples(st.integers(0, len(items) - 1), st.booleans()), unique_by=lambda p: p[0]),
        )
    )
)
def test_base_relative_indices_match_a_model(case: tuple[list[str], list[tuple[int, bool]]]) -> None:
    items, edits = case
    base = doc()
    base["content"]["failed_attempts"] = items
    ops = [remove(f"/content/failed_attempts/{i}") if drop else set_(f"/content/failed_attempts/{i}", f"new{i}")
           for i, drop in edits]
    dropped = {i for i, drop in edits if drop}
    replaced = {i for i, drop in edits if not drop}
    expected = [f"new{i}" if i in replaced else item for i, item in enumerate(items) if i not in dropped]
    assert apply_ops(base, ops)["content"]["failed_attempts"] == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)
paths = st.one_of(
    st.text(max_size=12),
    st.lists(
        st.sampled_from(["content", "solutions", "gnu-sed", "bsd-sed", "fix", "0", "1", "01", "-", "-1", "~", "~1",
                         "~2", "title", "id", "verify", "signature", "aliases", "x", "", "9"]),
        max_size=6,
    ).map(lambda segs: "".join("/" + s for s in segs)),
)
ops_like = st.dictionaries(
    st.sampled_from(["op", "path", "value", "from"]),
    st.one_of(st.sampled_from(["set", "remove", "add"]), paths, json_values),
    max_size=4,
)


@pytest.mark.slow
@settings(max_examples=400)
@given(st.one_of(json_values, st.lists(st.one_of(ops_like, json_values), max_size=6)))
def test_fuzz_only_domain_errors(ops: Any) -> None:
    base = doc()
    try:
        new = apply_ops(base, ops)
    except KnowmeshError as error:
        assert error.status in (400, 404)
        assert "field" in error.details
    else:
        assert isinstance(new, dict)
        reverted, conflicts = revert_changes(new, field_changes(base, new))
        assert conflicts == []
        assert field_changes(base, reverted) == []
    assert base == DOC
