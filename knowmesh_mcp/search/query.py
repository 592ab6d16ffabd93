"""Search: what is indexed for a node, what a query is searched as, and where candidates come from.

A query is first read (`QueryPlan.of`): pasted tool output or a sentence, its decisive lines
(`tool_output`), their normalized forms and hashes, and the terms of the lines and of the
whole input. Candidates then come from cheap, bounded channels, unioned:

- `signature`: the hash of the whole input or of a decisive line equals one of a node's
  error, template or alias keys;
- `terms`: BM25 over the full text (title and signature weighted above the article), OR of
  the input's rarest terms within a document-frequency budget;
- `heads`: the same over titles and signatures alone, for the decisive lines' terms, so a
  node whose error is the query is not crowded out by articles that merely mention its words;
- `grams`: the rarest trigrams of the first decisive line against the nodes' templates
  (typos, `module not found` against `ModuleNotFoundError`).

A ranked `terms` or `heads` channel keeps at most FAMILY_CAP nodes of one template, so siblings
that differ only in their value (a user, a package) cannot fill it, and each specific node a term
channel found brings its template's generic node (`family`, at most FAMILY_LIMIT). No channel can
empty the result: every candidate any channel found is scored, by `ranking`, in one place. Retrieval
lives behind `Store` methods a second backend can provide; what is ranked and how is decided
here and in `ranking`, in Python, for every backend alike. Node text and queries are
untrusted: the store quotes every term it puts into MATCH.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any

from rapidfuzz import fuzz

from knowmesh_mcp.core.normalize import normalize_signature, quoted_values
from knowmesh_mcp.search.analysis import (
    PLACEHOLDERS,
    STOPWORDS,
    camel_words,
    index_terms,
    named_ecosystems,
    query_terms,
    signature_keys,
    slug_keys,
    slug_terms,
    term_key,
    tokens,
)
from knowmesh_mcp.search.ranking import Candidate, QueryTerms, rank
from knowmesh_mcp.search.tool_output import WRAPPER, Scan, decisive_lines, scan
from knowmesh_mcp.store import SearchRow, Store, TermQuery

SEARCH_INDEX_VERSION = 15
MAX_QUERY_CHARS = 1 << 20  # the last 1 MiB of a longer input is read (a log's error is near its end)
ECHO_CHARS = 10_000  # the envelope echoes this much of the query
WHOLE_KEY_CHARS = 4000  # a longer input cannot be one node's error: only its lines are hashed
MAX_INPUT_TERMS = 96  # distinct terms of the whole input whose frequencies are looked up
MAX_OR_TERMS = 16  # terms of one BM25 channel query
MAX_GRAMS = 24  # trigrams of the fuzzy channel query
# Channel sizes and frequency budgets: how many rows each channel may read. See docs/decisions.md
# ("Search channels") for the candidate recall they were chosen by.
SIGNATURE_LIMIT = 20
TERMS_LIMIT = 20
HEADS_LIMIT = 12
GRAMS_LIMIT = 8
EVERY_LIMIT = 10
FAMILY_LIMIT = 5  # generic nodes that share a signature hash with a specific node a term channel found
RANK_BUDGET = 1000  # nodes a ranked channel query may match (ranking reads each one)
GRAM_BUDGET = 100  # the same for the trigram channel (100, 300, 1,000 measured: 98.5, 98.4, 98.2 % recall)
EVERY_TERMS = 4  # the "every" channel: the nodes holding all of the query's rarest four content words
FALLBACK_TERMS = 2  # when even the rarest term is common: the nodes holding the rarest two together
# A ranked term channel keeps at most FAMILY_CAP nodes of one template family among its best
# FAMILY_POOL times `limit` matches, so siblings about other values leave room for the generic node.
FAMILY_CAP = 5
FAMILY_POOL = 4


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _without_placeholders(template: str) -> str:
    return " ".join(
        part
        for part in template.replace("<", " <").replace(">", "> ").split()
        if not (part.startswith("<") and part.endswith(">"))
    )


def exact_key(text: str, normalized: str | None = None) -> str:
    """The normalized text (`normalized`, when the caller has it) with its quoted values: two texts
    share it only where their values agree too (`No module named 'requests'` is not `No module
    named 'tests'`, whose template it shares). Empty when the text normalizes to nothing."""
    normalized = normalize_signature(text) if normalized is None else normalized
    return "\0".join([normalized, *(value.lower() for value in quoted_values(text))]) if normalized else ""


def index_row(document: dict[str, Any]) -> SearchRow:
    """The search-index rows of one document."""
    signature = document["signature"]
    content = document["content"]
    hashes: set[tuple[str, str]] = set()
    error_keys = signature_keys(signature["error"])
    hashes.update((digest(key), "error") for key in error_keys | signature_keys(signature["error"], exact_key))
    template = signature.get("template") or ""
    if template and template not in error_keys:  # a derived template is the normalized error itself
        hashes.update((digest(key), "template") for key in signature_keys(template))
    for alias in signature.get("aliases", []):
        hashes.update((digest(key), "alias") for key in signature_keys(alias) | signature_keys(alias, exact_key))
    alternatives = [
        a if isinstance(a, str) else json.dumps(a, ensure_ascii=False) for a in content.get("alternatives", [])
    ]
    parts = [
        content["symptom"],
        content["context"],
        content["root_cause"],
        *content.get("boundaries", []),
        *content.get("failed_attempts", []),
        *alternatives,
    ]
    for solution in content["solutions"]:
        parts += [
            solution.get("title") or "",
            solution.get("applies_to") or "",
            *solution.get("env", []),
            *solution["fix"],
            solution["verify"]["command"],
        ]
        notes = solution.get("notes")
        parts += notes if isinstance(notes, list) else [notes or ""]
    error_lines = decisive_lines(signature["error"]) or [signature["error"]]
    decisive_values = quoted_values(error_lines[0])
    templates = [normalize_signature(error_lines[0])]
    templates += [normalize_signature((decisive_lines(alias) or [alias])[0]) for alias in signature.get("aliases", [])]
    templates = list(dict.fromkeys(t for t in templates if t))
    values = set(_naming_values(quoted_values(signature["error"])))
    # A value that is a function word ('then', 'get', 'on') still names what the node is about.
    slug = slug_terms(document["id"]) | (values & slug_keys(document["id"]))
    return SearchRow(
        title=index_terms(document["title"]),
        signature=index_terms(
            "\n".join([signature["error"], *signature.get("aliases", []), *signature.get("environment", [])])
        ),
        article=index_terms("\n".join(part for part in parts if part)),
        template="\n".join(templates),
        template_terms="\n".join(" ".join(query_terms(t, drop_stopwords=False)) for t in templates),
        slug_terms=" ".join(sorted(slug)),
        value_terms=" ".join(sorted(values)),
        value_shapes=value_shapes(decisive_values),
        grams="\n".join(_without_placeholders(t) for t in templates),
        specific=bool(values & slug),
        signature_hashes=tuple(sorted(hashes)),
    )


# A package named by a path: a Go module (`github.com/spf13/cobra`: its first segment is a domain)
# or a scoped npm package (`@angular/core`). `@/components/x` (a path alias) and `src/index.ts` are paths.
_MODULE_PATH = re.compile(
    r"@[\w.-]+/[\w.-]+|[a-z0-9-]+(?:\.[a-z0-9-]+)+/(?P<after_domain>[\w.~-]+(?:/[\w.~-]+)*)", re.ASCII | re.IGNORECASE
)


# A repository's address, as git prints remotes: a URL (`https://gitlab.com/acme/backend.git`,
# `ssh://git@host/a/b`) or scp-like (`git@github.com:acme/api.git`). The repository names it; the
# host and owner are shared by many.
_REPOSITORY = re.compile(
    r"(?:[a-z][a-z0-9+.-]*://(?:[^@/\s]+@)?[^/\s]+/|(?:[\w.-]+@)?[a-z0-9-]+(?:\.[a-z0-9-]+)+:)"
    r"(?:\S*/)?(?P<repository>[^/\s:]+?)(?:\.git)?/?",
    re.ASCII | re.IGNORECASE,
)


def _is_path(value: str) -> bool:
    return ("/" in value or "\\" in value or value.startswith(".")) and not _MODULE_PATH.fullmatch(value)


def value_shapes(values: list[str] | tuple[str, ...]) -> str:
    """ "path" or "name" for each value: a missing file is not a missing package."""
    return " ".join("path" if _is_path(v) else "name" for v in values)


def _naming_part(value: str) -> str | None:
    """The part of a value that names what a node is about, if any: of a Go module path the part
    after its domain (`github.com` names nothing), of a repository's address the repository; a
    file path, a port and a phrase name nothing."""
    if " " in value:
        return None
    if (repository := _REPOSITORY.fullmatch(value)) and not repository["repository"].isdigit():
        return repository["repository"]
    if module := _MODULE_PATH.fullmatch(value):
        return module["after_domain"] or value
    return None if _is_path(value) else value


def _naming_values(values: list[str]) -> list[str]:
    """The term keys of the values that can name what a node is about (see `_naming_part`)."""
    return [key for value in values if (named := _naming_part(value)) for key in index_terms(named).split()]


def _value_terms(values: list[str]) -> list[str]:
    return [key for value in values for key in index_terms(value).split()]


def _input_terms(lines: list[str], known: list[str]) -> list[str]:
    """Distinct term keys of the input's lines beyond `known`, longest first (longer words are
    rarer), numbers (but three-digit codes) and placeholders left out, at most MAX_INPUT_TERMS in all."""
    seen = set(known)
    found: dict[str, int] = {}
    for line in lines:
        for token in tokens(line):
            if (token.isdigit() and len(token) != 3) or token in PLACEHOLDERS:  # 3 digits: exit and HTTP codes
                continue
            key = term_key(token)
            if key not in seen and key not in found:
                found[key] = len(token)
    room = max(MAX_INPUT_TERMS - len(seen), 0)
    return sorted(found, key=lambda key: -found[key])[:room]


def _grams(line: str) -> list[str]:
    """The distinct trigrams of a normalized line without placeholders (letters or digits in each)."""
    text = _without_placeholders(line)
    grams = dict.fromkeys(text[i : i + 3] for i in range(len(text) - 2))
    return [g for g in grams if sum(c.isalnum() for c in g) >= 2]


@dataclass(frozen=True)
class QueryPlan:
    """What a raw query is searched as."""

    text: str  # the input, as read: its last MAX_QUERY_CHARS characters
    length: int  # the input's length
    scan: Scan
    mains: tuple[str, ...]  # normalized decisive lines, strongest first
    hashes: tuple[tuple[str, int], ...]  # (hash, decisive line it came from; -1 for the whole input)
    exact: frozenset[str]  # those of the hashes that are exact keys of the whole input or its first decisive line
    quoted: tuple[str, ...]  # quoted values of the first decisive line
    terms: QueryTerms

    @property
    def is_output(self) -> bool:
        return self.scan.is_output

    @property
    def lines(self) -> list[str]:
        return self.scan.lines

    @property
    def echo(self) -> str:
        return self.text[:ECHO_CHARS]

    @classmethod
    def of(cls, text: str) -> QueryPlan:
        length = len(text)
        text = text[-MAX_QUERY_CHARS:]
        read = scan(text)
        lines = read.lines or [text.strip()]
        mains = tuple(normalize_signature(line) for line in lines)
        hashes: dict[str, int] = {}
        whole = normalize_signature(text) if len(text) <= WHOLE_KEY_CHARS else ""
        if whole:
            hashes[digest(whole)] = -1
        for position, main in enumerate(mains):
            if main:
                hashes.setdefault(digest(main), position)
        exact = {
            digest(key): position
            for key, position in ((exact_key(text, whole), -1), (exact_key(lines[0], mains[0]), 0))
            if key
        }
        hashes.update(exact)
        quoted = quoted_values(lines[0])
        # A wrapper line ("did not complete successfully") is context when a cause line exists.
        wrapper = {i for i, line in enumerate(read.decisive) if line.rank == WRAPPER}
        causes = [i for i in range(len(lines)) if i not in wrapper or len(wrapper) == len(read.decisive)]
        all_quoted = [value for i in causes for value in quoted_values(lines[i])]
        # Normalized lines (no paths, no numbers), the words of their camel-case names, their values.
        first = query_terms(f"{mains[0]}\n{' '.join(camel_words(lines[0]))}\n{' '.join(quoted)}", drop_stopwords=False)
        decisive = query_terms(
            "\n".join([*(mains[i] for i in causes), *(w for i in causes for w in camel_words(lines[i])), *all_quoted]),
            drop_stopwords=False,
            limit=64,
        )
        context = (
            [*read.nearby, *(lines[i] for i in range(len(lines)) if i not in causes)] if len(read.decisive) else []
        )
        if len(text) <= WHOLE_KEY_CHARS * 4:
            context = [text]  # short input: every line's terms (the prefixes are rare enough to ignore)
        words = () if read.is_output else tuple(query_terms(text[:WHOLE_KEY_CHARS], drop_stopwords=True, limit=32))
        terms = QueryTerms(
            first=tuple(first),
            decisive=tuple(decisive),
            context=tuple(_input_terms(context, decisive)),
            words=words,
            values=tuple(_value_terms(all_quoted)),
            shapes=value_shapes(quoted),
        )
        terms = replace(
            terms,
            ecosystems=named_ecosystems([*terms.decisive, *terms.context, *terms.words]),
            wrappers=frozenset(wrapper),
        )
        return cls(
            text=text,
            length=length,
            scan=read,
            mains=mains,
            hashes=tuple(hashes.items()),
            exact=frozenset(exact),
            quoted=tuple(quoted),
            terms=terms,
        )


def bm25_idf(nodes: int, holding: int) -> float:
    """FTS5's bm25 idf of a term held by `holding` of `nodes` rows (clamped as FTS5 clamps it)."""
    return max(1e-6, math.log((nodes - holding + 0.5) / (holding + 0.5)))


