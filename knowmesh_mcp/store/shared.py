"""The Python both backends run around their own SQL: search's channel rows folded into the
interface's shape, and the candidate texts kept across queries."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from .rows import CandidateText

CANDIDATE_CACHE = 8192  # node versions whose candidate text is kept across queries (a few MB)


def fold_channel_rows(rows: Iterable[Sequence[Any]], signature_limit: int) -> list[tuple[str, int, str | None, str]]:
    """(channel, pk, matched hash or None, version) rows, in the backend's order, as
    `channel_matches` returns them: the first `signature_limit` distinct signature nodes (each with
    its first hash), then every other channel's nodes once."""
    signature: dict[int, tuple[str, str]] = {}
    others: dict[tuple[str, int], str] = {}
    for channel, pk, hashed, version in rows:
        if channel == "signature":
            if len(signature) < signature_limit:
                signature.setdefault(pk, (hashed, version))
        else:
            others[(channel, pk)] = version
    return ([("signature", pk, hashed, version) for pk, (hashed, version) in signature.items()]
            + [(channel, pk, None, version) for (channel, pk), version in others.items()])


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
