"""SQLite connections: opening a file (checked, identified, migrated), WAL mode, the busy timeout,
and SQLite's errors as the package's named faults.

One writer connection guarded by an asyncio lock (every write is one `BEGIN IMMEDIATE`
transaction; `busy_timeout` covers other processes) and one reader connection, both in
WAL mode so reads never wait for writes (`store.SqliteStore`).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

import aiosqlite

from knowmesh_mcp.core.errors import DatabaseUnusable, KnowmeshError, read_only_database, storage_full
from knowmesh_mcp.core.rows import DuplicateRow
from knowmesh_mcp.store.common import MIGRATIONS_TABLE, utc_now
from knowmesh_mcp.store.interface import STARTER_CORPUS
from knowmesh_mcp.store.sqlite.schema import migrations, split_sql

BUSY_TIMEOUT_MS = 10_000


@contextmanager
def unique_rule_as_duplicate() -> Iterator[None]:
    """sqlite3's unique-constraint error as the backend-neutral `DuplicateRow` (other integrity errors stay)."""
    try:
        yield
    except sqlite3.IntegrityError as error:
        if "UNIQUE" not in str(error):
            raise
        raise DuplicateRow(str(error)) from None


async def select_in(
    fetch: Callable[[str, Sequence[Any]], Awaitable[list[tuple[Any, ...]]]],
    sql: str,
    values: Iterable[Any],
    before: Sequence[Any] = (),
) -> list[tuple[Any, ...]]:
    """`sql` with one `IN ({marks})` over `values` (after the `before` parameters), run in chunks
    under SQLite's variable limit."""
    values = list(values)
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(values), 500):
        chunk = values[start : start + 500]
        rows += await fetch(sql.format(marks=",".join("?" * len(chunk))), [*before, *chunk])
    return rows


class Connections(NamedTuple):
    """What `open_connections` opened: the writer, the reader (the writer itself for `:memory:`)."""

    path: str
    writer: aiosqlite.Connection
    reader: aiosqlite.Connection
    created: bool  # this open made the database
    read_only: bool  # this process may only read the file