def channel_query(
    channel: str,
    table: str,
    terms: list[str],
    frequencies: dict[str, int],
    limit: int,
    cap: int,
    budget: int = 0,
    *,
    total: int,
    per_family: int = 0,
) -> TermQuery:
    """The cheapest query that finds the nodes sharing the query's rarest terms.

    Nodes holding any of the rarest terms, when there are at most `limit` of them: all of them,
    unranked. Else, when the rarest terms match at most RANK_BUDGET nodes: those ranked by BM25
    (ranking reads every match). Else the rarest term alone is common: the nodes holding the two
    rarest terms together, which are fewer and relevant, unranked.
    """
    present = sorted((t for t in dict.fromkeys(terms) if t in frequencies), key=lambda t: frequencies[t])
    chosen: list[str] = []
    spent = 0
    for term in present[:cap]:
        if spent + frequencies[term] > (budget or RANK_BUDGET):
            break
        chosen.append(term)
        spent += frequencies[term]
    if chosen or not present:
        ranked = spent > limit
        weights = tuple(bm25_idf(total, frequencies[t]) for t in chosen) if ranked else ()
        capped = ranked and per_family > 0  # else no family cap: TermQuery's 0s
        return TermQuery(
            channel,
            table,
            chosen,
            limit,
            ranked=ranked,
            weights=weights,
            per_family=per_family if capped else 0,
            pool=FAMILY_POOL * limit if capped else 0,
        )
    rarest = frequencies[present[0]]
    return TermQuery(
        channel, table, present[:FALLBACK_TERMS], limit, every=len(present) > 1, density=rarest / total, matches=rarest
    )


