"""One node for people: its article (`/nodes/{id}`), its history (`/nodes/{id}/history`) and the
diff between two revisions (`/nodes/{id}/diff?from=N&to=M`).

Data for the templates `node.html`, `history.html` and `diff.html`, which escape everything
shown (it is the node's text or its evidence). Two words a reader meets side by side mean
different things and come from different places: `status` is editorial (maintainers set it) and
`answer state` is evidence (outcome reports derive it), so the page says what each one means in a
line each instead of leaving `verified` beside `draft` to look like a contradiction.
"""

from __future__ import annotations

import difflib
import json
from typing import Any
from urllib.parse import quote

from knowmesh_mcp.core.evidence_words import AnswerEvidence
from knowmesh_mcp.web.shell import PageLink, node_href, plural

STATUS_MEANINGS = {
    "draft": "published as submitted; no maintainer has reviewed the text yet (maintainers set the status).",
    "verified": "a maintainer reviewed this article's text (maintainers set the status; it says nothing about runs).",
    "deprecated": "a maintainer retired this article; it is kept for reference (maintainers set the status).",
}
ANSWER_MEANINGS = {
    "verified": "two independent agents reported an answer solved their problem, and no failure is open "
    "(outcome reports set this).",
    "draft": "no answer has been reported solved by two independent agents yet (outcome reports set this).",
    "disputed": "agents reported an answer both failed and solved: read its evidence (outcome reports set this).",
    "failed": "two independent agents reported the answer failed (outcome reports set this).",
}
NO_ANSWER = "no answer yet: this problem is open for anyone to answer."
SECTIONS = (
    ("symptom", "Symptom", "symptom"),
    ("context", "Context", "context"),
    ("root_cause", "Root cause", "root-cause"),
)


def history_href(node_id: str) -> str:
    return node_href(node_id) + "/history"


def diff_href(node_id: str, first: int, last: int) -> str:
    return f"{node_href(node_id)}/diff?from={int(first)}&to={int(last)}"


def json_path(node_id: str) -> str:
    return "/v1/nodes/" + quote(node_id, safe="/")


def states(status: str, has_answer: bool, answer_state: str | None) -> dict[str, str]:
    """`status` and `answer state`, one line each, so the two never read as a contradiction."""
    state = (answer_state if answer_state in ANSWER_MEANINGS else "draft") if has_answer else "none"
    return {
        "status_line": STATUS_MEANINGS.get(status, "set by maintainers."),
        "answer_state": state,
        "answer_line": ANSWER_MEANINGS[state] if has_answer else NO_ANSWER,
    }


# -- the article ----------------------------------------------------------------------------


def served_evidence(solution: dict[str, Any]) -> list[str]:
    """The read's own counts (all environments together), for a node with too many reports to read."""
    evidence = solution.get("evidence")
    if not evidence:
        return []
    solved, failed = evidence.get("solved_agents", 0), evidence.get("failed_agents", 0)
    text = ", ".join(
        part
        for part in (
            f"worked for {plural(solved, 'agent')}" if solved else "",
            f"failed for {plural(failed, 'agent')}" if failed else "",
        )
        if part
    )
    return [f"{text} (all environments together)"] if text else []


def answer(solution: dict[str, Any], words: AnswerEvidence | None) -> dict[str, Any]:
    """One answer with its state and what the reports say about it, one sentence per environment."""
    notes = []
    if words and words.earlier:
        notes.append(
            f"{plural(words.earlier, 'report')} on earlier revisions of this answer (they do not count for this one)"
        )
    if words and words.uncounted:
        notes.append(f"{plural(words.uncounted, 'report')} from agents without a token, kept but not counted")
    solution_notes = solution.get("notes")
    return {
        "solution": solution,
        "state": solution.get("answer_state") or "draft",
        "evidence_lines": words.lines if words else served_evidence(solution),
        "evidence_notes": [note.capitalize() for note in notes],
        "notes": (solution_notes if isinstance(solution_notes, list) else [solution_notes]) if solution_notes else [],
    }


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def stats_shown(stats: dict[str, Any] | None) -> dict[str, Any] | None:
    if not stats:
        return None
    return {
        "sample_size": stats.get("sample_size"),
        "solved": _number(stats.get("solved")),
        "failed": _number(stats.get("failed")),
        "success_score": _number(stats.get("success_score")),
        "low_confidence": bool(stats.get("low_confidence")),
        "stale": bool(stats.get("stale")),
        "last_verified": stats.get("last_verified"),
    }


