"""Ranking: the one function that scores a search candidate, and the features it reads.

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
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from .analysis import index_terms, query_terms, slug_terms
from .store import CandidateText

WEIGHTS_FILE = Path(__file__).with_name("ranking_weights.json")
FEATURES = (
    "signature_first",  # the whole input or its first decisive line hashes equal to the node's error
    "signature_other",  # only a later decisive line does
    "values_named",  # the node is about its quoted value (its id names it) and the query names it too
    "values_conflict",  # the node is about its value, the query names other values and not that one
    "generic_match",  # the input or its first decisive line hashed equal and the node is not about one value
    "wrapper_match",  # only wrapper lines hashed equal ("did not complete successfully: exit code: 1")
    "slug_missing",  # share of the words of the node's id that the query lacks (what the node is about)
    "first_title",  # BM25 of the first decisive line's terms in the node's title, as a share of the most possible
    "first_signature",  # ... in its signature (error, aliases, environment)
    "first_article",  # ... in its article
    "input_heads",  # BM25 of the whole input's terms in title and signature, as a share of the most possible
    "input_all",  # ... in the whole node (fields weighted as the term channel weighs them)
    "input_best",  # input_all relative to the best candidate of this query
    "flat_best",  # plain BM25 of the whole input over the node as one field, relative to the best candidate
    "template_coverage",  # share of the node's best template's terms the query holds
    "line_coverage",  # share of the first decisive line's terms the node's best template holds
    "template_ratio",  # rapidfuzz ratio (in order) of a decisive line to the node's closest template
    "similarity",  # rapidfuzz token-set similarity of the first line (or the words) to a template (or the title)
    "words_heads",  # prose: BM25 share of its content words in title and signature
    "words_all",  # prose: ... in the whole node
    "ecosystem_named",  # the query names the node's ecosystem or one of its tools ("maven", `npm ERR!`)
    "ecosystem_other",  # the query names other ecosystems and not the node's
    "env_fit",  # the environment score of the node's chosen answer (0.5 when no env is given)
)
# BM25's usual constants (Robertson); lengths are relative to the query's own candidates.
K1, B = 1.2, 0.0  # B: swept 0.75, 0.3, 0 on the dev half (docs/decisions.md, "Ranking"): 0 ranks best
FIELD_WEIGHTS = (10.0, 5.0, 1.0)  # title, signature, article: as the term channel ranks them
NEUTRAL_ENV = 0.5


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


@dataclass
class Candidate:
    """One node a channel found, with what ranking made of it."""

    text: CandidateText
    channels: frozenset[str]
    matched_lines: frozenset[int]  # decisive lines (-1: the whole input) whose hash is the node's
    features: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    match: str = "fuzzy"

    @property
    def pk(self) -> int:
        return self.text.pk


@dataclass(frozen=True)
class Model:
    bias: float
    weights: tuple[float, ...]  # in FEATURES order

    def probability(self, features: dict[str, float]) -> float:
        z = self.bias + sum(w * features[name] for w, name in zip(self.weights, FEATURES))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@lru_cache(maxsize=1)
def models() -> dict[str, Model]:
    """{"output": Model, "prose": Model} from the checked-in weights file."""
    fitted = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    return {kind: Model(float(m["bias"]), tuple(float(m["weights"].get(name, 0.0)) for name in FEATURES))
            for kind, m in fitted["models"].items()}


def score(features: dict[str, float], is_output: bool) -> float:
    """The probability that the candidate described by `features` is the right node."""
    return models()["output" if is_output else "prose"].probability(features)


@lru_cache(maxsize=16384)  # a node's templates are judged again for every query that fetches it
def _template_terms(templates: str) -> tuple[frozenset[str], ...]:
    return tuple(frozenset(query_terms(t, drop_stopwords=False)) for t in templates.split("\n") if t)


@lru_cache(maxsize=16384)
def _value_keys(values: tuple[str, ...]) -> frozenset[str]:
    """The term keys of a node's values that can name what it is about (paths and URLs cannot)."""
    return frozenset(key for value in values if not any(c in value for c in "/\\ ")
                     for key in index_terms(value).split())


