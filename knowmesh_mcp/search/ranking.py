"""Ranking: the one order of search candidates, the function that scores them, and the features it reads.

The order has the spec's tier first: an exact match (the whole input or its first decisive line
is the node's error or one of its aliases, quoted values included) ranks above every candidate
that is not exact (`Candidate.rank_value`); the score orders candidates within a tier.

Each candidate a search channel found is described by a few features in 0..1 (did a decisive
line hash equal, do the specific values agree, how much of the query's information each
field holds, how much of the node's template the query covers, how alike they read, how well
the environment fits), and `score` turns them into the probability that the candidate is the
right node: a logistic model whose weights `bench/fit_ranking.py` fits on the development half
of the evaluation and writes to `ranking_weights.json`. Pasted tool output and prose are
scored by two weight sets of the same function: in output a missing word is a different
error, in a sentence it is a synonym. Because the model is fitted to be calibrated, 0.5 means
"as likely right as wrong", whatever channel or tier found the node.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from operator import mul
from pathlib import Path
from typing import Any, NamedTuple

from rapidfuzz import fuzz

from knowmesh_mcp.core.rows import ARTICLE_SHIFT, COUNT_CAP, FIELD_MASK, SIGNATURE_SHIFT, CandidateText

WEIGHTS_FILE = Path(__file__).with_name("ranking_weights.json")
FEATURES = (
    "signature_first",  # the whole input or its first decisive line hashes equal to the node's error
    "signature_cause",  # a later decisive line that names a cause (not a wrapper) does
    "values_named",  # the node is about its quoted value (its id names it) and the query names it too
    "values_conflict",  # the node is about its value, the query names other values and not that one
    "values_unnamed",  # the node is about its value and the query names none of it (prose often names no value)
    "generic_match",  # the input or its first decisive line hashed equal and the node is not about one value
    "wrapper_match",  # only wrapper lines hashed equal ("did not complete successfully: exit code: 1")
    "value_shape_conflict",  # the first line's values and the node's error's differ in shape (a path, a name)
    "slug_missing",  # share of the words of the node's id that the query lacks (what the node is about)
    "first_title",  # BM25 of the first decisive line's terms in the node's title, as a share of the most possible
    "first_signature",  # ... in its signature (error, aliases, environment)
    "first_article",  # ... in its article
    "decisive_all",  # BM25 of the decisive lines' terms in the node (title and signature weighted above the article)
    "decisive_best",  # decisive_all relative to the best candidate of this query
    "context_all",  # BM25 of the other lines' terms in the node
    "flat_best",  # plain BM25 of the whole input over the node as one text, relative to the best candidate
    "flat_all",  # ... as a share of what holding every term once scores (a lone weak candidate is best, not good)
    "template_coverage",  # share of the node's best template's terms the query holds
    "line_coverage",  # share of the first decisive line's terms the node's best template holds
    "template_ratio",  # rapidfuzz ratio (in order) of a decisive line to the node's closest template
    "similarity",  # rapidfuzz token-set similarity of the first line (or the words) to a template (or the title)
    "words_all",  # prose: BM25 share of its content words in the node (weighted as decisive_all)
    "ecosystem_named",  # the query names the node's ecosystem or one of its tools ("maven", `npm ERR!`)
    "ecosystem_other",  # the query names other ecosystems and not the node's
    "env_fit",  # the environment score of the node's chosen answer (0.5 when no env is given)
)
NEUTRAL_ENV = 0.5
LIKELY = 0.5  # a calibrated score at or above it: the result is more likely right than wrong


class GroupShares(NamedTuple):
    """BM25 of each group of query terms in one field, as a share of what holding each term once scores."""

    first: float  # the first decisive line's terms
    decisive: float  # every decisive line's
    context: float  # the other lines'
    words: float  # the prose words'


class FieldShares(NamedTuple):
    """`GroupShares` in each of a candidate's fields."""

    title: GroupShares
    signature: GroupShares
    article: GroupShares


class TermWeight(NamedTuple):
    """How one query term counts: its idf, the groups it is in (indexes into `_Query`'s groups) and
    whether it is asked (a decisive or context term, which `flat` sums)."""

    idf: float
    groups: tuple[int, ...]
    asked: bool


class HeldTerms(NamedTuple):
    """What `_Query.fields` finds of the query in one candidate."""

    heads: set[str]  # the query terms its title and signature hold
    held: set[str]  # the query terms it holds anywhere
    shares: FieldShares
    flat: float  # the decisive and context terms' BM25 share over the three fields read as one text


