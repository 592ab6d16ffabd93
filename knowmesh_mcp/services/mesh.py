"""The mesh: the one object every interface calls.

An MCP tool, an HTTP route and a CLI command that do the same thing call the same method of
the same concern here, so they cannot disagree. Methods take plain values, return JSON-ready
dicts, and raise `KnowmeshError` with the spec's status and code.

`Mesh` is composed of one service per concern, each in its own module and given the store (and
any other service it reads through) in its constructor: nodes, creation, articles, searching,
feed, documents, outcomes, failures, review, dedupe, issues, addresses, sync, tokens,
maintenance, health. This module opens a mesh: migrating it, rebuilding a search index an
older analyser built, loading the starter corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from knowmesh_mcp.core.errors import DatabaseUnusable
from knowmesh_mcp.core.identity import Actor, acting
from knowmesh_mcp.core.normalize import NORMALIZER_VERSION
from knowmesh_mcp.search.query import SEARCH_INDEX_VERSION
from knowmesh_mcp.services import local_agent
from knowmesh_mcp.services.access import AgentTokens
from knowmesh_mcp.services.change_feed import ChangeFeed
from knowmesh_mcp.services.creating import Creating
from knowmesh_mcp.services.dedupe import Dedupe
from knowmesh_mcp.services.editing import ArticleEditing
from knowmesh_mcp.services.failed_attempts import FailedAttempts
from knowmesh_mcp.services.health import Health
from knowmesh_mcp.services.import_export import ImportExport, load_documents
from knowmesh_mcp.services.importing import CHUNK, index_pages
from knowmesh_mcp.services.issues import ServiceIssues
from knowmesh_mcp.services.maintaining import Maintaining
from knowmesh_mcp.services.node_reads import NodeReads
from knowmesh_mcp.services.outcomes import OutcomeReporting
from knowmesh_mcp.services.review import ReviewQueue
from knowmesh_mcp.services.searching import Searching
from knowmesh_mcp.services.submission import ClientAddresses
from knowmesh_mcp.services.syncing import Syncing
from knowmesh_mcp.store import STARTER_CORPUS, Store, open_store, store_dir


def llms_txt() -> str:
    """The agent entry point (`llms.txt`), from the wheel or the checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "llms.txt", package.parent / "llms.txt"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    raise FileNotFoundError("llms.txt is missing from the installation")


class Mesh:
    """Knowmesh over one store: one small service per concern, each given what it uses.

    Adapters reach a concern by name (`mesh.searching.search(...)`, `mesh.articles.patch_article(...)`);
    a `remote.RemoteMesh` has the same attributes for the calls it can make over HTTP."""

    def __init__(self, store: Store):
        self.store = store
        self.nodes = NodeReads(store)
        self.creation = Creating(store)
        self.articles = ArticleEditing(store, self.nodes)
        self.searching = Searching(store)
        self.feed = ChangeFeed(store)
        self.documents = ImportExport(store)
        self.outcomes = OutcomeReporting(store)
        self.failures = FailedAttempts(store)
        self.review = ReviewQueue(store)
        self.dedupe = Dedupe(store)
        self.issues = ServiceIssues(store)
        self.addresses = ClientAddresses(store)
        self.sync = Syncing(store)
        self.tokens = AgentTokens(store)
        self.maintenance = Maintaining(store)
        self.health = Health(store)

    @classmethod
    async def open(
        cls, db_path: str | Path, *, seed: bool | None = True, progress: Callable[[int, int], None] | None = None
    ) -> Mesh:
        """Open (creating and migrating if needed) a database; a new one gets the starter corpus
        (`seed` False: never, the mesh stays empty; None: not now, it stays pending).

        `progress(done, total)` follows a rebuild of the search index, which an upgrade of the
        search code starts here (minutes on a big mesh)."""
        store = await open_store(db_path)
        mesh = cls(store)
        try:
            if store.read_only:  # a file this process may only read: serve it as it is
                await mesh._refuse_a_stale_read_only_index()
                return mesh
            await mesh._reindex_if_analysis_changed(progress)
            if seed is not None:
                await mesh._load_starter_corpus_if_pending(seed)
        except BaseException:
            await store.close()
            raise
        return mesh

    async def close(self) -> None:
        await self.store.close()

    async def _load_starter_corpus_if_pending(self, wanted: bool) -> None:
        """A new mesh's starter corpus is pending (`STARTER_CORPUS`) until loaded. Each process that
        opens it meanwhile loads it too, as an import (what another already wrote is unchanged, and
        its transaction waits for theirs): so none serves a search before the corpus is there, and
        the next open finishes a load that died half-way. With `wanted` False (`--empty`) nothing
        is loaded and the mesh stays empty for good."""
        if await self.store.get_meta(STARTER_CORPUS) != "pending":
            return
        if wanted:
            await self.documents.import_documents(load_documents([store_dir() / "starter"]), summary="Starter corpus")
        async with self.store.write() as tx:
            await tx.set_meta(STARTER_CORPUS, "loaded" if wanted else "declined")

    async def _refuse_a_stale_read_only_index(self) -> None:
        """A read-only mesh whose search index another version built cannot be rebuilt here, and
        searching it would answer by rules this code no longer has: one line saying what to do.
        (Its starter corpus, if still pending, stays so: the mesh is served as it is.)"""
        if not await self._analysis_is_current():
            raise DatabaseUnusable(
                self.store.path,
                f"{self.store.path} is read-only and its search index was built by "
                "another version: open it once where it may be written, to rebuild it",
            )

    async def _analysis_is_current(self) -> bool:
        """Were the stored signature hashes and search index made by this code's analysis?"""
        return (await self.store.get_meta("normalizer_version"), await self.store.get_meta("search_index_version")) == (
            str(NORMALIZER_VERSION),
            str(SEARCH_INDEX_VERSION),
        )

    async def _reindex_if_analysis_changed(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Signature hashes and the search index are derived: rebuild them when their code changed."""
        if await self._analysis_is_current():
            return
        documents = [(document["id"], document) async for document, _, _ in self.store.iter_current_documents()]
        pages = [(False, documents[start : start + CHUNK]) for start in range(0, len(documents), CHUNK)]
        done = 0
        async with self.store.bulk_import(), self.store.write() as tx:  # a whole index rewritten: as an import
            # a big mesh's pages are indexed in a process pool while this process writes those indexed
            async for _, rows in index_pages(pages, len(documents)):
                await tx.set_signature_hashes((digest, node_id) for node_id, digest, _ in rows)
                await tx.write_search_rows([(node_id, row) for node_id, _, row in rows])
                done += len(rows)
                if progress is not None:
                    progress(done, len(documents))
            await tx.set_meta("normalizer_version", str(NORMALIZER_VERSION))
            await tx.set_meta("search_index_version", str(SEARCH_INDEX_VERSION))

    async def local_agent_id(self) -> str:
        """The local agent of a stdio server (`local_agent.local_agent_id`)."""
        return await local_agent.local_agent_id(self.store)

    async def local_actor(self, agent: Any) -> Actor:
        """Who a stdio call acts as on a personal mesh: the id it names, else the local agent."""
        return acting(agent, None, "off", local_id=await self.local_agent_id())
