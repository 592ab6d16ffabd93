"""Commands that move documents in or out of a mesh: `import`, `export`, `sync` (from a remote
mesh) and `copy` (a whole mesh to another database)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO, TypeVar

from knowmesh_mcp.cli.mesh import open_service, remote_url
from knowmesh_mcp.cli.output import ProgressBar, progress_bar
from knowmesh_mcp.cli.usage import UsageError

Item = TypeVar("Item")


async def run_import(args: argparse.Namespace) -> int:
    from knowmesh_mcp.services.import_export import load_documents

    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or folder: {missing[0]}")
    service = await open_service(args)
    bar = progress_bar(sys.stderr, unit="documents")
    try:
        documents = load_documents(args.paths)
        report = await service.documents.import_documents(counted(documents, bar), dry_run=args.dry_run)
    finally:
        if bar:
            sys.stderr.write("\n")
        await service.close()
    for item in report.skipped:
        print(f"skipped {item['id']} ({item['source']}): {item['reason']}", file=sys.stderr)
    print_invalid(report.invalid, verbose=args.verbose)
    verb = "would create" if args.dry_run else "created"
    summary = (
        f"{verb} {len(report.created)}, unchanged {len(report.unchanged)}, "
        f"skipped {len(report.skipped)}, invalid {len(report.invalid)}"
    )
    if not report.created and not report.invalid:
        summary += " (nothing to change)"
    print(summary)
    return 2 if report.invalid else 0


def print_invalid(invalid: list[dict[str, Any]], *, verbose: bool) -> None:
    """The invalid documents of an import on stderr: each one's first problem, or (verbose) all."""
    for item in invalid:
        error = item["error"]
        print(f"invalid {item['id'] or '?'} ({item['source']}): {error['code']}: {error['message']}", file=sys.stderr)
        if verbose:
            for problem in error.get("problems") or []:
                print(f"    {problem['field']}: {problem['message']}", file=sys.stderr)
    if invalid and not verbose and any(len(item["error"].get("problems") or []) > 1 for item in invalid):
        print("(--verbose lists every problem)", file=sys.stderr)


def counted(items: list[Item], progress: ProgressBar | None) -> Iterator[Item]:
    """The items, calling `progress(done, total)` as the consumer takes them (the service reads
    an import one document at a time, so this is its progress without a callback of its own)."""
    for done, item in enumerate(items, 1):
        yield item
        if progress and (done % 20 == 0 or done == len(items)):
            progress(done, len(items))


async def run_export(args: argparse.Namespace) -> int:
    service = await open_service(args)
    out: TextIO = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    # Documents written to the terminal are their own progress; a bar there would cut into them.
    bar = None if out.isatty() else progress_bar(sys.stderr, unit="documents")
    count = 0
    try:
        async for document in service.documents.export_documents():
            out.write(json.dumps(document, ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
            if bar and count % 50 == 0:
                bar(count, None)
    finally:
        if bar:
            sys.stderr.write("\r\033[K")  # the counter gives way to the summary line
        await service.close()
        if out is not sys.stdout:
            out.close()
    print(f"exported {count} documents", file=sys.stderr)
    return 0


async def run_sync(args: argparse.Namespace) -> int:
    source = remote_url(args.source)
    service = await open_service(args)
    bar = progress_bar(sys.stderr)
    try:
        report = await service.sync.sync_from(source, progress=bar, token=args.token)
    finally:
        if bar:
            sys.stderr.write("\n")
        await service.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
        return 0
    for conflict in report.conflicts:
        print(conflict_line(conflict))
    for change in report.statuses:
        print(f"status {change['id']}: {change['from']} -> {change['to']}, as on the remote")
    for merge in report.merged:
        print(f"merged {merge['id']} into {merge['canonical']}, as on the remote")
    summary = (
        f"synced {report.remote}: created {len(report.created)}, updated {len(report.updated)}, "
        f"unchanged {report.unchanged}, conflicts {len(report.conflicts)}, outcome reports {report.evidence}"
    )
    if not (report.created or report.updated or report.evidence or report.statuses or report.merged):
        summary += " (nothing to change)"
    print(summary)
    return 0


def conflict_line(conflict: dict[str, Any]) -> str:
    """What a sync did with a local edit the remote also changed."""
    moved = conflict["moved_revisions"]
    kept = (
        f"kept as revision {conflict['kept_revision']}"
        if conflict["kept_revision"]
        else "not re-applied (nothing left to change, or it no longer validates)"
    )
    both = f"; both changed {', '.join(conflict['both_changed'])}" if conflict["both_changed"] else ""
    span = f"revision {moved[0]}" if len(moved) == 1 else f"revisions {moved[0]}-{moved[-1]}"
    return (
        f"conflict {conflict['id']}: local {span} moved aside, the local edit {kept} "
        f"on top of remote revision {conflict['remote_revision']}{both}"
    )


async def run_copy(args: argparse.Namespace) -> int:
    from knowmesh_mcp.services.copying import copy_mesh

    bar = progress_bar(sys.stderr, unit="rows")
    try:
        report = await copy_mesh(args.source, args.target, progress=bar)
    finally:
        if bar:
            sys.stderr.write("\n")
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.summary())
    return 0