async def find(store: Store, plan: QueryPlan) -> list[Candidate]:
    """Every candidate of every channel, scored and ordered best first (environment not yet known)."""
    terms = plan.terms
    grams = _grams(plan.mains[0] if plan.is_output else " ".join(terms.words))
    heads = list(terms.decisive) if plan.is_output else list(terms.words)
    frequencies, gram_frequencies, head_frequencies, nodes = await store.document_frequencies(
        [*terms.decisive, *terms.context, *terms.words], grams, heads
    )
    total = max(nodes, 1)
    whole = list(terms.words) if not plan.is_output else [*terms.decisive, *terms.context]
    # Nodes holding every content word of the query (of its first decisive line): few and precise,
    # where an OR of common words would rank short articles first.
    every = [t for t in (terms.words if not plan.is_output else terms.first) if t in frequencies and t not in STOPWORDS]
    every = sorted(every, key=frequencies.__getitem__)[:EVERY_TERMS] if len(every) > 1 else []
    rarest = frequencies[every[0]] if every else 0
    queries = [
        TermQuery("every", "search", every, EVERY_LIMIT, every=True, density=rarest / total, matches=rarest),
        channel_query(
            "terms", "search", whole, frequencies, TERMS_LIMIT, MAX_OR_TERMS, total=total, per_family=FAMILY_CAP
        ),
        # titles and signatures are short: a term common in articles can be rare there
        channel_query(
            "heads", "heads", heads, head_frequencies, HEADS_LIMIT, MAX_OR_TERMS, total=total, per_family=FAMILY_CAP
        ),
        channel_query("grams", "grams", grams, gram_frequencies, GRAMS_LIMIT, MAX_GRAMS, GRAM_BUDGET, total=total),
    ]
    by_hash = dict(plan.hashes)
    channels: dict[int, set[str]] = {}
    matched_lines: dict[int, set[int]] = {}
    exact: set[int] = set()
    versions: dict[int, str] = {}
    for channel, pk, hashed, version in await store.channel_matches(
        list(by_hash), plan.quoted, SIGNATURE_LIMIT, queries, FAMILY_LIMIT
    ):
        channels.setdefault(pk, set()).add(channel)
        versions[pk] = version
        if hashed is not None:
            matched_lines.setdefault(pk, set()).add(by_hash[hashed])
            if hashed in plan.exact:
                exact.add(pk)
    texts = await store.candidate_texts(versions)
    candidates = [
        Candidate(text, frozenset(channels[text.pk]), frozenset(matched_lines.get(text.pk, ())), exact=text.pk in exact)
        for text in texts
    ]
    return rank(candidates, plan.is_output, plan.mains, terms, frequencies, total)


