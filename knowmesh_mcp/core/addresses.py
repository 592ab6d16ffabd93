"""Client addresses: which address a request came from, and the keyed hash that is all we keep.

The address is the TCP peer's, never a header's: `X-Forwarded-For` is believed only from a
proxy named by `--trust-proxy` (else rotating it would defeat the write limit and the
anonymous-report dedupe). The hash is an HMAC under a secret that lives outside the database
file, in `KNOWMESH_ADDRESS_SECRET` or a `0600` file beside it (`<db>.address-secret`), so a copied
database does not tell which address sent what.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from knowmesh_mcp.core.errors import read_only_database, storage_full

SECRET_ENV = "KNOWMESH_ADDRESS_SECRET"
_IN_MEMORY = secrets.token_hex(32)  # an in-memory database's secret lives as long as the process


def secret_file(db_path: str) -> Path:
    return Path(f"{db_path}.address-secret")


def address_secret(db_path: str, *, adopt: str | None = None) -> str:
    """The secret for the database at `db_path`: the environment's, else its file's (made on first
    use, or holding `adopt`, a secret an older version kept in the database).

    The file appears whole or not at all: it is written beside its place and linked there, so a
    full disk (507 storage_full) or a crash never leaves an empty file that would key every hash
    with an empty secret; an empty one an older version left is replaced. In a folder that may only
    be read, the secret cannot be made: 403 read_only_database, as any write there is."""
    if os.environ.get(SECRET_ENV):
        return os.environ[SECRET_ENV]
    if db_path == ":memory:":
        return _IN_MEMORY
    path = secret_file(db_path)
    kept = _read_secret(path)
    if kept:
        return kept
    partial = path.with_name(f"{path.name}.{secrets.token_hex(4)}.partial")
    try:
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        raise _named(error) from None
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write((adopt or secrets.token_hex(32)) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(partial, path)  # another process may have made it first: then theirs stands
        except FileExistsError:
            if not _read_secret(path):  # empty: left by an older version's failed write
                os.replace(partial, path)
    except OSError as error:
        raise _named(error) from None
    finally:
        partial.unlink(missing_ok=True)
    made = _read_secret(path)
    if not made:
        raise RuntimeError(f"{path} holds no secret")
    return made


def _named(error: OSError) -> Exception:
    """A full disk and a folder that may only be read are named errors; anything else stays itself."""
    if error.errno == errno.ENOSPC:
        return storage_full()
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return read_only_database()
    return error


def _read_secret(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip() or None
    except FileNotFoundError:
        return None


def address_hash(secret: str, address: str) -> str:
    return hmac.new(secret.encode(), address.encode(), hashlib.sha256).hexdigest()
