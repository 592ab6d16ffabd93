"""Search: what is indexed for a node, and how a query finds and ranks nodes.

Ranking is in tiers, strongest first; each result names the tier that found it:

- `signature`: a normalized form of the query (whole, or one of its decisive lines) hashes
  equal to a node's error, template or alias;
- `all_terms`: every term of the query's normalized decisive line occurs (FTS5 AND);
- `most_terms`: natural language: stopwords dropped, stemmed, at least half of the terms occur;
- `fuzzy`: rapidfuzz similarity of the query's normalized line to a node's template or
  title, above `FUZZY_THRESHOLD` (never scored above 0.45: a hint, not an answer).

Within a tier, BM25 (title and signature weighted above article text) and similarity
order the results. Node text and queries are untrusted: MATCH expressions are only built
by `all_of` / `any_of`, from `analysis` terms (letters and digits only), each double-quoted.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rapidfuzz import fuzz

from .analysis import (
    decisive_lines,
    index_terms,
    looks_like_error,
    query_terms,
    signature_keys,
)
from .normalize import normalize_signature, quoted_values
from .store import RankingRow, SearchRow, Store

SEARCH_INDEX_VERSION = 5
MAX_QUERY_CHARS = 10_000
MAX_AND_TERMS = 24
MAX_OR_TERMS = 12
CANDIDATES = 60
SIGNATURE_CANDIDATES = 60
HEADS_RANK_CAP = 120
PARTIAL_CANDIDATES = 40  # every-term matches with too little of a template, re-judged by coverage  # more every-term matches than this are ordered by similarity alone
RETRIEVAL_BUDGET = 600  # rows the natural-language OR query may match before rarer terms must do
ALL_TERMS_MIN_COVERAGE = 0.6  # below this share of a template's terms, an AND match is only "most terms"
FUZZY_THRESHOLD = 72.0

TIERS = ("signature", "all_terms", "most_terms", "fuzzy")
# Each tier's score band; tiers never overlap, so the score order is the tier order.
BANDS = {"signature": (0.9, 1.0), "all_terms": (0.72, 0.88), "most_terms": (0.15, 0.7), "fuzzy": (0.05, 0.3)}


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def index_row(document: dict[str, Any]) -> SearchRow:
    """The search-index rows of one document."""
    signature = document["signature"]
    content = document["content"]
    hashes: set[tuple[str, str]] = set()
    error_keys = signature_keys(signature["error"])
    hashes.update((digest(key), "error") for key in error_keys)
    template = signature.get("template") or ""
    if template and template not in error_keys:  # a derived template is the normalized error itself
        hashes.update((digest(key), "template") for key in signature_keys(template))
    for alias in signature.get("aliases", []):
        hashes.update((digest(key), "alias") for key in signature_keys(alias))
    parts = [content["symptom"], content["context"], content["root_cause"], *content.get("boundaries", [])]
    for solution in content["solutions"]:
        parts += [solution.get("title") or "", solution.get("applies_to") or "", *solution.get("env", []),
                  *solution["fix"], solution["verify"]["command"]]
        notes = solution.get("notes")
        parts += notes if isinstance(notes, list) else [notes or ""]
    error_lines = decisive_lines(signature["error"]) or [signature["error"]]
    templates = [normalize_signature(error_lines[0])]
    templates += [normalize_signature(alias) for alias in signature.get("aliases", [])]
    return SearchRow(
        title=index_terms(document["title"]),
        signature=index_terms("\n".join([signature["error"], *signature.get("aliases", []),
                                         *signature.get("environment", [])])),
        article=index_terms("\n".join(part for part in parts if part)),
        template="\n".join(dict.fromkeys(t for t in templates if t)),
        signature_hashes=tuple(sorted(hashes)),
    )


def quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def all_of(terms: list[str]) -> str | None:
    return " AND ".join(map(quote, terms)) or None


def any_of(terms: list[str]) -> str | None:
    return " OR ".join(map(quote, terms)) or None


@dataclass
class Hit:
    pk: int
    tier: str
    relevance: float  # 0..1 inside the tier's band
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float:
        low, high = BANDS[self.tier]
        return low + (high - low) * max(0.0, min(1.0, self.relevance))


@dataclass
class QueryPlan:
    """What a raw query is searched as."""

    text: str
    lines: list[str]  # decisive lines, strongest first
    main: str  # normalized strongest line
    signature_hashes: list[str]
    and_terms: list[str]
    words: list[str]  # natural-language terms: stopwords dropped, stemmed
    quoted: list[str]
    error_shaped: bool  # pasted output: its wording should match a template, not just prose

    @classmethod
    def of(cls, text: str) -> QueryPlan:
        text = text[:MAX_QUERY_CHARS]
        lines = decisive_lines(text) or [text.strip()]
        main = normalize_signature(lines[0])
        words_source = text if len(lines) == 1 and "\n" not in text.strip() else "\n".join(lines)
        return cls(
            text=text,
            lines=lines,
            main=main,
            signature_hashes=sorted({digest(key) for key in signature_keys(text)}),
            and_terms=query_terms(main, drop_stopwords=False, limit=MAX_AND_TERMS),
            words=query_terms(words_source, drop_stopwords=True, limit=MAX_OR_TERMS * 2),
            quoted=quoted_values(lines[0]),
            error_shaped=looks_like_error(lines[0]),
        )


def _similarity(plan: QueryPlan, templates: str, title_keys: str) -> float:
    """0..1: how alike the query's normalized line is to one of a node's templates, or its title."""
    best = max((fuzz.token_set_ratio(plan.main, template) for template in templates.split("\n")), default=0.0)
    if plan.words:
        best = max(best, fuzz.token_set_ratio(" ".join(plan.words), title_keys))
    return best / 100.0


def _template_coverage(plan: QueryPlan, templates: str, *, content_words: bool = False) -> float:
    """0..1: the largest share of one template's terms that the query's decisive line contains.

    An AND match whose node says much more than the query (`fatal: authentication failed`
    against `FATAL: peer authentication failed for user`) is a partial match, not the error.
    With `content_words`, stopwords are left out on both sides.
    """
    query = set(plan.and_terms) | set(plan.words) if content_words else set(plan.and_terms)
    best = 0.0
    for terms in _template_terms(templates, content_words):
        if terms:
            best = max(best, len(terms & query) / len(terms))
    return best


@lru_cache(maxsize=16384)  # a node's templates are judged again for every query that fetches it
def _template_terms(templates: str, drop_stopwords: bool) -> tuple[frozenset[str], ...]:
    return tuple(frozenset(query_terms(t, drop_stopwords=drop_stopwords)) for t in templates.split("\n"))


def _value_fit(plan: QueryPlan, quoted: list[str], title_keys: str) -> float:
    """1 when the quoted values match; 0 when the node is about another value; 0.5 otherwise.

    `No module named 'distutils'` is a different problem from `No module named 'flask'`
    when the node's title names distutils; a node whose title names no value is generic.
    """
    if quoted == plan.quoted:
        return 1.0
    asked = {term for value in plan.quoted for term in index_terms(value).split()}
    if asked and any(asked & set(index_terms(value).split()) for value in quoted):
        return 0.9  # `distutils.util` is about `distutils`
    title_words = set(title_keys.split())
    specific = any(set(index_terms(value).split()) & title_words for value in quoted if value.strip())
    return 0.0 if specific else 0.5


def _bm25_share(rank: float, best: float) -> float:
    """bm25 values are negative, lower is better: the share of the best one (1.0 = best)."""
    return rank / best if best < 0 else 1.0


async def find(store: Store, plan: QueryPlan, *, enough: int, ecosystem: str | None = None) -> list[Hit]:
    """Hits of the tiers, best tier per node, best first.

    Tiers run strongest first, and a weaker tier is skipped once the stronger ones found
    `enough` nodes (of `ecosystem`, when one is asked for): it could only add nodes ranked
    below them. Natural-language retrieval is skipped, too, when pasted output matched a
    signature exactly: its words would only bring in nodes that merely share vocabulary.
    """
    hits: dict[int, Hit] = {}
    ecosystems: dict[int, str] = {}

    def add(row: RankingRow, tier: str, relevance: float) -> None:
        hits[row.pk] = Hit(row.pk, tier, relevance)
        ecosystems[row.pk] = row.ecosystem

    def settled() -> bool:
        return sum(1 for pk in hits if ecosystem is None or ecosystems[pk] == ecosystem) >= enough

    signature_rows = await store.signature_candidates(plan.signature_hashes, plan.quoted, SIGNATURE_CANDIDATES)
    for row in signature_rows:
        add(row, "signature", 0.6 * _value_fit(plan, row.quoted_values, row.title_terms)
            + 0.4 * _similarity(plan, row.templates, row.title_terms))
    if settled():
        return _ordered(hits)

    and_match = all_of(plan.and_terms)
    and_rows = [row for row in (await store.every_term_candidates(and_match, CANDIDATES, HEADS_RANK_CAP)
                                if and_match else []) if row.pk not in hits]
    best_and = min((row.rank for row in and_rows), default=0.0)
    partial: list[RankingRow] = []  # every term, but too little of any template: judged below
    for row in and_rows:
        covered = _template_coverage(plan, row.templates)
        if covered >= ALL_TERMS_MIN_COVERAGE:
            add(row, "all_terms", 0.6 * covered + 0.2 * _bm25_share(row.rank, best_and)
                + 0.2 * _similarity(plan, row.templates, row.title_terms))
        else:
            partial.append(row)
    if settled() or not plan.words or (plan.error_shaped and signature_rows):
        return _ordered(hits)

    frequencies = await store.document_frequencies(plan.words)
    total = max(await store.indexed_node_count(), 1)
    retrieving = _retrieval_terms(plan.words, frequencies)
    or_match = any_of(retrieving)
    affordable = sum(frequencies.get(w, 0) for w in retrieving) <= RETRIEVAL_BUDGET
    fetched = [item for item in (await store.any_term_candidates(or_match, CANDIDATES, ranked=affordable)
                                 if or_match else []) if item[0].pk not in hits]
    partial = partial[:PARTIAL_CANDIDATES]
    best_or = fetched[0][0].rank if fetched else 0.0
    texts = await store.indexed_texts([row.pk for row in partial]) if partial else {}
    # (row, share of the best BM25 of the query that fetched it, signature keys, article keys)
    candidates = [(row, _bm25_share(row.rank, best_or), signature, article) for row, signature, article in fetched]
    candidates += [(row, _bm25_share(row.rank, best_and), *texts[row.pk]) for row in partial if row.pk in texts]
    weights = {w: math.log(1 + total / frequencies.get(w, 0.5)) for w in plan.words}
    total_weight = sum(weights.values())
    # Coverage carries natural language; similarity to a template carries pasted output, whose
    # words a wrong node's prose often shares. Calibrated on bench/search_eval.py.
    similarity_weight = 0.65 if plan.error_shaped else 0.35
    for row, share, signature, article in candidates:
        if row.pk in hits:
            continue
        heading = f" {row.title_terms} {signature} "
        body = f" {article} "
        # A term in the title or signature says more about the node than one in its prose.
        found = {w: 1.0 if f" {w} " in heading else 0.6 for w in plan.words if f" {w} " in heading or f" {w} " in body}
        similarity = _similarity(plan, row.templates, row.title_terms)
        if plan.error_shaped:
            # Pasted output should also reproduce the node's own wording (`column` is not `relation`).
            similarity = 0.5 * similarity + 0.5 * _template_coverage(plan, row.templates, content_words=True)
        if 2 * len(found) >= len(plan.words):
            coverage = sum(weights[w] * weight for w, weight in found.items()) / total_weight
            add(row, "most_terms", (0.9 - similarity_weight) * coverage + similarity_weight * similarity + 0.1 * share)
        elif similarity * 100 >= FUZZY_THRESHOLD:
            add(row, "fuzzy", (similarity * 100 - FUZZY_THRESHOLD) / (100 - FUZZY_THRESHOLD))
    return _ordered(hits)


def _retrieval_terms(words: list[str], frequencies: dict[str, int]) -> list[str]:
    """The terms that fetch natural-language candidates: the rarest ones, within a budget.

    A node that holds half the query's terms nearly always holds one of its rarer ones, and
    fetching by common words ("install", "error") would rank tens of thousands of rows.
    """
    present = sorted((w for w in words if w in frequencies), key=lambda w: frequencies[w])
    chosen: list[str] = []
    fetched = 0
    for word in present[:MAX_OR_TERMS]:
        if chosen and fetched + frequencies[word] > RETRIEVAL_BUDGET:
            break
        chosen.append(word)
        fetched += frequencies[word]
    return chosen


def _ordered(hits: dict[int, Hit]) -> list[Hit]:
    return sorted(hits.values(), key=lambda h: (TIERS.index(h.tier), -h.relevance, h.pk))


async def similar_nodes(store: Store, document: dict[str, Any], *, limit: int = 3, threshold: float = 60.0) -> list[dict[str, Any]]:
    """Up to `limit` textually close nodes, advisory only.

    Candidates come from the index, then rapidfuzz ranks them on template and title. Nodes
    of the same ecosystem always come first, so a weak match in another ecosystem is never
    listed first.
    """
    plan = QueryPlan.of(document["signature"]["error"])
    words = query_terms(f"{document['title']}\n{document['signature']['error']}", drop_stopwords=True)
    match = any_of(words[:MAX_OR_TERMS])
    if match is None:
        return []
    title_keys = index_terms(document["title"])
    scored = []
    for row, _, _ in await store.any_term_candidates(match, 30):
        score = max(max(fuzz.token_set_ratio(plan.main, t) for t in row.templates.split("\n")),
                    fuzz.token_set_ratio(title_keys, row.title_terms))
        if score >= threshold:
            scored.append((row.ecosystem != document["ecosystem"], -score, row.pk))
    scored.sort()
    by_pk = {row.pk: row for row in await store.get_nodes_by_pk([pk for _, _, pk in scored[: limit + 1]])}
    similar = []
    for _, negative, pk in scored:
        row = by_pk.get(pk)
        if row is None or row.id == document["id"]:
            continue
        similar.append({"id": row.id, "title": row.title, "ecosystem": row.ecosystem, "score": round(-negative / 100, 3),
                        "path": f"/v1/nodes/{row.id}", "html_path": f"/nodes/{row.id}"})
    return similar[:limit]
