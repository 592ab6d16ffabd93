"""The Python both backends run around their own SQL: search's channel rows folded into the
interface's shape, one duplicate lookup, the candidate texts kept across queries, the
document-frequency keys of an index row, and the conditions of a node list."""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from knowmesh_mcp.core.rows import CandidateText, SearchRow

CANDIDATE_CACHE = 8192  # node versions whose candidate text is kept across queries (a few MB)


def listing_conditions(
    ecosystem: str | None, after_id: str | None, *, mark: str, node_id: str
) -> tuple[str, list[Any]]:
    """The WHERE of a list of published nodes, and its parameters: only the conditions asked for.

    `(? IS NULL OR n.ecosystem = ?)` made SQLite walk every node in id order (60,000 of 100,000
    before the first python one) instead of one ecosystem's range of its index. `mark` is the
    backend's placeholder, `node_id` how it orders ids."""
    where = ["n.status != 'deprecated'"]
    params: list[Any] = []
    if ecosystem is not None:
        where.append(f"n.ecosystem = {mark}")
        params.append(ecosystem)
    if after_id is not None:
        where.append(f"{node_id} > {mark}")
        params.append(after_id)
    return " AND ".join(where), params


def fold_channel_rows(rows: Iterable[Sequence[Any]], signature_limit: int) -> list[tuple[str, int, str | None, str]]:
    """(channel, pk, matched hash or None, version) rows, in the backend's order, as
    `channel_matches` returns them: the first `signature_limit` distinct signature nodes (a row for
    each hash of theirs that matched: a node's template and its exact key both can), then every
    other channel's nodes once."""
    signature: dict[int, tuple[dict[str, None], str]] = {}
    others: dict[tuple[str, int], str] = {}
    for channel, pk, hashed, version in rows:
        if channel == "signature":
            if pk in signature:
                signature[pk][0][hashed] = None
            elif len(signature) < signature_limit:
                signature[pk] = ({hashed: None}, version)
        else:
            others[(channel, pk)] = version
    return [
        ("signature", pk, hashed, version) for pk, (hashes, version) in signature.items() for hashed in sorted(hashes)
    ] + [(channel, pk, None, version) for (channel, pk), version in others.items()]


class DuplicateLookup:
    """`duplicate_of`, one key of a writer's `duplicates_of` (each backend has its own SQL for that)."""

    duplicates_of: Callable[[Iterable[tuple[str, Sequence[str]]]], Awaitable[dict[tuple[str, tuple[str, ...]], str]]]

    async def duplicate_of(self, signature_hash: str, quoted: list[str]) -> str | None:
        """The node whose normalized signature and quoted values both match, if any."""
        return (await self.duplicates_of([(signature_hash, quoted)])).get((signature_hash, tuple(quoted)))


Fetch = Callable[[list[int]], Awaitable[Iterable[tuple[str, CandidateText]]]]


class CandidateTexts:
    """Candidate texts by node pk, each kept with the node version it was read at.

    A node's text changes only with its version, so a kept text is never stale, on any number of
    servers; the least recently used go first past `size`."""

    def __init__(self, size: int = CANDIDATE_CACHE):
        self.size = size
        self._kept: OrderedDict[int, tuple[str, CandidateText]] = OrderedDict()

    async def texts(self, versions: dict[int, str], fetch: Fetch) -> list[CandidateText]:
        """The text of each node of `versions` ({pk: current version}), in that order; `fetch(pks)`
        reads the missing ones as (version, text) pairs."""
        missing = [pk for pk, version in versions.items() if self._kept.get(pk, (None,))[0] != version]
        if missing:
            for version, text in await fetch(missing):
                self._kept[text.pk] = (version, text)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        found = []
        for pk, version in versions.items():
            entry = self._kept.get(pk)
            if entry is not None and entry[0] == version:
                self._kept.move_to_end(pk)
                found.append(entry[1])
        return found


def _fold(text: str) -> str:
    """Lowercase character by character, keeping the length (FTS5's trigram tokenizer folds so)."""
    if text.isascii():
        return text.lower()  # ASCII lowercasing never changes a length
    return "".join(low if len(low := c.lower()) == 1 else c for c in text)


def gram_terms(grams: str) -> set[str]:
    """The distinct trigrams FTS5's trigram tokenizer indexes for `grams` (what fts5vocab counts)."""
    text = _fold(grams)
    return {text[i : i + 3] for i in range(len(text) - 2)}


CountedKeys = dict[str, set[str]]  # term_counts kind -> the terms a node is counted under


def counted_keys(title: str, signature: str, article: str, grams: str) -> CountedKeys:
    """The terms `term_counts` counts a node under, by kind: 'term' for each distinct key of its
    title, signature and article (what fts5vocab over node_search counts: `analysis` makes every key
    one unicode61 token), 'head' for those of title and signature (node_heads), 'gram' for each
    trigram of its templates (node_grams)."""
    heads = {*title.split(), *signature.split()}
    return {"term": heads.union(article.split()), "head": heads, "gram": gram_terms(grams)}


def row_keys(row: SearchRow) -> CountedKeys:
    return counted_keys(row.title, row.signature, row.article, row.grams)


def term_count_delta(removed: Iterable[CountedKeys], added: Iterable[CountedKeys]) -> Counter[tuple[str, str]]:
    """How each (kind, term) count moves when index rows with `removed` keys give way to rows with `added` keys."""
    by_kind: dict[str, Counter[str]] = {}
    for keys in removed:
        for kind, terms in keys.items():
            by_kind.setdefault(kind, Counter()).subtract(terms)
    for keys in added:
        for kind, terms in keys.items():
            by_kind.setdefault(kind, Counter()).update(terms)  # counting a set runs in C
    return Counter({(kind, term): n for kind, counts in by_kind.items() for term, n in counts.items() if n})
