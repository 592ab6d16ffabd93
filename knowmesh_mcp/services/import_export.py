"""Import and export (`knowmesh-mcp import|export`, the starter corpus): documents read from
JSON, JSON array and JSONL files, created where their id is absent, and every current document
written back out with its status and version (export, then import, loses nothing).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowmesh_mcp.services.importing import InvalidSource, Rejected, prepared_documents
from knowmesh_mcp.services.publishing import Prepared
from knowmesh_mcp.store import NewNode, Store

IMPORT_BATCH = 1000  # documents a write transaction of an import takes


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    invalid: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "created": len(self.created),
            "unchanged": len(self.unchanged),
            "skipped": self.skipped,
            "invalid": self.invalid,
        }


class ImportExport:
    """`Mesh.documents`: bulk import and export of documents."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def import_documents(
        self,
        documents: Iterable[tuple[str, Any]],
        *,
        dry_run: bool = False,
        kind: str = "create",
        summary: str = "Imported",
    ) -> ImportReport:
        """Create every valid document whose id is absent; report the rest with reasons.

        A local, trusted bulk path: the document's status is kept (export → import is
        lossless), and no rate limit applies. Writes in batches, each one transaction; a big
        import's documents are prepared by worker processes meanwhile (`importing`).
        """
        report = ImportReport(dry_run=dry_run)
        async with nullcontext() if dry_run else self.store.bulk_import():
            batch: list[tuple[str, Prepared]] = []
            seen_ids: set[str] = set()
            async for source, prepared in prepared_documents(documents):
                if isinstance(prepared, Rejected):
                    report.invalid.append({"source": source, "id": prepared.id, "error": prepared.error})
                    continue
                if prepared.document.id in seen_ids:
                    report.skipped.append(
                        {"source": source, "id": prepared.document.id, "reason": "duplicate id earlier in this import"}
                    )
                    continue
                seen_ids.add(prepared.document.id)
                batch.append((source, prepared))
                if len(batch) >= IMPORT_BATCH:
                    await self._import_batch(batch, report, kind=kind, summary=summary)
                    batch = []
            await self._import_batch(batch, report, kind=kind, summary=summary)
        return report

    async def _import_batch(
        self, batch: list[tuple[str, Prepared]], report: ImportReport, *, kind: str, summary: str
    ) -> None:
        if not batch:
            return
        async with self.store.write() as tx:
            existing = await tx.versions_of([p.document.id for _, p in batch])
            fresh: list[NewNode] = []
            # (signature hash, quoted values) -> the first id in this batch
            claimed: dict[tuple[str, tuple[str, ...]], str] = {}
            duplicates = await tx.duplicates_of((p.signature_hash, p.quoted_values) for _, p in batch)
            for source, prepared in batch:
                node_id = prepared.document.id
                if node_id in existing:
                    if existing[node_id] == prepared.version:
                        report.unchanged.append(node_id)
                    else:
                        report.skipped.append(
                            {
                                "source": source,
                                "id": node_id,
                                "reason": "id exists with different content (edit the article instead)",
                            }
                        )
                    continue
                key = (prepared.signature_hash, tuple(prepared.quoted_values))
                owner = duplicates.get(key) or claimed.get(key)
                if owner is not None:
                    report.skipped.append(
                        {"source": source, "id": node_id, "reason": f"duplicate of {owner} (same normalized error)"}
                    )
                    continue
                claimed.setdefault(key, node_id)
                fresh.append(prepared.new_node(kind=kind, agent=None, summary=summary))
                report.created.append(node_id)
            if not report.dry_run:
                await tx.insert_nodes(fresh)

    async def export_documents(self) -> AsyncIterator[dict[str, Any]]:
        """Every current document with its status and version, in id order (what import reads back)."""
        async for document, status, version in self.store.iter_current_documents():
            yield {**document, "status": status, "version": version}


def load_documents(paths: Iterable[str | Path]) -> list[tuple[str, Any]]:
    """(source, raw document) pairs from JSON documents, JSON arrays and JSONL files; folders recursively.

    A file that cannot be parsed yields one entry whose document is an `InvalidSource`.
    """
    found: list[tuple[str, Any]] = []
    for path in map(Path, paths):
        files = (
            sorted(p for p in path.rglob("*") if p.suffix in {".json", ".jsonl"} and p.is_file())
            if path.is_dir()
            else [path]
        )
        for file in files:
            found.extend(_parse_file(file))
    return found


def _parse_file(file: Path) -> list[tuple[str, Any]]:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return [(str(file), InvalidSource(str(error)))]
    if file.suffix == ".jsonl":
        items = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append((f"{file}:{number}", json.loads(line)))
                except json.JSONDecodeError as error:
                    items.append((f"{file}:{number}", InvalidSource(f"invalid JSON: {error}")))
        return items
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return [(str(file), InvalidSource(f"invalid JSON: {error}"))]
    if isinstance(value, list):
        return [(f"{file}[{index}]", item) for index, item in enumerate(value)]
    return [(str(file), value)]
