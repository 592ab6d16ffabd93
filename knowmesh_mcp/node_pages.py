"""One node for people: its article (`/nodes/{id}`), its history (`/nodes/{id}/history`) and the
diff between two revisions (`/nodes/{id}/diff?from=N&to=M`).

Everything shown is the node's text or its evidence, so everything is escaped. Two words
a reader meets side by side mean different things and come from different places: `status`
is editorial (maintainers set it) and `answer state` is evidence (outcome reports derive it),
so the page says what each one means in a line each instead of leaving `verified` beside
`draft` to look like a contradiction.
"""

from __future__ import annotations

import difflib
import json
from typing import Any
from urllib.parse import quote

from .evidence_words import AnswerEvidence
from .page_shell import (
    TRUST_NOTE,
    badge,
    bullet_list,
    code_block,
    e,
    ecosystem_href,
    heading,
    inline,
    node_href,
    plural,
    prose,
    short_time,
    state_badges,
)

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


def history_href(node_id: str) -> str:
    return node_href(node_id) + "/history"


def diff_href(node_id: str, first: int, last: int) -> str:
    return f"{node_href(node_id)}/diff?from={int(first)}&to={int(last)}"


def breadcrumb(node_id: str, ecosystem: str, *extra: str) -> str:
    trail = ['<a href="/nodes">All nodes</a>', f'<a href="{e(ecosystem_href(ecosystem))}">{e(ecosystem)}</a>', *extra]
    return f'<p class="meta">{" › ".join(trail)}</p>'


def states_lines(status: str, has_answer: bool, answer_state: str | None) -> str:
    """`status` and `answer state`, one line each, so the two never read as a contradiction."""
    status_line = STATUS_MEANINGS.get(status, "set by maintainers.")
    if has_answer:
        state = answer_state if answer_state in ANSWER_MEANINGS else "draft"
        answer_line = f"<strong>Answer state: {e(state)}</strong> — {e(ANSWER_MEANINGS[state])}"
    else:
        answer_line = "<strong>Answer state: none</strong> — no answer yet: this problem is open for anyone to answer."
    return (f'<ul class="states"><li><strong>Status: {e(status)}</strong> — {e(status_line)}</li>'
            f"<li>{answer_line}</li></ul>")


# -- the article ----------------------------------------------------------------------------


def scope_text(solution: dict[str, Any], node_environment: list[str]) -> str:
    if solution.get("env"):
        return ", ".join(f"<code>{e(tag)}</code>" for tag in solution["env"])
    if node_environment:
        tags = ", ".join(f"<code>{e(tag)}</code>" for tag in node_environment)
        return f'{tags} <span class="meta">(the node\'s environment)</span>'
    return "every environment"


def served_evidence(solution: dict[str, Any]) -> list[str]:
    """The read's own counts (all environments together), for a node with too many reports to read."""
    evidence = solution.get("evidence")
    if not evidence:
        return []
    solved, failed = evidence.get("solved_agents", 0), evidence.get("failed_agents", 0)
    text = ", ".join(part for part in (f"worked for {plural(solved, 'agent')}" if solved else "",
                                       f"failed for {plural(failed, 'agent')}" if failed else "") if part)
    return [f"{text} (all environments together)"] if text else []


def evidence_text(solution: dict[str, Any], words: AnswerEvidence | None) -> str:
    """The answer's state, then what the reports say about it, one sentence per environment."""
    state = f"Answer state: {badge(solution.get('answer_state') or 'draft')}"
    lines = words.lines if words else served_evidence(solution)
    notes = []
    if words and words.earlier:
        notes.append(f"{plural(words.earlier, 'report')} on earlier revisions of this answer (they do not count for this one)")
    if words and words.uncounted:
        notes.append(f"{plural(words.uncounted, 'report')} from agents without a token, kept but not counted")
    if not lines:
        first = "No agent has reported running this revision of the answer yet."
        extra = "".join(f"<br><span class=\"meta\">{e(note.capitalize())}.</span>" for note in notes)
        return f"<p>{state} · {first}{extra}</p>"
    items = "".join(f"<li>{e(line[:1].upper() + line[1:])}.</li>" for line in lines)
    items += "".join(f'<li class="meta">{e(note.capitalize())}.</li>' for note in notes)
    return f'<p>{state}</p>\n<ul class="evidence">{items}</ul>'


