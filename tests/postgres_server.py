"""A private PostgreSQL server for the tests: `initdb` into a temporary folder, listening on a Unix
socket of its own (no TCP port), stopped and removed afterwards.

`KNOWMESH_TEST_POSTGRES` (a conninfo URL) uses that server instead. Without either, the Postgres
tests are skipped, except where `KNOWMESH_REQUIRE_POSTGRES=1` (CI sets it): there a missing server
fails with the command that installs one.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

INSTALL = "apt-get install -y postgresql postgresql-contrib"
DATABASE = "knowmesh"


def binary(name: str) -> str | None:
    """A PostgreSQL program: on PATH, else Debian's /usr/lib/postgresql/<version>/bin (newest)."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return versions[-1] if versions else None


def unavailable(reason: str) -> None:
    message = f"{reason}: install PostgreSQL 15+ with pg_trgm ({INSTALL}) or set KNOWMESH_TEST_POSTGRES"
    if os.environ.get("KNOWMESH_REQUIRE_POSTGRES") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@contextmanager
def private_postgres() -> Iterator[str]:
    """Yields a conninfo URL of a fresh database on a server of our own."""
    if os.environ.get("KNOWMESH_TEST_POSTGRES"):
        yield os.environ["KNOWMESH_TEST_POSTGRES"]
        return
    initdb, pg_ctl = binary("initdb"), binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        unavailable("no initdb/pg_ctl found")
    # The server refuses to run as root: as root, run it as the `postgres` user the package makes.
    as_user: list[str] = []
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root and there is no postgres user to run the server as")
        as_user = ["runuser", "-u", "postgres", "--"]
    base = Path(tempfile.mkdtemp(prefix="knowmesh-pg-"))  # short: a socket path has ~100 bytes
    data, socket_dir = base / "data", base / "sock"
    socket_dir.mkdir()
    os.chmod(base, 0o755)
    os.chmod(socket_dir, 0o777)
    if owner is not None:
        for path in (base, socket_dir):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    log = base / "server.log"

    def run(*command: str) -> None:
        done = subprocess.run([*as_user, *command], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}"
                               + (log.read_text() if log.exists() else ""))

    try:
        run(initdb, "-D", str(data), "-U", "knowmesh", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
        options = f"-c listen_addresses='' -c unix_socket_directories={socket_dir} -c fsync=off -c synchronous_commit=off"
        run(pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
        try:
            import psycopg

            with psycopg.connect(f"postgresql://knowmesh@/postgres?host={socket_dir}", autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {DATABASE}")
            yield f"postgresql://knowmesh@/{DATABASE}?host={socket_dir}"
        finally:
            run(pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(base, ignore_errors=True)