async def similar_nodes(
    store: Store, document: dict[str, Any], *, limit: int = 3, threshold: float = 60.0
) -> list[dict[str, Any]]:
    """Up to `limit` textually close nodes, advisory only.

    Candidates come from the index, then rapidfuzz ranks them on template and title. Nodes
    of the same ecosystem always come first, so a weak match in another ecosystem is never
    listed first.
    """
    main = normalize_signature((decisive_lines(document["signature"]["error"]) or [document["signature"]["error"]])[0])
    words = query_terms(f"{document['title']}\n{document['signature']['error']}", drop_stopwords=True)
    words = [w for w in words if w not in STOPWORDS]
    counted = await store.document_frequencies(words)
    query = channel_query("terms", "search", words, counted.terms, 30, MAX_OR_TERMS, total=counted.nodes)
    matches = await store.channel_matches([], [], 0, [query])
    versions = {match.node_pk: match.version for match in matches}
    title_keys = index_terms(document["title"])
    scored = []
    for text in await store.candidate_texts(versions):
        score = max(
            max(fuzz.token_set_ratio(main, t) for t in text.templates.split("\n")),
            fuzz.token_set_ratio(title_keys, text.title),
        )
        if score >= threshold:
            scored.append((text.ecosystem != document["ecosystem"], -score, text.pk))
    scored.sort()
    by_pk = {row.pk: row for row in await store.get_nodes_by_pk([pk for _, _, pk in scored[: limit + 1]])}
    similar = []
    for _, negative, pk in scored:
        row = by_pk.get(pk)
        if row is None or row.id == document["id"]:
            continue
        similar.append(
            {
                "id": row.id,
                "title": row.title,
                "ecosystem": row.ecosystem,
                "score": round(-negative / 100, 3),
                "path": f"/v1/nodes/{row.id}",
                "html_path": f"/nodes/{row.id}",
            }
        )
    return similar[:limit]