class CandidateFeatures(NamedTuple):
    """`features_of`'s answer: the features, and the query terms the candidate's heads and whole text hold."""

    features: dict[str, float]
    heads: set[str]
    held: set[str]


@dataclass(frozen=True)
class QueryTerms:
    """The term keys of a query, by where they come from."""

    first: tuple[str, ...]  # the first decisive line (normalized) and its quoted values
    decisive: tuple[str, ...]  # every decisive line
    context: tuple[str, ...]  # the rest of the input (bounded)
    words: tuple[str, ...]  # prose: content words (stopwords dropped); empty for tool output
    values: tuple[str, ...]  # the quoted values of the decisive lines
    ecosystems: frozenset[str] = frozenset()  # ecosystems the query names (by name or tool)
    wrappers: frozenset[int] = frozenset()  # decisive lines that are wrapper lines
    shapes: str = ""  # "path"/"name" of each value of the first decisive line


@dataclass
class Candidate:
    """One node a channel found, with what ranking made of it."""

    text: CandidateText
    channels: frozenset[str]
    matched_lines: frozenset[int]  # decisive lines (-1: the whole input) whose hash is the node's
    exact: bool = False  # the whole input or its first decisive line is the node's error or an alias, values included
    features: dict[str, float] = field(default_factory=dict)
    score: float = 0.0  # what orders the candidates
    confidence: float = 0.0  # what a result shows: the score, but never lifted across LIKELY by the environment
    match: str = "fuzzy"

    @property
    def pk(self) -> int:
        return self.text.pk

    @property
    def rank_value(self) -> tuple[bool, float]:
        """What orders candidates, lowest first: exact matches first (protocol section 1: "exact
        signatures and aliases rank first"), then by score. `rank` and the service's order after the
        environment's rescore both sort by it."""
        return not self.exact, -self.score


@dataclass(frozen=True)
class Model:
    bias: float
    weights: tuple[float, ...]  # in FEATURES order

    def probability(self, features: dict[str, float]) -> float:
        z = self.bias + sum(map(mul, self.weights, map(features.__getitem__, FEATURES)))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@lru_cache(maxsize=1)
def models() -> dict[str, Model]:
    """{"output": Model, "prose": Model} from the checked-in weights file."""
    fitted = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    return {
        kind: Model(float(m["bias"]), tuple(float(m["weights"].get(name, 0.0)) for name in FEATURES))
        for kind, m in fitted["models"].items()
    }


@lru_cache(maxsize=1)
def min_score() -> float:
    """Candidates scoring below it are not results (fitted: no right answer of the dev half is lost)."""
    return float(json.loads(WEIGHTS_FILE.read_text(encoding="utf-8")).get("min_score", 0.0))


def score(features: dict[str, float], is_output: bool) -> float:
    """The probability that the candidate described by `features` is the right node."""
    return models()["output" if is_output else "prose"].probability(features)


class _Query:
    """What every candidate of one query is measured against, computed once per query."""

    def __init__(self, is_output: bool, mains: tuple[str, ...], terms: QueryTerms, idf: dict[str, float]):
        self.is_output = is_output
        self.mains = mains
        self.terms = terms
        self.first = frozenset(terms.first)
        decisive = frozenset(terms.decisive)
        context = frozenset(terms.context) - decisive
        self.asked = decisive | context
        words = frozenset(terms.words)
        self.everything = self.asked | words
        self.universe = self.everything | self.first
        groups = (self.first, decisive, context, words)  # the order of `fields`' shares
        # Each term's idf, groups (indexes into `groups`) and whether it is asked: one pass sums every group.
        self.of_term = {
            t: TermWeight(idf[t], tuple(i for i, group in enumerate(groups) if t in group), t in self.asked)
            for t in self.universe
        }
        self.totals = [sum(idf[t] for t in group) or 1.0 for group in groups]
        self.asked_total = sum(idf[t] for t in self.asked) or 1.0
        self.phrase = " ".join(terms.words)

    def fields(self, counts: dict[str, int]) -> HeldTerms:
        """One pass over the query terms a candidate holds (`CandidateText.counts`): those of its
        title and signature, all of them, the BM25 in title, signature and article (in that order)
        of the first line's, the decisive lines', the other lines' and the prose words' terms, each
        as a share of what holding each of its terms once scores (b = 0, k1 = 1.2, 1.0 for one
        occurrence), and `flat`: that share of the decisive and context terms for the three fields
        read as one text."""
        # `keys() & set` walks the smaller side; `frozenset.intersection(dict)` walks every key of an article
        held = counts.keys() & self.universe
        sums = [0.0] * 12
        flat = 0.0
        heads: set[str] = set()
        for term in held:
            packed = counts[term]
            title, signature, article = (
                packed & FIELD_MASK,
                (packed >> SIGNATURE_SHIFT) & FIELD_MASK,
                packed >> ARTICLE_SHIFT,
            )
            idf, groups, asked = self.of_term[term]
            if title or signature:
                heads.add(term)
                if title:
                    weight = idf * _SATURATION[title]
                    for i in groups:
                        sums[i] += weight
                if signature:
                    weight = idf * _SATURATION[signature]
                    for i in groups:
                        sums[4 + i] += weight
            if article:
                weight = idf * _SATURATION[article]
                for i in groups:
                    sums[8 + i] += weight
            if asked:
                flat += idf * _SATURATION[title + signature + article]
        totals = self.totals
        shares = FieldShares(
            *(GroupShares(*(sums[4 * field + group] / totals[group] for group in range(4))) for field in range(3))
        )
        return HeldTerms(heads, held, shares, flat / self.asked_total)