def solution_section(solution: dict[str, Any], node_environment: list[str], words: AnswerEvidence | None) -> str:
    title = solution.get("title") or solution["id"]
    out = [
        f'<section class="answer" id="answer-{e(solution["id"])}">',
        f'<h3>{e(title)}<a class="anchor" href="#answer-{e(solution["id"])}" aria-label="Link to this answer">#</a></h3>',
        f'<p class="meta"><code>{e(solution["id"])}</code> · revision {e(solution.get("revision", 1))}</p>',
    ]
    if solution.get("applies_to"):
        out.append(f"<p>Applies to: {inline(solution['applies_to'])}</p>")
    out.append(f"<p>Environment: {scope_text(solution, node_environment)}</p>")
    out.append(evidence_text(solution, words))
    steps = "".join(f"<li>{code_block(step)}</li>" for step in solution["fix"])
    out.append(f'<h4>Fix</h4>\n<ol class="steps">{steps}</ol>')
    verify = solution["verify"]
    out.append(f"<h4>Verify</h4>\n{code_block(verify['command'])}")
    if verify.get("expected"):
        out.append(f"<p>Expected: <code>{e(verify['expected'])}</code></p>")
    notes = solution.get("notes")
    if notes:
        out.append("<h4>Notes</h4>\n" + bullet_list(notes if isinstance(notes, list) else [notes]))
    out.append("</section>")
    return "\n".join(out)


def answers_section(view: dict[str, Any], environment: list[str], evidence: dict[str, AnswerEvidence]) -> str:
    solutions = view["content"].get("solutions", [])
    if not solutions:
        return (heading(2, "Answers", "answers") + "\n<p>No answer yet: this problem is open. If you solve it, add the "
                'answer (see <a href="/docs/contribute">contribute</a>); if an approach failed, record it as a failed '
                "attempt.</p>")
    label = "Answer" if len(solutions) == 1 else f"Answers ({len(solutions)})"
    intro = ('<p class="meta">One answer per environment: pick the one whose environment matches yours, '
             "run its fix steps in order, then its verify command.</p>") if len(solutions) > 1 else ""
    return "\n".join([heading(2, label, "answers"), intro,
                      *(solution_section(s, environment, evidence.get(s["id"])) for s in solutions)])


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def stats_section(stats: dict[str, Any] | None) -> str:
    if not stats:
        return ""
    title = heading(2, "Outcome reports", "outcome-reports")
    if not stats.get("sample_size"):
        return f"{title}\n<p>No outcome reports yet: nobody has run these answers and reported back.</p>"
    confidence = " (low confidence)" if stats.get("low_confidence") else ""
    stale = " · stale: not verified within a year" if stats.get("stale") else ""
    return (
        f"{title}\n"
        f"<p>{e(stats['sample_size'])} report(s) on the current answers · solved {e(_number(stats.get('solved')))} · "
        f"failed {e(_number(stats.get('failed')))} <span class=\"meta\">(weighted by age)</span> · "
        f"success score {e(_number(stats.get('success_score')))}{e(confidence)} · "
        f"last verified {short_time(stats.get('last_verified'))}{e(stale)}</p>"
    )


def environment_text(environment: Any) -> str:
    if not isinstance(environment, dict):
        return e(environment)
    parts = []
    for key, value in environment.items():
        if value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        parts.append(f"{key}: {value}")
    return e("; ".join(parts) or "unspecified")


def who_acted(agent: dict[str, Any] | None, unnamed: str) -> str:
    """An author or reporter as a page names them: an id nobody proved (no token) says so, or a
    claimed `mia` would read exactly like the maintainer who holds mia's token."""
    if not agent or not agent.get("id"):
        return e(unnamed)
    who = e(agent["id"]) + (f" ({e(agent['model'])})" if agent.get("model") else "")
    if agent.get("proven") is False:
        who += ' <span class="meta" title="no token proved this id">(claimed, unproven)</span>'
    return who


def shared_failure(failure: dict[str, Any]) -> str:
    archived = (f' {badge("draft", "archived")} <span class="meta">(an answer now covers this environment)</span>'
                if failure.get("archived") else "")
    steps = "".join(f"<li>{code_block(step)}</li>" for step in failure.get("steps", []))
    return (
        f"<li><p><strong>{e(failure.get('summary', ''))}</strong>{archived}</p>"
        f"<p class=\"meta\">{environment_text(failure.get('environment'))} · {short_time(failure.get('created_at'))}"
        f" · {who_acted(failure.get('agent'), 'anonymous')}</p>"
        f'<ol class="steps">{steps}</ol><p>Why it failed: <span class="prose">{inline(failure.get("reason", ""))}</span></p></li>'
    )


