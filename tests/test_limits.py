"""The bounds on untrusted JSON: each breach is found, named by its JSON Pointer, wherever it is."""

from __future__ import annotations

import pytest

from knowmesh_mcp.core.limits import MAX_DEPTH, MAX_INT, json_problem


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value, pointer, words", [
    ({"a": [1, {"b": "\ud800"}]}, "/a/1/b", "lone surrogate"),
    ({"a": {"\udfff": 1}}, "/a", "key holds a lone surrogate"),
    ({"x/y": {"m~n": MAX_INT + 1}}, "/x~1y/m~0n", "64 bits"),
    ({"n": -MAX_INT - 2}, "/n", "64 bits"),
    ({"deep": nested(MAX_DEPTH + 5)}, None, f"deeper than {MAX_DEPTH}"),
])
def test_a_breach_is_named_where_it_is(value, pointer, words):
    problem = json_problem(value)
    assert problem is not None
    assert words in problem.reason
    if pointer is not None:
        assert problem.pointer == pointer
    else:
        assert problem.pointer.startswith("/deep/0/0")


@pytest.mark.parametrize("value", [
    {"title": "ModuleNotFoundError: No module named 'é'", "n": MAX_INT, "m": -MAX_INT - 1, "ok": True,
     "steps": ["pip install x", {"nested": [None, 1.5, "😀"]}]},
    nested(MAX_DEPTH - 1),
    {1: "a key that is not a string is not a bound"},
    "plain",
])
def test_values_inside_the_bounds_pass(value):
    assert json_problem(value) is None


def test_two_halves_of_a_surrogate_pair_in_separate_strings_are_each_lone():
    problem = json_problem(["\ud83d", "\ude00"])  # side by side, they still are not one character
    assert problem is not None
    assert problem.pointer in ("/0", "/1") and "lone surrogate" in problem.reason