# BM25's tf part (k1 = 1.2) by count; past COUNT_CAP occurrences (of the three fields together) it no longer grows.
_SATURATION = [min(count, COUNT_CAP) * 2.2 / (min(count, COUNT_CAP) + 1.2) for count in range(3 * COUNT_CAP + 1)]


def _weighed(title: float, signature: float, article: float) -> float:
    """One group's shares in the three fields as one number, weighed as the term channel weighs fields."""
    return (10 * title + 5 * signature + article) / 16


def features_of(candidate: Candidate, query: _Query) -> CandidateFeatures:
    """The features of one candidate (env_fit neutral until `rescore`), and the query terms its heads and
    whole text hold."""
    text = candidate.text
    terms = query.terms
    heads, held, shares, flat = query.fields(text.counts)
    decisive = _weighed(shares.title.decisive, shares.signature.decisive, shares.article.decisive)
    context = _weighed(shares.title.context, shares.signature.context, shares.article.context)
    words = _weighed(shares.title.words, shares.signature.words, shares.article.words)
    slug, specific, templates, raw_templates = text.derived
    first_line = candidate.matched_lines & {-1, 0}
    everything = query.everything
    if query.is_output:
        similarity = max((fuzz.token_set_ratio(query.mains[0], t) for t in raw_templates), default=0.0)
        ratio = max((fuzz.ratio(line, t) for line in query.mains[:3] for t in raw_templates), default=0.0)
    else:
        similarity, ratio = fuzz.token_set_ratio(query.phrase, text.title), 0.0
    first = query.first
    unnamed = bool(specific) and not specific & everything  # the node is about a value the query does not name
    return CandidateFeatures(
        {
            "signature_first": 1.0 if first_line else 0.0,
            "signature_cause": 1.0 if not first_line and candidate.matched_lines - terms.wrappers else 0.0,
            "values_named": 1.0 if specific and specific <= everything else 0.0,
            "values_conflict": 1.0 if unnamed and terms.values else 0.0,
            "values_unnamed": 1.0 if unnamed else 0.0,
            "generic_match": 1.0 if first_line and not specific else 0.0,
            "wrapper_match": 1.0 if candidate.matched_lines and candidate.matched_lines <= terms.wrappers else 0.0,
            "value_shape_conflict": 1.0
            if terms.shapes and text.value_shapes and terms.shapes != text.value_shapes
            else 0.0,
            "slug_missing": len(slug - everything) / len(slug) if slug else 0.0,
            "first_title": shares.title.first,
            "first_signature": shares.signature.first,
            "first_article": shares.article.first,
            "decisive_all": decisive,
            "decisive_best": 0.0,  # set once every candidate's decisive_all is known
            "context_all": context,
            "flat_best": flat,  # made relative below
            "flat_all": flat,
            "template_coverage": max((len(t & everything) / len(t) for t in templates if t), default=0.0),
            "line_coverage": max((len(first & t) / len(first) for t in templates), default=0.0) if first else 0.0,
            "template_ratio": ratio / 100.0,
            "similarity": similarity / 100.0,
            "words_all": words,
            "ecosystem_named": 1.0 if text.ecosystem in terms.ecosystems else 0.0,
            "ecosystem_other": 1.0 if terms.ecosystems and text.ecosystem not in terms.ecosystems else 0.0,
            "env_fit": NEUTRAL_ENV,
        },
        heads,
        held,
    )