def environment_text(environment: Any) -> str:
    if not isinstance(environment, dict):
        return str(environment)
    parts = []
    for key, value in environment.items():
        if value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        parts.append(f"{key}: {value}")
    return "; ".join(parts) or "unspecified"


def revisions(node_id: str, history: dict[str, Any]) -> list[dict[str, Any]]:
    """The article's revisions, newest first, each with the fields it changed and a link to its diff."""
    shown = []
    for revision in sorted(history.get("revisions", []), key=lambda r: r["revision"], reverse=True):
        number = revision["revision"]
        changed = [
            change["path"]
            for change in revision.get("changes") or []  # a create changes the whole document
            if isinstance(change, dict) and isinstance(change.get("path"), str) and change["path"]
        ]
        shown.append(
            {
                "number": number,
                "created_at": revision.get("created_at"),
                "agent": revision.get("agent"),
                "kind": revision.get("kind") or "edit",
                "summary": revision.get("summary") or "(no summary)",
                "changed": changed,
                "diff": diff_href(node_id, number - 1, number) if isinstance(number, int) and number > 1 else None,
            }
        )
    return shown


def node(
    view: dict[str, Any], history: dict[str, Any], shared: list[dict[str, Any]], evidence: dict[str, AnswerEvidence]
) -> dict[str, Any]:
    """What `node.html` shows: the article, its answers with their evidence, failures and history."""
    content, signature = view["content"], view["signature"]
    return {
        "view": view,
        "content": content,
        "signature": signature,
        "environment": signature.get("environment", []),
        "sections": SECTIONS,
        **states(view["status"], view["has_answer"], view.get("answer_state")),
        "json_path": json_path(view["id"]),
        "history_href": history_href(view["id"]),
        "answers": [answer(s, evidence.get(s["id"])) for s in content.get("solutions", [])],
        "stats": stats_shown(view.get("stats")),
        "shared": [{**failure, "environment_text": environment_text(failure.get("environment"))} for failure in shared],
        "revisions": revisions(view["id"], history),
    }


def node_description(view: dict[str, Any]) -> str:
    """The meta description of a node page: what goes wrong, then whether an answer is known."""
    answer = "An answer with fix and verify steps." if view["has_answer"] else "Open problem: no answer yet."
    return f"{view['content'].get('symptom') or view['title']} {answer}"


# -- history and diff -------------------------------------------------------------------------


def history_page(view: dict[str, Any], history: dict[str, Any]) -> dict[str, Any]:
    return {
        "view": view,
        "current": history["current_revision"],
        "revisions": revisions(view["id"], history),
        "json_path": json_path(view["id"]),
    }


def _lines(value: Any) -> list[str]:
    """A field's value as lines to compare: text by line, a list of texts by item, anything else as JSON."""
    if value is None:
        return []
    if isinstance(value, str):
        return value.splitlines() or [""]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [f"{n}. {item}" for n, item in enumerate(value, 1)]
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True).splitlines()


def line_diff(old: Any, new: Any) -> list[tuple[str, str]]:
    """(mark, line) rows: removed lines marked `-` (on red), added `+` (on green), the rest as context."""
    before, after = _lines(old), _lines(new)
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [(" ", line) for line in before[i1:i2]]
            continue
        rows += [("-", line) for line in before[i1:i2]]
        rows += [("+", line) for line in after[j1:j2]]
    return rows


OP_WORDS = {"set": "changed", "add": "added", "remove": "removed"}


def diff_page(view: dict[str, Any], diff: dict[str, Any]) -> dict[str, Any]:
    node_id = view["id"]
    first, last, current = diff["from_revision"], diff["to_revision"], diff["current_revision"]
    changes = [
        {
            "path": str(change.get("path", "")),
            "word": OP_WORDS.get(str(change.get("op")), "changed"),
            "rows": line_diff(change.get("old"), change.get("new")),
        }
        for change in diff.get("changes") or []
    ]
    pages: list[PageLink] = []
    if first > 1:
        pages.append(PageLink(diff_href(node_id, first - 1, first), "prev", "Previous change"))
    if last < current:
        pages.append(PageLink(diff_href(node_id, last, last + 1), "next", "Next change"))
    return {
        "view": view,
        "first": first,
        "last": last,
        "current": current,
        "changes": changes,
        "pages": pages,
        "history_href": history_href(node_id),
    }