@dataclass
class _Fields:
    """A candidate's indexed fields as term counts: title, signature, article."""

    counts: tuple[Counter[str], Counter[str], Counter[str], Counter[str]]  # the last: all three as one
    lengths: tuple[int, int, int, int]

    @classmethod
    def of(cls, text: CandidateText) -> _Fields:
        fields = [Counter(text.title.split()), Counter(text.signature.split()), Counter(text.article.split())]
        fields.append(fields[0] + fields[1] + fields[2])
        return cls(tuple(fields), tuple(c.total() for c in fields))  # type: ignore[arg-type]


def _bm25(terms: tuple[str, ...] | list[str], fields: _Fields, field: int, average: float,
          idf: dict[str, float]) -> float:
    """BM25 of `terms` in one field, as a share of what a field of average length holding each once scores."""
    most = sum(idf[t] for t in terms)
    if not most:
        return 0.0
    counts = fields.counts[field]
    norm = K1 * (1 - B + B * fields.lengths[field] / average)
    got = sum(idf[t] * c * (K1 + 1) / (c + norm) for t in terms if (c := counts.get(t)))
    return min(got / most, 2.0)


def _weighted(terms: tuple[str, ...] | list[str], fields: _Fields, averages: list[float], idf: dict[str, float],
              which: tuple[int, ...]) -> float:
    total = sum(FIELD_WEIGHTS[f] for f in which)
    return sum(FIELD_WEIGHTS[f] * _bm25(terms, fields, f, averages[f], idf) for f in which) / total


def features_of(candidate: Candidate, fields: _Fields, averages: list[float], is_output: bool, mains: tuple[str, ...],
                terms: QueryTerms, idf: dict[str, float], everything: set[str]) -> dict[str, float]:
    """The features of one candidate (env_fit neutral; `rescore` sets it once the answer is chosen)."""
    text = candidate.text
    slug = slug_terms(text.id)
    specific = _value_keys(tuple(text.quoted_values)) & slug  # a generic node's values are examples
    first_line = candidate.matched_lines & {-1, 0}
    templates = _template_terms(text.templates)
    first = set(terms.first)
    asked = [*terms.decisive, *terms.context]
    if is_output:
        similarity = max((fuzz.token_set_ratio(mains[0], t) for t in text.templates.split("\n")), default=0.0)
    else:
        similarity = fuzz.token_set_ratio(" ".join(terms.words), text.title)
    return {
        "signature_first": 1.0 if first_line else 0.0,
        "signature_other": 1.0 if candidate.matched_lines and not first_line else 0.0,
        "values_named": 1.0 if specific and specific <= everything else 0.0,
        "values_conflict": 1.0 if specific and terms.values and not specific & everything else 0.0,
        "generic_match": 1.0 if first_line and not specific else 0.0,
        "wrapper_match": 1.0 if candidate.matched_lines and candidate.matched_lines <= terms.wrappers else 0.0,
        "slug_missing": len(slug - everything) / len(slug) if slug else 0.0,
        "first_title": _bm25(terms.first, fields, 0, averages[0], idf),
        "first_signature": _bm25(terms.first, fields, 1, averages[1], idf),
        "first_article": _bm25(terms.first, fields, 2, averages[2], idf),
        "input_heads": _weighted(asked, fields, averages, idf, (0, 1)),
        "input_all": _weighted(asked, fields, averages, idf, (0, 1, 2)),
        "input_best": 0.0,  # set once every candidate's input_all is known
        "flat_best": _bm25(asked, fields, 3, averages[3], idf),  # made relative below
        "template_coverage": max((len(t & everything) / len(t) for t in templates if t), default=0.0),
        "line_coverage": max((len(first & t) / len(first) for t in templates), default=0.0) if first else 0.0,
        "template_ratio": max((fuzz.ratio(line, t) for line in mains[:3] for t in text.templates.split("\n")),
                              default=0.0) / 100.0 if is_output else 0.0,
        "similarity": similarity / 100.0,
        "words_heads": _weighted(terms.words, fields, averages, idf, (0, 1)),
        "words_all": _weighted(terms.words, fields, averages, idf, (0, 1, 2)),
        "ecosystem_named": 1.0 if text.ecosystem in terms.ecosystems else 0.0,
        "ecosystem_other": 1.0 if terms.ecosystems and text.ecosystem not in terms.ecosystems else 0.0,
        "env_fit": NEUTRAL_ENV,
    }