def failures_section(content: dict[str, Any], shared: list[dict[str, Any]], has_answer: bool) -> str:
    out = [heading(2, "Failed attempts", "failed-attempts")]
    recorded = content.get("failed_attempts") or []
    if recorded:
        if has_answer:
            out.append('<p class="meta">Dead ends recorded before the answer; kept for reference.</p>')
        out.append(bullet_list(recorded))
    if shared:
        out.append(heading(3, "Reported by agents", "reported-by-agents"))
        out.append('<ul class="nodes">' + "\n".join(shared_failure(f) for f in shared) + "</ul>")
    if not recorded and not shared:
        out.append("<p>None recorded.</p>")
    return "\n".join(out)


def revision_entry(node_id: str, revision: dict[str, Any]) -> str:
    kind = revision.get("kind") or "edit"
    number = revision["revision"]
    changed = [change["path"] for change in revision.get("changes") or []  # a create changes the whole document
               if isinstance(change, dict) and isinstance(change.get("path"), str) and change["path"]]
    fields = ""
    if changed:
        shown = ", ".join(f"<code>{e(path)}</code>" for path in changed[:6])
        more = f" and {len(changed) - 6} more" if len(changed) > 6 else ""
        fields = f'<br><span class="meta">Changed: {shown}{e(more)}</span>'
    diff = (f' · <a href="{e(diff_href(node_id, number - 1, number))}">what changed</a>'
            if isinstance(number, int) and number > 1 else "")
    return (f'<li id="revision-{e(number)}"><strong>Revision {e(number)}</strong> · {short_time(revision.get("created_at"))} · '
            f"{who_acted(revision.get('agent'), 'unknown agent')} · <span class=\"meta\">{e(kind)}</span>{diff}<br>"
            f'<span class="prose">{inline(revision.get("summary") or "(no summary)")}</span>{fields}</li>')


def revisions_list(node_id: str, history: dict[str, Any]) -> str:
    revisions = sorted(history.get("revisions", []), key=lambda r: r["revision"], reverse=True)
    if not revisions:
        return "<p>No revisions.</p>"
    return '<ul class="nodes">' + "\n".join(revision_entry(node_id, r) for r in revisions) + "</ul>"


def history_section(node_id: str, history: dict[str, Any]) -> str:
    link = f'<p><a href="{e(history_href(node_id))}">Full history and diffs</a></p>'
    return "\n".join([heading(2, "History", "history"), revisions_list(node_id, history), link])


def node_body(view: dict[str, Any], history: dict[str, Any], shared: list[dict[str, Any]],
              evidence: dict[str, AnswerEvidence]) -> str:
    node_id = view["id"]
    content = view["content"]
    signature = view["signature"]
    environment = signature.get("environment", [])
    json_path = "/v1/nodes/" + quote(node_id, safe="/")
    out = [
        breadcrumb(node_id, view["ecosystem"]),
        f"<h1>{e(view['title'])}</h1>",
        f"<p>{state_badges(view['has_answer'], view.get('answer_state'), view['status'])}</p>",
        states_lines(view["status"], view["has_answer"], view.get("answer_state")),
        (f'<p class="meta"><code>{e(node_id)}</code> · revision {e(view["revision"])} · '
         f'updated {short_time(view.get("updated_at"))}</p>'),
        (f'<p class="meta">Also as <a href="{e(json_path)}">JSON</a> · <a href="{e(json_path)}.md">Markdown</a> · '
         f'<a href="{e(history_href(node_id))}">history</a></p>'),
        f'<p class="note">{e(TRUST_NOTE)}</p>',
        heading(2, "Error", "error"), code_block(signature["error"]),
    ]
    if signature.get("aliases"):
        out += ["<p>Also seen as:</p>", "".join(code_block(alias) for alias in signature["aliases"])]
    if environment:
        out.append("<p>Environment: " + ", ".join(f"<code>{e(tag)}</code>" for tag in environment) + "</p>")
    for key, label, anchor_id in (("symptom", "Symptom", "symptom"), ("context", "Context", "context"),
                                  ("root_cause", "Root cause", "root-cause")):
        if content.get(key):
            out += [heading(2, label, anchor_id), prose(content[key])]
    out.append(answers_section(view, environment, evidence))
    out.append(stats_section(view.get("stats")))
    if content.get("alternatives"):
        out += [heading(2, "Alternatives", "alternatives"), '<p class="meta">Reference only, not instructions.</p>',
                bullet_list(content["alternatives"])]
    out.append(failures_section(content, shared, view["has_answer"]))
    if content.get("boundaries"):
        out += [heading(2, "Boundaries", "boundaries"), bullet_list(content["boundaries"])]
    out.append(history_section(node_id, history))
    return "\n".join(part for part in out if part)