async def open_connections(path: str | Path) -> Connections:
    """Check the file, open the writer, migrate (or, read-only, check the schema), open the reader.

    Raises `DatabaseUnusable` (a SQLite error as one line) before anything is written, and closes
    whatever it opened first: no connection, nor its thread, outlives a failed open.
    """
    path = str(path)
    writable = True
    if path != ":memory:":
        path = str(Path(path).expanduser())
        writable = check_database_file(path)
    opened: list[aiosqlite.Connection] = []
    try:
        writer = await _connect(path, identify=True, read_only=not writable)
        opened.append(writer)
        created = await _migrate(writer) if writable else await _check_migrated(writer, path)
        reader = await _connect(path, read_only=not writable) if path != ":memory:" else writer
    except BaseException as error:
        for connection in reversed(opened):
            await _discard(connection)
        if isinstance(error, sqlite3.Error):
            raise _unusable(path, error) from error
        raise
    return Connections(path, writer, reader, created, read_only=not writable)


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def check_database_file(path: str) -> bool:
    """Refuse, without opening it, a path that cannot hold a knowmesh database; True when this
    process may write it, False when it may only read it (then it is opened read-only).

    Accepted: an existing regular file that starts like a SQLite database, or is empty (then it
    must be writable); or a missing file in an existing, writable folder (the folder is never
    created here). A database is writable only with its folder: WAL mode keeps its -wal and -shm
    files beside it. Anything else raises `DatabaseUnusable`.
    """
    folder = Path(path).parent
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        if not folder.is_dir():
            what = f"{folder} is not a folder" if folder.exists() else f"folder {folder} does not exist"
            raise DatabaseUnusable(path, f"cannot create {path}: {what}") from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise DatabaseUnusable(path, f"cannot create {path}: folder {folder} is not writable") from None
        return True
    except OSError as error:  # e.g. a folder we may not enter, a name too long
        raise DatabaseUnusable(path, f"cannot open {path} ({error.strerror or error})") from None
    if stat.S_ISDIR(info.st_mode):
        raise DatabaseUnusable(path, f"{path} is a folder, not a database file")
    if not stat.S_ISREG(info.st_mode):
        raise DatabaseUnusable(path, f"{path} is not a knowmesh database (not a regular file)")
    try:
        with open(path, "rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as error:
        raise DatabaseUnusable(path, f"cannot read {path} ({error.strerror or error})") from None
    if header and header != SQLITE_HEADER:
        raise DatabaseUnusable(path, f"{path} is not a knowmesh database (file is not a database)")
    writable = os.access(path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK)
    if not header and not writable:
        raise DatabaseUnusable(path, f"{path} is empty and read-only: there is no mesh in it to read")
    return writable


def read_only_uri(path: str) -> str:
    """A `file:` URI that opens `path` read-only.

    In WAL mode even a reader needs the -shm file beside the database. Where the folder may not be
    written and holds none, SQLite cannot open the file with mode=ro (SQLITE_CANTOPEN), only as
    `immutable`: a file nothing changes while it is open. That holds there: no writer could make
    its -wal and -shm files in that folder either.
    """
    absolute = os.path.abspath(path)
    uri = f"file:{quote(absolute)}?mode=ro"
    if not os.access(os.path.dirname(absolute), os.W_OK | os.X_OK) and not os.path.exists(absolute + "-shm"):
        uri += "&immutable=1"
    return uri


def _error_code(error: BaseException) -> int:
    """SQLite's primary result code of an error (SQLITE_FULL, ...), 0 for anything else."""
    return getattr(error, "sqlite_errorcode", 0) & 0xFF


def _disk_is_full(path: str) -> bool:
    """Whether the file system holding `path` has no block left for this process. SQLite reports a
    full disk as SQLITE_FULL where a write says ENOSPC, but as an I/O error where it learns only
    that a write failed: growing the -shm file, which opening a WAL database on a full disk does."""
    if path == ":memory:":
        return False
    try:
        return os.statvfs(os.path.dirname(os.path.abspath(path))).f_bavail == 0
    except OSError:
        return False


def _is_disk_full(error: BaseException, path: str) -> bool:
    code = _error_code(error)
    return code == sqlite3.SQLITE_FULL or (code == sqlite3.SQLITE_IOERR and _disk_is_full(path))


def write_fault(error: BaseException, path: str) -> KnowmeshError | None:
    """The named error for what a write transaction met, or None (then it is unexpected: a bug).

    A full disk is 507 storage_full; SQLITE_READONLY (a file made read-only, or a read-only mount
    remounted, while the mesh is open) is 403 read_only_database. Either way nothing was written.
    """
    if _is_disk_full(error, path):
        return storage_full()
    if _error_code(error) == sqlite3.SQLITE_READONLY:
        return read_only_database()
    return None


def is_busy(error: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock (for longer than busy_timeout)."""
    message = str(error)
    return "locked" in message or "busy" in message


def _unusable(path: str, error: sqlite3.Error) -> DatabaseUnusable:
    """The one line for a SQLite error raised while opening `path`."""
    message = str(error) or type(error).__name__
    if _is_disk_full(error, path):  # a runtime fault, not bad usage: 507, the CLI exits 1
        return DatabaseUnusable(
            path,
            f"cannot open {path}: the disk holding it is full (nothing was written; free some space)",
            status=507,
            code="storage_full",
        )
    if _error_code(error) == sqlite3.SQLITE_CORRUPT:  # ours, damaged: not "not a knowmesh database"
        return DatabaseUnusable(
            path, f"{path} is damaged ({message}): restore it from a backup", status=500, code="database_corrupt"
        )
    if isinstance(error, sqlite3.OperationalError):
        if is_busy(error):
            return DatabaseUnusable(path, f"cannot open {path} ({message})", status=503, code="database_busy")
        return DatabaseUnusable(path, f"cannot open {path} ({message})")
    return DatabaseUnusable(path, f"{path} is not a knowmesh database ({message})")


async def _identify(connection: aiosqlite.Connection, path: str) -> None:
    """Refuse a SQLite database that is not knowmesh's, before anything writes to it.

    Ours: no schema at all (new), or a `schema_migrations` table of knowmesh's shape whose
    applied migrations carry knowmesh's names (an empty one, left by an interrupted first
    open, may stand alone). Read-only: even `journal_mode = WAL` would rewrite the header.
    """
    rows = await connection.execute_fetchall(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    )
    tables = [row[0] for row in rows]
    if not tables:
        if list(await connection.execute_fetchall("SELECT 1 FROM sqlite_master LIMIT 1")):
            raise DatabaseUnusable(path, f"{path} is not a knowmesh database (it has no knowmesh tables)")
        return
    if "schema_migrations" not in tables:
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        raise DatabaseUnusable(
            path,
            f"{path} is not a knowmesh database (a SQLite database with no schema_migrations table; tables: {shown})",
        )
    columns = {row[1] for row in await connection.execute_fetchall("PRAGMA table_info(schema_migrations)")}
    if not {"version", "name", "applied_at"} <= columns:
        raise DatabaseUnusable(
            path, f"{path} is not a knowmesh database (its schema_migrations table is another application's)"
        )
    applied = list(await connection.execute_fetchall("SELECT version, name FROM schema_migrations"))
    known = {migration.number: migration.name for migration in migrations()}
    if any(known.get(version, name) != name for version, name in applied) or (not applied and len(tables) > 1):
        raise DatabaseUnusable(path, f"{path} is not a knowmesh database (its schema_migrations are not knowmesh's)")


async def _discard(connection: aiosqlite.Connection) -> None:
    """Close a connection after a failure without raising over it; aiosqlite ends its thread either way."""
    try:
        await connection.close()
    except Exception:
        pass


async def _connect(path: str, *, identify: bool = False, read_only: bool = False) -> aiosqlite.Connection:
    """A connection in WAL mode; with `identify`, only once the database is known to be ours (or new).
    With `read_only`, a connection that cannot write (`read_only_uri`), and leaves the journal mode
    as the file has it (setting WAL would rewrite its header).

    Closed again if anything fails, so its (non-daemon) worker thread never keeps the process alive.
    """
    if read_only:
        connection = await aiosqlite.connect(read_only_uri(path), isolation_level=None, uri=True)
    else:
        connection = await aiosqlite.connect(path, isolation_level=None)
    try:
        await connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if identify:
            await _identify(connection, path)
        if not read_only:
            await connection.execute("PRAGMA journal_mode = WAL")
        await connection.execute("PRAGMA synchronous = NORMAL")
        await connection.execute("PRAGMA foreign_keys = ON")
        await connection.execute("PRAGMA cache_size = -32000")  # 32 MB: FTS segment writes stay in memory
    except BaseException:
        await _discard(connection)
        raise
    return connection


async def _migrate(connection: aiosqlite.Connection) -> bool:
    """Apply pending migrations, each in its own transaction; True if the database was new."""
    await connection.execute(MIGRATIONS_TABLE)
    ((current,),) = await connection.execute_fetchall("SELECT coalesce(max(version), 0) FROM schema_migrations")
    created = current == 0
    for number, name, sql in migrations():
        if number <= current:
            continue
        await connection.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the lock.
            async with connection.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (number,)) as cursor:
                if await cursor.fetchone():
                    created = False
                    await connection.execute("ROLLBACK")
                    continue
            for statement in split_sql(sql):
                await connection.execute(statement)
            if number == 1:  # this open creates the mesh, in this transaction
                await connection.execute("INSERT INTO meta (key, value) VALUES (?, 'pending')", (STARTER_CORPUS,))
            await connection.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (number, name, utc_now()),
            )
        except BaseException:
            await connection.execute("ROLLBACK")
            raise
        await connection.execute("COMMIT")
    return created


async def _check_migrated(connection: aiosqlite.Connection, path: str) -> bool:
    """A read-only database cannot be migrated: it must already hold a mesh at this code's schema.
    Returns False (this open made nothing)."""
    tables = await connection.execute_fetchall(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    )
    current = 0
    if list(tables):
        ((current,),) = await connection.execute_fetchall("SELECT coalesce(max(version), 0) FROM schema_migrations")
    if current == 0:
        raise DatabaseUnusable(path, f"{path} is read-only and holds no mesh yet: there is nothing in it to read")
    latest = max(migration.number for migration in migrations())
    if current < latest:
        raise DatabaseUnusable(
            path,
            f"{path} is read-only and its schema (version {current}) is older than this "
            f"code's ({latest}): open it once where it may be written, to migrate it",
        )
    return False