def _match(candidate: Candidate, is_output: bool, terms: QueryTerms) -> str:
    """The strongest evidence, named as the spec's tiers.

    `signature`: a hash was equal; `all_terms`: the node's title and signature hold every term
    of the (first decisive) line, stopwords included, as an AND query would; `most_terms`: the
    node holds at least half of that line's terms (of prose: of its content words); `fuzzy`: less.
    """
    if candidate.matched_lines:
        return "signature"
    text = candidate.text
    heads = f" {text.title} {text.signature} "
    held = f"{heads}{text.article} "

    def found(asked: tuple[str, ...], within: str) -> int:
        return sum(1 for t in asked if f" {t} " in within)

    if terms.first and found(terms.first, heads) == len(terms.first):
        return "all_terms"
    asked = terms.first if is_output else terms.words
    if asked and 2 * found(asked, held) >= len(asked):
        return "most_terms"
    return "fuzzy"


def rank(candidates: list[Candidate], is_output: bool, mains: tuple[str, ...],
         terms: QueryTerms, frequencies: dict[str, int], total: int) -> list[Candidate]:
    """Score every candidate, drop the prose non-results, best first.

    Prose keeps the spec's rule: a node holding fewer than half of the content words is not a
    result (unless a line of it hashed equal). Tool output is ranked, never gated.
    """
    asked = set(terms.decisive) | set(terms.context) | set(terms.words)
    rarest = math.log(1 + (total + 0.5) / 0.5)
    idf = {t: math.log(1 + (total - frequencies[t] + 0.5) / (frequencies[t] + 0.5)) if t in frequencies else rarest
           for t in asked | set(terms.first)}
    kept = []
    for candidate in candidates:
        candidate.match = _match(candidate, is_output, terms)
        if is_output or candidate.match != "fuzzy":
            kept.append(candidate)
    fields = [_Fields.of(c.text) for c in kept]
    averages = [max(sum(f.lengths[i] for f in fields) / len(fields), 1.0) if fields else 1.0 for i in range(4)]
    for candidate, field in zip(kept, fields):
        candidate.features = features_of(candidate, field, averages, is_output, mains, terms, idf, asked)
    best = max((c.features["input_all"] for c in kept), default=0.0)
    flat = max((c.features["flat_best"] for c in kept), default=0.0)
    for candidate in kept:
        candidate.features["input_best"] = candidate.features["input_all"] / best if best else 0.0
        candidate.features["flat_best"] = candidate.features["flat_best"] / flat if flat else 0.0
        candidate.score = score(candidate.features, is_output)
    kept.sort(key=lambda c: (-c.score, c.pk))
    return kept


def rescore(candidate: Candidate, is_output: bool, env_fit: float | None) -> float:
    """The candidate's score once its answer for the caller's environment is known."""
    candidate.features["env_fit"] = NEUTRAL_ENV if env_fit is None else env_fit
    candidate.score = score(candidate.features, is_output)
    return candidate.score


def describe() -> dict[str, Any]:
    """The weights file's own description of how it was fitted (for reports)."""
    return json.loads(WEIGHTS_FILE.read_text(encoding="utf-8")).get("fitted", {})
