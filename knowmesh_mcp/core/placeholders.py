"""The fill-in texts of our ready-made requests, and the check that keeps them out of what is published.

`next_steps` hands agents complete requests with `<what you tried, in one sentence>`-style gaps. An
agent that passes one on unchanged must get a 400 naming the field, not a published node that reads
like a real one. Only our own fill-ins are refused: node text legitimately holds `<module>`,
`<stdin>`, `<*>` and `<path>` (tracebacks, signature templates), so the form `<...>` alone proves
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from knowmesh_mcp.core.articles import escape_segment
from knowmesh_mcp.core.model import Problem

FILL_INS = frozenset(
    {
        "your-agent-id",
        "os, e.g. macos-15",
        "runtime, e.g. python-3.12",
        "package manager, e.g. pip",
        "what you tried, in one sentence",
        "command you ran",
        "why it did not work",
        "answer-slug",
        "short label",
        "first command",
        "second command",
        "command that fails before the fix and passes after",
        "improved context",
        "what you improved",
        "what you were doing when it happened",
        "what happened when you ran the fix and its verify command",
        "working first step",
        "next step",
        "solved | failed | env_mismatch | dangerous",
        "os",
        "runtime",
        "package manager",
        "the verify command",
        "its exit code",
        "required when failed or dangerous",
    }
)
FILL_IN_RE = re.compile("<(" + "|".join(re.escape(text) for text in sorted(FILL_INS, key=len, reverse=True)) + ")>")


def fill_in(text: str) -> str:
    """`<text>`, for a gap in a ready-made request; the text must be one `FILL_INS` refuses."""
    if text not in FILL_INS:
        raise ValueError(f"not a registered fill-in: {text!r}")
    return f"<{text}>"


def strings(value: Any, pointer: str = "") -> Iterator[tuple[str, str]]:
    """(JSON Pointer, string) for every string inside a JSON value."""
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(item, f"{pointer}/{escape_segment(str(key))}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings(item, f"{pointer}/{index}")


def placeholder_problems(document: dict[str, Any]) -> list[Problem]:
    """One problem per field of a document that still holds one of our fill-ins."""
    problems = []
    for pointer, text in strings(document):
        found = FILL_IN_RE.search(text)
        if found:
            problems.append(
                Problem(
                    field=pointer or "/",
                    rule="placeholder",
                    message=f"still holds the placeholder {found.group(0)!r}: replace it with what "
                    "you know, or leave the field out",
                )
            )
    return problems
