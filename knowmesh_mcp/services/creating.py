"""Publishing a new problem (`POST /v1/nodes`), with or without an answer: validated like every
write, refused (409) when the id exists or the same normalized error is already a node, stored
as a draft, and answered with the similar nodes found before the write.
"""

from __future__ import annotations

from typing import Any

from knowmesh_mcp.core import next_steps
from knowmesh_mcp.core.errors import KnowmeshError
from knowmesh_mcp.core.identity import Actor, acting
from knowmesh_mcp.search.query import similar_nodes
from knowmesh_mcp.services.maintaining import canonical_ref
from knowmesh_mcp.services.publishing import prepare_off_loop
from knowmesh_mcp.services.submission import UNCOUNTED, Submission
from knowmesh_mcp.store import Store


class Creating:
    """`Mesh.creation`: new nodes."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def create_node(
        self,
        raw: Any,
        *,
        agent: dict[str, Any] | None = None,
        actor: Actor | None = None,
        submission: Submission = UNCOUNTED,
    ) -> dict[str, Any]:
        """POST /v1/nodes: publish a new problem (with or without an answer). Status is forced to draft."""
        author = actor if actor is not None else acting(agent, None, "off")  # optional on create, never malformed
        if isinstance(raw, dict):
            raw = {**raw, "status": "draft", "license": "CC0-1.0"}
            raw.pop("version", None)
        prepared = await prepare_off_loop(raw)
        document = prepared.document
        # Read before the write: once the node is stored, nothing that can fail stands before the 201.
        similar = await similar_nodes(self.store, prepared.body)
        async with self.store.write() as tx:
            await submission.charge(tx)
            if await tx.versions_of([document.id]):
                raise KnowmeshError(
                    409,
                    "node_exists",
                    f"{document.id!r} already exists: improve that article with PATCH /v1/nodes/{document.id}/article",
                    top_level={
                        "canonical": canonical_ref(document.id),
                        "next": {
                            "edit_article": next_steps.edit_article(document.id, await tx.current_revision(document.id))
                        },
                    },
                )
            duplicate = await tx.duplicate_of(prepared.signature_hash, prepared.quoted_values)
            if duplicate is not None:
                raise KnowmeshError(
                    409,
                    "duplicate_node",
                    f"the same error (normalized signature and quoted values) is already {duplicate!r}: improve that article",
                    top_level={
                        "canonical": canonical_ref(duplicate),
                        "next": {
                            "edit_article": next_steps.edit_article(duplicate, await tx.current_revision(duplicate))
                        },
                    },
                )
            await tx.insert_nodes(
                [
                    prepared.new_node(
                        kind="create",
                        summary="Create node",
                        proof=author.proof,
                        agent={"id": author.id, "model": author.model} if author.id else None,
                    )
                ]
            )
        return {
            "id": document.id,
            "version": prepared.version,
            "status": document.status,
            "revision": 1,
            "trust": "untrusted-data",
            "path": f"/v1/nodes/{document.id}",
            "html_path": f"/nodes/{document.id}",
            "similar": similar,
        }
