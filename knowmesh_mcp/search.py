"""Full-text search over the node index: what is indexed, and safe FTS5 queries.

Node text and queries are untrusted. A MATCH expression is only ever built here, from an
allowlist of token characters with every term double-quoted, so no input can reach FTS5
syntax (operators, column filters, unbalanced quotes).
"""

from __future__ import annotations

import re
from typing import Any

from rapidfuzz import fuzz

from .store import NodeRow, Store

# Unicode letters and digits: the characters FTS5's unicode61 tokenizer keeps in a token.
_TERM = re.compile(r"[^\W_]+", re.UNICODE)
MAX_TERMS = 24
MAX_TERM_LENGTH = 64


def index_text(document: dict[str, Any]) -> tuple[str, str]:
    """The (signature, article) columns of a document's index row."""
    signature = document["signature"]
    content = document["content"]
    signature_text = "\n".join([signature["error"], signature.get("template") or "", *signature.get("aliases", [])])
    parts = [content["symptom"], content["context"], content["root_cause"], *content.get("boundaries", [])]
    for solution in content["solutions"]:
        parts += [solution.get("title") or "", solution.get("applies_to") or "", *solution["fix"],
                  solution["verify"]["command"]]
        notes = solution.get("notes")
        parts += notes if isinstance(notes, list) else [notes or ""]
    return signature_text, "\n".join(part for part in parts if part)


def terms(text: str) -> list[str]:
    """Distinct lowercase terms of `text`, in order, capped in number and length."""
    seen: dict[str, None] = {}
    for match in _TERM.finditer(text.lower()):
        term = match.group(0)[:MAX_TERM_LENGTH]
        if term not in seen:
            seen[term] = None
            if len(seen) == MAX_TERMS:
                break
    return list(seen)


def quote_term(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def any_of(words: list[str]) -> str | None:
    """A MATCH expression true when any term occurs; None when there is nothing to match."""
    return " OR ".join(quote_term(w) for w in words) or None


async def similar_nodes(
    store: Store, document: dict[str, Any], *, limit: int = 3, threshold: float = 60.0
) -> list[dict[str, Any]]:
    """Up to `limit` textually close nodes, advisory only.

    Candidates come from the index, then rapidfuzz ranks them on title and error text.
    Nodes of the same ecosystem always come first, so a weak match in another ecosystem is
    never listed first.
    """
    probe = f"{document['title']} {document['signature']['error']}"
    match = any_of(terms(probe))
    if match is None:
        return []
    hits = await store.search_index(match, 30)
    rows = await store.get_nodes_by_pk([pk for pk, _ in hits])
    scored: list[tuple[bool, float, NodeRow]] = []
    for row in rows:
        if row.id == document["id"]:
            continue
        other = f"{row.title} {row.document['signature']['error']}"
        score = fuzz.token_set_ratio(probe.lower(), other.lower())
        if score >= threshold:
            scored.append((row.ecosystem == document["ecosystem"], score, row))
    scored.sort(key=lambda item: (not item[0], -item[1], item[2].id))
    return [
        {"id": row.id, "title": row.title, "ecosystem": row.ecosystem, "score": round(score / 100, 3),
         "path": f"/v1/nodes/{row.id}", "html_path": f"/nodes/{row.id}"}
        for _, score, row in scored[:limit]
    ]
