"""`knowmesh-mcp copy --from A --to B`: a whole mesh moved between backends, row for row.

SQLite file or PostgreSQL URL on either side. Every table of `store.interface.COPIED_TABLES` is
read from the source in key order, a page at a time, and matched against the target's rows of the
same key range: a row the target lacks is inserted with its ids, numbers, authors, proofs and
times as they are; a row it holds equally is left alone; a row that differs only in the columns a
later write may change (a node's current version, a token's last use, an issue's status...) is
brought up to date. Anything else means the target holds another mesh (a node with other
history, feedback the source never had) and the copy is refused: it all runs in one write
transaction on the target, so a refusal, like any error, leaves the target as it was.

The source is read inside one transaction too (`Store.write()`, which writes nothing), so it is
one consistent snapshot: writers of the source wait until the copy ends.

Not copied: `write_counts` (hourly write limits; they start again), `schema_migrations` (each
backend's own), `meta`'s `normalizer_version` and `search_index_version`, and the search index.
A new target's `starter_corpus` is "declined" before the source's meta is copied over it (a
`Mesh` opening the copy of an older mesh, which has none, must not add a starter corpus to it).
The target rebuilds signature hashes and index rows of every node the copy wrote, with its own
backend's code (`set_signature_hashes`, `write_search_rows`: what `Mesh.open` does after an
analyser change), and records the analyser versions it indexed with.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowmesh_mcp.core.errors import DatabaseUnusable, KnowmeshError
from knowmesh_mcp.core.normalize import NORMALIZER_VERSION
from knowmesh_mcp.search.query import SEARCH_INDEX_VERSION
from knowmesh_mcp.services.importing import index_pages
from knowmesh_mcp.store import STARTER_CORPUS, DuplicateRow, is_postgres, open_store
from knowmesh_mcp.store.interface import COPIED_TABLES, CopiedTable, Store, Writer

PAGE = 500  # rows read from each side per round trip
DERIVED_META = ("normalizer_version", "search_index_version")  # written by the target's own reindex
# Columns the target derives itself: never a reason to update a row, nor to refuse one.
DERIVED_COLUMNS = {"nodes": ("signature_hash",)}
# What the summary line names, in its order; every other table is counted under "other rows".
NAMED = (
    ("nodes", "nodes"),
    ("article_revisions", "revisions"),
    ("feedback", "feedback"),
    ("failures", "failed attempts"),
    ("dedupe_tasks", "dedupe tasks"),
    ("dedupe_votes", "dedupe votes"),
    ("service_issues", "issues"),
    ("agent_tokens", "tokens"),
    ("maintainer_actions", "maintainer actions"),
    ("node_redirects", "redirects"),
)

Progress = Callable[..., None]  # (done, total) rows; then (done, total, "nodes indexed") for the reindex


@dataclass
class CopyReport:
    source: str
    target: str
    copied: dict[str, int] = field(default_factory=dict)  # table: rows inserted
    updated: dict[str, int] = field(default_factory=dict)  # table: rows brought up to date
    reindexed: int = 0  # nodes whose search rows the target (re)built

    @property
    def changed(self) -> bool:
        return any(self.copied.values()) or any(self.updated.values())

    def summary(self) -> str:
        """One line: nodes, revisions and feedback always, the other named tables when they had rows."""
        named = dict(NAMED)
        parts = [
            f"{self.copied.get(table, 0)} {label}"
            for table, label in NAMED
            if table in ("nodes", "article_revisions", "feedback") or self.copied.get(table)
        ]
        other = sum(n for table, n in self.copied.items() if table not in named)
        line = "copied " + ", ".join(parts) + f", {other} other rows"
        if sum(self.updated.values()):
            line += f"; updated {sum(self.updated.values())} rows"
        if self.reindexed:
            line += f"; reindexed {self.reindexed} nodes"
        return line + ("" if self.changed else " (nothing to change)")

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "copied": self.copied,
            "updated": self.updated,
            "reindexed": self.reindexed,
            "changed": self.changed,
        }


def refused(target: Store, what: str) -> KnowmeshError:
    return KnowmeshError(
        409,
        "copy_refused",
        f"{target.path} already holds a different mesh: {what}. Nothing was "
        "written; copy into an empty database (or the target of an earlier copy of this mesh)",
    )


async def copy_mesh(source: str, target: str, *, progress: Progress | None = None) -> CopyReport:
    """Copy the mesh at `source` into `target` (each a SQLite file or a PostgreSQL URL)."""
    if _same_place(source, target):
        raise KnowmeshError(400, "copy_refused", "--from and --to name the same database")
    if not is_postgres(source) and not Path(source).expanduser().is_file():
        raise DatabaseUnusable(source, f"cannot copy from {source}: no such database file")
    from_store = await open_store(source)
    try:
        if from_store.created:
            raise DatabaseUnusable(from_store.path, f"cannot copy from {from_store.path}: it held no mesh")
        to_store = await open_store(target)
        try:
            return await copy_stores(from_store, to_store, progress=progress)
        finally:
            await to_store.close()
    finally:
        await from_store.close()


def _same_place(source: str, target: str) -> bool:
    if is_postgres(source) or is_postgres(target):
        return source == target
    return Path(source).expanduser().resolve() == Path(target).expanduser().resolve()


async def copy_stores(
    source: Store, target: Store, *, progress: Progress | None = None, page: int = PAGE
) -> CopyReport:
    """Copy every table of `source` into `target` in one target transaction (see the module's doc)."""
    report = CopyReport(source.path, target.path)
    total = sum([await source.count_rows(table.name) for table in COPIED_TABLES])
    done = 0
    if progress:
        progress(0, total)
    # The target's index is written as an import's is (`bulk_import`: built or merged once, at the end).
    async with target.bulk_import(), source.write() as reading, target.write() as tx:
        theirs = dict(await tx.dump_table("meta", None, 10_000))
        indexed = {key: value for key, value in theirs.items() if key in DERIVED_META}
        if theirs.get(STARTER_CORPUS) == "pending":
            await tx.set_meta(STARTER_CORPUS, "declined")
        had_nodes = bool(await tx.dump_table("nodes", None, 1))
        fresh: list[str] = []  # nodes the copy inserted
        moved: list[str] = []  # nodes whose current version it changed
        for table in COPIED_TABLES:
            copied = updated = 0
            after: tuple[Any, ...] | None = None
            while True:
                rows = await reading.dump_table(table.name, after, page)
                inserts, updates = await _match(tx, target, table, rows, after, last=len(rows) < page)
                try:
                    await tx.load_rows(table.name, inserts)
                except DuplicateRow as error:  # the target holds another row under another unique key
                    raise refused(
                        target, f"a {table.name} row of the source collides with one there ({error})"
                    ) from None
                if updates:
                    await tx.update_rows(table.name, [new for new, _ in updates])
                if table.name == "nodes":
                    node_id, version = table.columns.index("id"), table.columns.index("current_version")
                    fresh += [row[node_id] for row in inserts]
                    moved += [new[node_id] for new, old in updates if new[version] != old[version]]
                copied, updated = copied + len(inserts), updated + len(updates)
                done += len(rows)
                if progress:
                    progress(min(done, total), max(total, done))
                if len(rows) < page:
                    break
                after = _key(table, rows[-1])
            report.copied[table.name], report.updated[table.name] = copied, updated
        report.reindexed = await _reindex(tx, fresh, moved, progress)
        current = {"normalizer_version": str(NORMALIZER_VERSION), "search_index_version": str(SEARCH_INDEX_VERSION)}
        if report.changed and (not had_nodes or indexed == current):
            # Every node is indexed by this code now; a target indexed by older code keeps its
            # older versions, and `Mesh.open` rebuilds all of it.
            for key, value in current.items():
                if indexed.get(key) != value:
                    await tx.set_meta(key, value)
    return report


def _key(table: CopiedTable, row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(row[table.columns.index(column)] for column in table.key)


Row = tuple[Any, ...]


async def _match(
    tx: Writer, target: Store, table: CopiedTable, rows: list[Row], after: Row | None, *, last: bool
) -> tuple[list[Row], list[tuple[Row, Row]]]:
    """(rows to insert, (source row, target row) pairs to update) of one source page, after checking
    the target's rows of the same key range (to the end of the table on the last page)."""
    if table.name == "meta":
        rows = [row for row in rows if row[0] not in DERIVED_META]
        theirs = {row[0]: row for row in await tx.dump_table("meta", None, 10_000)}  # a few rows; extra keys stay
    else:
        until = None if last or not rows else _key(table, rows[-1])
        found = await tx.dump_table(table.name, after, len(rows) + 1, until)
        theirs = {_key(table, row): row for row in found}
        mine = {_key(table, row) for row in rows}
        extra = next((key for key in theirs if key not in mine), None)
        if extra is not None and not table.target_keeps:
            raise refused(target, f"{_describe(table, extra)} is there but not in the source")
    inserts, updates = [], []
    derived = DERIVED_COLUMNS.get(table.name, ())
    for row in rows:
        key = row[0] if table.name == "meta" else _key(table, row)
        old = theirs.get(key)
        if old is None:
            inserts.append(row)
            continue
        differ = [column for column, new, was in zip(table.columns, row, old) if new != was and column not in derived]
        if not differ:
            continue
        fixed = [column for column in differ if column not in table.mutable]
        if fixed:
            verb = "has another history there" if table.name in ("nodes", "article_revisions") else "differs"
            raise refused(
                target,
                f"{_describe(table, (key,) if table.name == 'meta' else key)} {verb} "
                f"({fixed[0]} {old[table.columns.index(fixed[0])]!r} there, "
                f"{row[table.columns.index(fixed[0])]!r} in the source)",
            )
        updates.append((row, old))
    return inserts, updates


def _describe(table: CopiedTable, key: tuple[Any, ...]) -> str:
    if table.name == "nodes":
        return f"node {key[0]!r}"
    if table.name == "article_revisions":
        return f"revision {key[1]} of node {key[0]!r}"
    shown = ", ".join(f"{column} {value!r}" for column, value in zip(table.key, key))
    return f"the {table.name} row with {shown}"


async def _reindex(tx: Writer, fresh: list[str], moved: list[str], progress: Progress | None = None) -> int:
    """Signature hashes and search rows of the nodes the copy wrote, by the target's own code
    (the steps of `Mesh._reindex_if_analysis_changed`), a page of documents at a time. A big
    copy indexes in a process pool (`importing.index_pages`) while this process writes the pages
    already indexed: indexing is most of a copy's CPU."""
    fresh_set = set(fresh)
    moved = [node_id for node_id in dict.fromkeys(moved) if node_id not in fresh_set]
    pages = [
        (is_fresh, wanted[start : start + PAGE])
        for wanted, is_fresh in ((fresh, True), (moved, False))
        for start in range(0, len(wanted), PAGE)
    ]
    total, done = len(fresh) + len(moved), 0

    async def documents() -> AsyncIterator[tuple[bool, list[tuple[str, dict[str, Any]]]]]:
        for is_fresh, ids in pages:
            found = await tx.current_documents(ids)
            yield is_fresh, [(node_id, found[node_id]) for node_id in ids]  # the copy just wrote each

    async for is_fresh, rows in index_pages(documents(), total):
        await tx.set_signature_hashes((digest, node_id) for node_id, digest, _ in rows)
        await tx.write_search_rows([(node_id, row) for node_id, _, row in rows], fresh=is_fresh)
        done += len(rows)
        if progress:  # a phase of its own: without it the bar would sit at 100% while this runs
            progress(done, total, "nodes indexed")
    return total