def node_description(view: dict[str, Any]) -> str:
    """The meta description of a node page: what goes wrong, then whether an answer is known."""
    answer = "An answer with fix and verify steps." if view["has_answer"] else "Open problem: no answer yet."
    return f"{view['content'].get('symptom') or view['title']} {answer}"


# -- history and diff -------------------------------------------------------------------------


def compare_form(node_id: str, first: int, last: int, current: int) -> str:
    """Two revision numbers and a button: a plain GET form to the diff page, no script."""
    return (f'<form class="row" method="get" action="{e(node_href(node_id))}/diff">'
            f'<label>From revision <input name="from" type="number" min="1" max="{current}" value="{first}"></label>'
            f'<label>To revision <input name="to" type="number" min="1" max="{current}" value="{last}"></label>'
            '<button type="submit">Compare</button></form>')


def history_body(view: dict[str, Any], history: dict[str, Any]) -> str:
    node_id = view["id"]
    current = history["current_revision"]
    out = [
        breadcrumb(node_id, view["ecosystem"], f'<a href="{e(node_href(node_id))}">{e(node_id)}</a>'),
        f"<h1>History of {e(view['title'])}</h1>",
        (f"<p>{plural(current, 'revision')}, newest first. Every edit publishes at once as an immutable revision; "
         "an undo is a new revision too.</p>"),
        f'<p class="note">{e(TRUST_NOTE)}</p>',
    ]
    if current > 1:
        out += [heading(2, "Compare two revisions", "compare"), compare_form(node_id, current - 1, current, current)]
    out += [heading(2, "Revisions", "revisions"), revisions_list(node_id, history),
            f'<p class="meta">Also as <a href="/v1/nodes/{e(quote(node_id, safe="/"))}/article/revisions">JSON</a></p>']
    return "\n".join(out)


def _lines(value: Any) -> list[str]:
    """A field's value as lines to compare: text by line, a list of texts by item, anything else as JSON."""
    if value is None:
        return []
    if isinstance(value, str):
        return value.splitlines() or [""]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [f"{n}. {item}" for n, item in enumerate(value, 1)]
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True).splitlines()


def line_diff(old: Any, new: Any) -> str:
    """Removed lines marked `-` on red, added `+` on green, the rest as context; all escaped."""
    before, after = _lines(old), _lines(new)
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [f"<span>  {e(line)}</span>" for line in before[i1:i2]]
            continue
        rows += [f'<span class="del">- {e(line)}</span>' for line in before[i1:i2]]
        rows += [f'<span class="add">+ {e(line)}</span>' for line in after[j1:j2]]
    return f'<pre class="diff"><code>{"".join(rows)}</code></pre>'


OP_WORDS = {"set": "changed", "add": "added", "remove": "removed"}


def diff_body(view: dict[str, Any], diff: dict[str, Any]) -> str:
    node_id = view["id"]
    first, last, current = diff["from_revision"], diff["to_revision"], diff["current_revision"]
    changes = diff.get("changes") or []
    out = [
        breadcrumb(node_id, view["ecosystem"], f'<a href="{e(node_href(node_id))}">{e(node_id)}</a>',
                   f'<a href="{e(history_href(node_id))}">history</a>'),
        f"<h1>Revision {e(first)} → {e(last)} of {e(view['title'])}</h1>",
        f"<p>{plural(len(changes), 'field')} changed. Removed lines start with <code>-</code>, added ones with "
        "<code>+</code>.</p>",
        f'<p class="note">{e(TRUST_NOTE)}</p>',
        compare_form(node_id, first, last, current),
    ]
    if not changes:
        out.append("<p>The two revisions have the same content.</p>")
    for number, change in enumerate(changes, 1):
        path = str(change.get("path", ""))
        word = OP_WORDS.get(str(change.get("op")), "changed")
        out.append(heading(2, f"<code>{e(path)}</code> {e(word)}", f"change-{number}"))
        out.append(line_diff(change.get("old"), change.get("new")))
    pager = []
    if first > 1:
        pager.append(f'<a href="{e(diff_href(node_id, first - 1, first))}" rel="prev">Previous change</a>')
    if last < current:
        pager.append(f'<a href="{e(diff_href(node_id, last, last + 1))}" rel="next">Next change</a>')
    if pager:
        out.append(f'<nav class="pager">{"".join(pager)}</nav>')
    return "\n".join(out)
