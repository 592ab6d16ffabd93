"""Preparing imported documents: each validated and indexed, in worker processes for a big import.

Validating and indexing a document is about 0.45 ms of Python, most of a large import's time, and
threads cannot share it (the GIL: a preparing thread gave 1,379 against 1,403 nodes/s). So once an
import has prepared `PARALLEL_FROM` documents in-process, the rest are prepared in chunks by a
process pool while the caller writes the batches already prepared. Every document's outcome is
the one in-process preparation gives, in input order; a small import never starts a pool.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from itertools import islice
from multiprocessing import get_context
from typing import Any, TypeVar

from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.core.model import InvalidNode, validate_node
from knowmesh_mcp.core.normalize import signature_hash
from knowmesh_mcp.search.query import index_row
from knowmesh_mcp.services.publishing import Prepared, check_overlaps, invalid_node_error
from knowmesh_mcp.store import SearchRow

PARALLEL_FROM = 5000  # documents prepared in-process before a pool takes over (its start-up is ~0.5 s)
CHUNK = 500  # documents a worker prepares per task
AHEAD = 4  # chunks queued beyond one per worker: the workers keep preparing while a write batch (1,000) is written

T = TypeVar("T")
R = TypeVar("R")


class InvalidSource:
    """Stands in for a document that could not even be read; validation reports `reason`."""

    def __init__(self, reason: str):
        self.reason = reason


@dataclass(frozen=True)
class Rejected:
    """An imported document that is not valid, with the error body its report entry carries."""

    id: str | None
    error: dict[str, Any]


def prepare_import(raw: Any) -> Prepared | Rejected:
    """Validate one imported document (its stored `version` is recomputed, not trusted) and index it."""
    if isinstance(raw, InvalidSource):
        return Rejected(None, {"code": "invalid_json", "message": raw.reason})
    try:
        if isinstance(raw, dict):
            raw = {key: value for key, value in raw.items() if key != "version"}
        document = validate_node(raw)
        check_overlaps(document)
    except InvalidNode as error:
        return Rejected(raw_id(raw), invalid_node_error(error).to_body()["error"])
    except KnowmeshError as error:
        return Rejected(raw_id(raw), error.to_body()["error"])
    prepared = Prepared.of(document)
    return replace(prepared, index=index_row(prepared.body))


def prepare_chunk(items: list[tuple[str, Any]]) -> list[tuple[str, Prepared | Rejected]]:
    """`prepare_import` of each (source, raw document): a worker process's task."""
    return [(source, prepare_import(raw)) for source, raw in items]


def raw_id(raw: Any) -> str | None:
    value = raw.get("id") if isinstance(raw, dict) else None
    return value if isinstance(value, str) else None


def _chunks(items: Iterator[tuple[str, Any]]) -> Iterator[list[tuple[str, Any]]]:
    while chunk := list(islice(items, CHUNK)):
        yield chunk


async def prepared_documents(documents: Iterable[tuple[str, Any]]) -> AsyncIterator[tuple[str, Prepared | Rejected]]:
    """(source, outcome) of every document, in input order; past PARALLEL_FROM, from a process pool."""
    items = iter(documents)
    for source, raw in islice(items, PARALLEL_FROM):
        yield source, prepare_import(raw)
    async for outcomes in pooled(_chunks(items), prepare_chunk):
        for outcome in outcomes:
            yield outcome


async def pooled(chunks: Iterable[T] | AsyncIterable[T], task: Callable[[T], R]) -> AsyncIterator[R]:
    """`task(chunk)` of every chunk, in order, computed by a process pool while the caller uses the
    results already there (a pool starts only if there is a chunk).

    At most `workers + AHEAD` chunks are in flight, so memory stays bounded however long the input;
    an async `chunks` is read only as the pool needs more (it may read the caller's transaction).
    """
    source = chunks.__aiter__() if isinstance(chunks, AsyncIterable) else _aiter(chunks)
    first = await anext(source, None)
    if first is None:
        return
    workers = max(1, (os.cpu_count() or 2) - 1)  # the event loop's writes and the database need a core
    loop = asyncio.get_running_loop()
    # spawn, not fork: the parent has threads (the store's), and a forked lock may never be released
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        pending = deque([loop.run_in_executor(pool, task, first)])
        async for chunk in source:
            pending.append(loop.run_in_executor(pool, task, chunk))
            if len(pending) >= workers + AHEAD:
                yield await pending.popleft()
        while pending:
            yield await pending.popleft()


async def _aiter(items: Iterable[T]) -> AsyncIterator[T]:
    for item in items:
        yield item


IndexPage = tuple[bool, list[tuple[str, dict[str, Any]]]]  # (flag, [(node id, document)])
IndexedPage = tuple[bool, list[tuple[str, str, SearchRow]]]  # (flag, [(node id, signature hash, search rows)])


def index_chunk(chunk: IndexPage) -> IndexedPage:
    """The signature hash and search rows of each document of a page: a worker's task when a copy
    or an upgrade reindexes (the flag rides along: for a copy, whether the nodes are new)."""
    flag, documents = chunk
    return flag, [(node_id, signature_hash(d["signature"]["error"]), index_row(d)) for node_id, d in documents]


def index_pages(pages: Iterable[IndexPage] | AsyncIterable[IndexPage], total: int) -> AsyncIterator[IndexedPage]:
    """`index_chunk` of every page, in order: in a process pool when `total` documents are worth
    its start-up, here otherwise."""
    if total >= PARALLEL_FROM:
        return pooled(pages, index_chunk)
    source = pages if isinstance(pages, AsyncIterable) else _aiter(pages)
    return (index_chunk(page) async for page in source)
