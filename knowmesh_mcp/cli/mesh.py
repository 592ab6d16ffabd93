"""The mesh a command works on: its database (--db, $KNOWMESH_DB, or the default file), opened
as a `Mesh`; or a remote mesh's URL."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from knowmesh_mcp.cli.output import progress_bar
from knowmesh_mcp.cli.usage import UsageError

if TYPE_CHECKING:  # imported when a command opens one: start-up stays light
    from knowmesh_mcp.services.mesh import Mesh


def default_db_path() -> str:
    """--db, else KNOWMESH_DB, else $XDG_DATA_HOME/knowmesh/knowmesh.db."""
    if os.environ.get("KNOWMESH_DB"):
        return os.environ["KNOWMESH_DB"]
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data_home) / "knowmesh" / "knowmesh.db")


def database_path(args: argparse.Namespace) -> str:
    """The database this command uses. An explicit one (--db, KNOWMESH_DB) must be in an existing
    folder, which `Store.open` checks; the default location's folder is created on first use."""
    if args.db:
        return str(args.db)
    path = default_db_path()
    if not os.environ.get("KNOWMESH_DB"):
        folder = Path(path).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"cannot create {path}: folder {folder} cannot be made ({error.strerror or error})"
            ) from None
    return path


def wants_empty(args: argparse.Namespace) -> bool:
    """--empty or KNOWMESH_EMPTY: a new database gets no starter corpus."""
    flag = os.environ.get("KNOWMESH_EMPTY") or ""
    return bool(args.empty) or flag.strip().lower() in {"1", "true", "yes", "on"}


async def open_service(args: argparse.Namespace, *, starter: bool = True) -> Mesh:
    """The mesh the command works on. `starter` False (doctor, token) leaves a new mesh's starter
    corpus pending for the first command that serves or searches it: a team that makes its tokens
    first can still copy a personal mesh into the database afterwards."""
    from knowmesh_mcp.services.mesh import Mesh

    empty = wants_empty(args)
    bar = progress_bar(sys.stderr, unit="nodes reindexed (the search code changed)")
    try:
        seed = False if empty else True if starter else None
        return await Mesh.open(database_path(args), seed=seed, progress=bar)
    finally:
        if bar is not None and bar.drawn:
            sys.stderr.write("\n")


def remote_url(url: str) -> str:
    """An http(s) base URL, or a usage error before anything starts."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()  # never a password
        raise UsageError(f"not an http(s) URL: {shown!r}")
    return url.strip().rstrip("/")
