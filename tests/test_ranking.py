"""Ranking's per-field BM25 shares, against a plain computation from the candidate's own text.

`CandidateText.counts` packs a term's three field counts into one int and `_Query.fields` reads
them in one pass; this holds them to the documented formula (b = 0, k1 = 1.2, a count past 20
saturates), counts past the cap included.
"""

from __future__ import annotations

import pytest

from knowmesh_mcp.search.ranking import QueryTerms, _Query
from knowmesh_mcp.store import CandidateText


def tf(count: int) -> float:
    count = min(count, 20)
    return count * 2.2 / (count + 1.2)


def text(title: str, signature: str, article: str) -> CandidateText:
    return CandidateText(pk=1, id="python-x", ecosystem="python", title=title, signature=signature, article=article,
                         templates="", template_terms="", slug_terms="", value_terms="", value_shapes="")


TERMS = QueryTerms(first=("modul", "request"), decisive=("modul", "request", "import"), context=("pip", "venv"),
                   words=(), values=("request",))
IDF = {"modul": 1.5, "request": 4.0, "import": 0.7, "pip": 2.2, "venv": 3.1}


@pytest.mark.parametrize("candidate", [
    text("modul request", "modul import import", "pip pip venv modul"),
    text("other words", "", "request " * 45 + "venv " * 19),  # past the cap, and just under it
    text("", "import", ""),
    text("nothing here", "at all", "either"),
])
def test_field_shares_are_bm25_per_field_as_a_share_of_each_term_once(candidate: CandidateText) -> None:
    query = _Query(True, ("no module named <*>",), TERMS, IDF)
    heads, held, shares, flat = query.fields(candidate.counts)

    fields = [candidate.title.split(), candidate.signature.split(), candidate.article.split()]
    groups = [set(TERMS.first), set(TERMS.decisive), set(TERMS.context) - set(TERMS.decisive), set(TERMS.words)]
    expected = [sum(IDF[t] * tf(words.count(t)) for t in group) / (sum(IDF[t] for t in group) or 1.0)
                for words in fields for group in groups]
    assert [share for field in shares for share in field] == pytest.approx(expected, abs=1e-12)
    assert heads == {t for t in IDF if t in fields[0] or t in fields[1]}
    assert held == {t for t in IDF if any(t in words for words in fields)}
    asked = groups[1] | groups[2]
    together = [t for words in fields for t in words]
    assert flat == pytest.approx(sum(IDF[t] * tf(together.count(t)) for t in asked) / sum(IDF[t] for t in asked))
