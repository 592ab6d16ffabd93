"""Node documents: every rule of schema.md, all problems reported at once with JSON Pointers."""

from __future__ import annotations

import pytest

from knowmesh_mcp.core.model import InvalidNode, document_version, validate_node


def problems_of(raw) -> dict[str, str]:
    with pytest.raises(InvalidNode) as caught:
        validate_node(raw)
    return {p.field: p.rule for p in caught.value.problems}


def test_valid_document_folds_ecosystem_alias_and_keeps_id_prefix(make_doc):
    document = validate_node(make_doc(id="py/module-not-found-venv", ecosystem="py"))
    assert document.id == "py/module-not-found-venv"
    assert document.ecosystem == "python"


@pytest.mark.parametrize(
    ("prefix", "ecosystem", "canonical"),
    [("js", "javascript", "node"), ("node", "nodejs", "node"), ("ts", "ts", "typescript"), ("golang", "go", "go"),
     ("csharp", "c#", "dotnet"), ("pg", "postgresql", "postgres"), ("bash", "sh", "shell"), ("cxx", "c++", "cpp"),
     ("elixir", "elixir", "elixir")],
)
def test_ecosystem_aliases(make_doc, prefix, ecosystem, canonical):
    assert validate_node(make_doc(id=f"{prefix}/x", ecosystem=ecosystem)).ecosystem == canonical


def test_template_is_derived_when_omitted(make_doc):
    document = validate_node(make_doc())
    assert document.signature.template == "modulenotfounderror: no module named '<*>'"


def test_optional_sections_are_kept(make_doc):
    stored = validate_node(make_doc()).snapshot().body
    assert stored["content"]["alternatives"] == ["pip install --user requests"]
    assert stored["content"]["boundaries"] == ["Not for editable installs broken by a moved project."]
    assert stored["content"]["solutions"][0]["notes"].startswith("Homebrew")


def test_empty_solutions_are_an_open_problem(make_doc):
    raw = make_doc()
    raw["content"]["solutions"] = []
    assert validate_node(raw).content.solutions == []


@pytest.mark.parametrize(
    "node_id",
    ["Python/x", "python/X", "python//x", "python/x/y", "/python/x", "python/..", "../x", "python/.hidden",
     "python", "python/x.md", "python/ü", "python/a b", "", "python/" + "a" * 300],
)
def test_bad_ids_are_rejected(make_doc, node_id):
    assert "/id" in problems_of(make_doc(id=node_id))


def test_id_prefix_must_match_ecosystem(make_doc):
    assert problems_of(make_doc(id="go/x", ecosystem="python")) == {"/id": "ecosystem_mismatch"}


def test_all_problems_at_once_with_json_pointers(make_doc):
    raw = make_doc(title="", extra_field=1)
    raw["content"]["fix"] = ["legacy"]
    raw["content"]["verify"] = {"command": "true"}
    del raw["content"]["root_cause"]
    raw["content"]["solutions"][1]["id"] = "venv-macos"
    raw["content"]["solutions"][0]["fix"] = []
    raw["content"]["solutions"][0]["verify"] = {}
    del raw["content"]["failed_attempts"]
    assert problems_of(raw) == {
        "/title": "string_too_short",
        "/extra_field": "extra_forbidden",
        "/content/fix": "legacy_field",
        "/content/verify": "legacy_field",
        "/content/root_cause": "missing",
        "/content/solutions/1/id": "duplicate_solution_id",
        "/content/solutions/0/fix": "too_short",
        "/content/solutions/0/verify/command": "missing",
        "/content/failed_attempts": "missing",
    }


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(title=42), "/title"),
        (lambda d: d.update(title="   "), "/title"),
        (lambda d: d["signature"].update(error=["x"]), "/signature/error"),
        (lambda d: d["content"].update(solutions={}), "/content/solutions"),
        (lambda d: d["content"]["solutions"][0].update(id="Bad Id"), "/content/solutions/0/id"),
        (lambda d: d["content"]["solutions"][0].update(fix="one string"), "/content/solutions/0/fix"),
        (lambda d: d["content"]["solutions"][0].update(surprise=True), "/content/solutions/0/surprise"),
        (lambda d: d.update(status="approved"), "/status"),
        (lambda d: d.update(license="MIT"), "/license"),
        (lambda d: d.pop("signature"), "/signature"),
    ],
)
def test_wrong_types_and_unknown_fields(make_doc, mutate, field):
    raw = make_doc()
    mutate(raw)
    assert field in problems_of(raw)


def test_non_object_is_rejected():
    assert problems_of([1, 2]) == {"/": "type"}


def test_version_is_content_hash_and_ignores_status(make_doc):
    first = validate_node(make_doc())
    draft = validate_node(make_doc(status="draft"))
    verified = validate_node(make_doc(status="verified"))
    assert document_version(first) == document_version(draft) == document_version(verified)
    assert document_version(first).startswith("sha256:") and len(document_version(first)) == 71
    changed = make_doc()
    changed["content"]["symptom"] += " Changed."
    assert document_version(validate_node(changed)) != document_version(first)


def test_version_matches_canonical_json_definition(make_doc):
    import hashlib
    import json

    document = validate_node(make_doc())
    snapshot = document.snapshot()
    body = snapshot.body
    assert set(body) == {"id", "ecosystem", "title", "license", "signature", "content"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert snapshot.body_json == canonical  # the stored bytes are the hashed bytes
    assert snapshot.version == document_version(document)
    assert document_version(document) == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _with(document, path, value):
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


@pytest.mark.parametrize(("path", "value", "field", "message"), [
    (("title",), "", "/title", "must not be empty"),
    (("title",), {"a": 1}, "/title", "must be a string"),
    (("content", "solutions", 0, "fix"), "rm -rf", "/content/solutions/0/fix", "must be an array"),
    (("content", "solutions", 0, "fix"), [], "/content/solutions/0/fix", "must have at least 1 item (it has 0)"),
    (("signature", "aliases"), ["x"] * 101, "/signature/aliases", "must have at most 100 items (it has 101)"),
    (("surprise",), 1, "/surprise", "is not a known field here"),
])
def test_problems_read_as_plain_words(make_doc, path, value, field, message):
    """A problem's message is our wording, after the field it names, not pydantic's ("List should have
    at most 100 items after validation, not 101")."""
    with pytest.raises(InvalidNode) as caught:
        validate_node(_with(make_doc(), path, value))
    messages = {p.field: p.message for p in caught.value.problems}
    assert messages.get(field) == message, messages
    assert f"{field}: {message}" in str(caught.value)


def test_a_missing_field_is_required(make_doc):
    document = make_doc()
    del document["content"]["symptom"]
    with pytest.raises(InvalidNode) as caught:
        validate_node(document)
    assert [(p.field, p.rule, p.message) for p in caught.value.problems] == [("/content/symptom", "missing", "is required")]