def _match(candidate: Candidate, is_output: bool, terms: QueryTerms, heads: set[str], held: set[str]) -> str:
    """The strongest evidence, named as the spec's tiers.

    `signature`: a hash was equal; `all_terms`: the node's title and signature hold every term
    of the (first decisive) line, stopwords included, as an AND query would; `most_terms`: the
    node holds at least half of that line's terms (of prose: of its content words); `fuzzy`: less.
    """
    if candidate.matched_lines:
        return "signature"
    if terms.first and heads.issuperset(terms.first):
        return "all_terms"
    asked = terms.first if is_output else terms.words
    if asked and 2 * len(held.intersection(asked)) >= len(set(asked)):
        return "most_terms"
    return "fuzzy"


def rank(
    candidates: list[Candidate],
    is_output: bool,
    mains: tuple[str, ...],
    terms: QueryTerms,
    frequencies: dict[str, int],
    total: int,
) -> list[Candidate]:
    """Score every candidate, drop the prose non-results, best first.

    Prose keeps the spec's rule: a node holding fewer than half of the content words is not a
    result (unless a line of it hashed equal). Tool output is ranked, never gated.
    """
    asked = set(terms.decisive) | set(terms.context) | set(terms.words)
    rarest = math.log(1 + (total + 0.5) / 0.5)
    idf = {
        t: math.log(1 + (total - frequencies[t] + 0.5) / (frequencies[t] + 0.5)) if t in frequencies else rarest
        for t in asked | set(terms.first)
    }
    query = _Query(is_output, mains, terms, idf)
    kept = []
    for candidate in candidates:
        candidate.features, heads, held = features_of(candidate, query)
        candidate.match = _match(candidate, is_output, terms, heads, held)
        if is_output or candidate.match != "fuzzy":
            kept.append(candidate)
    best = max((c.features["decisive_all"] for c in kept), default=0.0)
    flat = max((c.features["flat_best"] for c in kept), default=0.0)
    for candidate in kept:
        candidate.features["decisive_best"] = candidate.features["decisive_all"] / best if best else 0.0
        candidate.features["flat_best"] = candidate.features["flat_best"] / flat if flat else 0.0
        candidate.score = score(candidate.features, is_output)
    kept.sort(key=lambda c: (c.rank_value, c.pk))
    return kept


def rescore(candidate: Candidate, is_output: bool, env_fit: float | None) -> float:
    """The candidate's score once its answer for the caller's environment is known, and its confidence.

    The environment chooses the answer within a node and is weak evidence that the node is right:
    it may reorder candidates, but never lift a confidence across LIKELY (`--env node-20,npm`
    lifted a Go node from 0.42 to 0.53 for a JavaScript TypeError, and the weak-match guidance
    went away)."""
    candidate.features["env_fit"] = NEUTRAL_ENV
    without_env = score(candidate.features, is_output)
    candidate.features["env_fit"] = NEUTRAL_ENV if env_fit is None else env_fit
    candidate.score = candidate.confidence = score(candidate.features, is_output)
    if without_env < LIKELY <= candidate.score:
        candidate.confidence = LIKELY - 0.0001  # shown rounded to 4 places: still below LIKELY
    return candidate.score


# The first two candidates scoring within CLOSE of each other are a close call: the first is shown as a
# guess unless a tier put it first. Measured on the dev halves with 10,000 distractors: precision of a
# first result at >= 0.5 starter 0.971 -> 0.980, corpus2 0.951 -> 0.963; right and >= 0.5 0.849 -> 0.846.
CLOSE = 0.2


def settle(first: Candidate, second: Candidate | None, *, tier_decides: bool = False) -> None:
    """Show the first candidate as a guess when the second is about as likely and no tier tells them apart."""
    if (
        second is not None
        and not tier_decides
        and first.exact == second.exact
        and first.score - second.score < CLOSE
        and first.confidence >= LIKELY
    ):
        first.confidence = LIKELY - 0.0001  # shown rounded to 4 places: still below LIKELY


def describe() -> dict[str, Any]:
    """The weights file's own description of how it was fitted (for reports)."""
    return json.loads(WEIGHTS_FILE.read_text(encoding="utf-8")).get("fitted", {})
