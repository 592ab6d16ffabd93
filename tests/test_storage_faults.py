"""Storage faults (issue 47, point 8): a full disk, damaged pages and a read-only file are named
answers, never a 500 and never a traceback.

Each fault is the real one, not an imitation: a small tmpfs written to its last byte (SQLite's own
SQLITE_FULL, which a trigger's RAISE cannot produce), a PostgreSQL trigger raising SQLSTATE 53100
(`disk_full`, what the server raises when it cannot extend a file), bytes overwritten in a page of
a closed database file, and a file or folder the kernel refuses to write. Tests may run as root,
whom file modes do not stop: there the file or folder is bound read-only onto itself (EROFS stops
root too), and the full disk is a tmpfs mounted for the test; without the right to mount, those
variants skip and say why.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client

from knowmesh_mcp.api.app import build_app
from knowmesh_mcp.services.mesh import Mesh

from conftest import free_port, opened, serving

pytestmark = pytest.mark.anyio

QUERY = "ModuleNotFoundError: No module named 'requests'"


# -- helpers: real faults ------------------------------------------------------------------------

def mount(*args: str) -> None:
    """`mount ARGS`, or skip the test with the reason when this process may not mount."""
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() or done.returncode}); a real full disk or a "
                    "read-only mount that stops root needs the right to mount (root with CAP_SYS_ADMIN)")


def unmount(target: Path) -> None:
    """Unmount, lazily if something still holds it (a test must never leave a mount behind)."""
    if subprocess.run(["umount", str(target)], capture_output=True, check=False).returncode != 0:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)


@contextmanager
def small_disk(folder: Path, size: str = "8m") -> Iterator[Path]:
    """A tmpfs of `size` mounted on `folder`: a file system that really fills up."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a small file system mounted for the test, which needs root")
    folder.mkdir()
    mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        unmount(folder)


def fill(folder: Path) -> Path:
    """Write one file until the file system holding `folder` has not a byte left; returns it."""
    filler = folder / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (1 << 16, 4096, 1):
            try:
                while True:
                    os.write(descriptor, b"\0" * chunk)
            except OSError as error:
                assert error.errno == errno.ENOSPC, error
    finally:
        os.close(descriptor)
    return filler


@contextmanager
def read_only(db: Path, how: str) -> Iterator[None]:
    """The database file (`how` "file") or its folder ("folder") made read-only for real.

    As another user, a file mode does it (0444, or 0555 on the folder). Root ignores modes, so for
    root the file or folder is bound read-only onto itself: the kernel then refuses every write (EROFS).
    """
    target = db if how == "file" else db.parent
    if os.geteuid() == 0:
        mount("--bind", str(target), str(target))
        try:
            mount("-o", "remount,bind,ro", str(target))
            yield
        finally:
            unmount(target)
        return
    mode = target.stat().st_mode & 0o7777
    target.chmod(0o444 if how == "file" else 0o555)
    try:
        yield
    finally:
        target.chmod(mode)


def btree_read_by(db: Path, sql: str) -> str:
    """The table or index SQLite reads to answer `sql` (a count reads the smallest covering index)."""
    with closing(sqlite3.connect(db)) as connection:
        detail = connection.execute(f"EXPLAIN QUERY PLAN {sql}").fetchone()[3]  # "SCAN nodes USING COVERING INDEX x"
    return detail.split()[-1] if " INDEX " in detail else detail.split()[1]


def damage_a_middle_page(db: Path, btree: str) -> int:
    """Overwrite the start of the middle leaf page of a table's or index's b-tree (the file is closed);
    returns its page number. The page type byte becomes invalid, so reading it is SQLITE_CORRUPT."""
    with closing(sqlite3.connect(db)) as connection:
        try:
            pages = [page for (page,) in connection.execute(
                "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", (btree,))]
        except sqlite3.OperationalError:
            pytest.skip("this SQLite has no dbstat table to find the pages of a table with")
        (page_size,), = connection.execute("PRAGMA page_size")
    page = pages[len(pages) // 2]
    with open(db, "r+b") as file:
        file.seek((page - 1) * page_size)
        file.write(b"\xee" * 48)
    return page


# -- helpers: the programs -----------------------------------------------------------------------

def cli(db: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`knowmesh-mcp ARGS` as a real process on `db`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_")} | {"KNOWMESH_DB": str(db)}
    return subprocess.run([sys.executable, "-m", "knowmesh_mcp.cli.main", *args], capture_output=True, text=True,
                          input="", env=env, timeout=timeout, check=False)


@contextmanager
def served(db: Path, *flags: str, log: Path) -> Iterator[str]:
    """`knowmesh-mcp serve --http FLAGS` as a real process on `db` (its stderr in `log`); yields its URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMESH_")} | {"KNOWMESH_DB": str(db)}
    with open(log, "w") as stderr:
        server = subprocess.Popen([sys.executable, "-m", "knowmesh_mcp.cli.main", "serve", "--http", "--port", str(port),
                                   *flags], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"the server ended: {log.read_text()}"
            assert time.monotonic() < deadline, f"the server did not start: {log.read_text()}"
            try:
                if httpx2.get(f"{url}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def assert_no_traceback(*outputs: str) -> None:
    for output in outputs:
        assert "Traceback" not in output, output


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def written(service: Mesh) -> list[dict[str, Any]]:
    return [document async for document in service.documents.export_documents()]


# -- 1. a full disk --------------------------------------------------------------------------------

def assert_storage_full(response: httpx2.Response, tool_result: Any) -> None:
    """507 storage_full over HTTP, and the same body as the MCP tool's error."""
    assert response.status_code == 507, response.text
    error = response.json()["error"]
    assert error["code"] == "storage_full" and "nothing was written" in error["message"]
    assert tool_result.is_error and tool_result.structured_content == response.json()


async def test_a_write_on_a_full_sqlite_disk_is_507_storage_full_and_writes_nothing(tmp_path, make_doc, caplog, capfd):
    """The mesh's file system has no byte left: SQLite's own SQLITE_FULL (the WAL cannot grow). Over
    HTTP and MCP the write is 507 storage_full, nothing of it is stored, no traceback is logged,
    and once space is freed the same request succeeds (the writer connection is left usable)."""
    with small_disk(tmp_path / "disk") as disk:
        service = await Mesh.open(disk / "mesh.db", seed=False)
        try:
            document = make_doc(id="python/written-on-a-full-disk", error="OSError: [Errno 28] No space left on device")
            async with serving(build_app(service=service)) as url:
                async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
                    # a server that has written before (its address secret exists beside the database)
                    assert (await http.post("/v1/nodes", json=make_doc(id="python/before-the-disk-filled"))).status_code == 201
                    before = await written(service)
                    filler = fill(disk)
                    response = await http.post("/v1/nodes", json=document)
                    async with Client(f"{url}/mcp") as client:
                        tool_result = await client.call_tool("create_node", document)
                    after = await written(service)
                    searched = await http.get("/v1/search", params={"q": QUERY})  # reads go on
                    filler.unlink()
                    again = await http.post("/v1/nodes", json=document)
        finally:
            await service.close()
    assert_storage_full(response, tool_result)
    assert after == before and searched.status_code == 200
    assert again.status_code == 201, again.text
    assert_no_traceback(caplog.text, capfd.readouterr().err)


def test_a_cli_write_on_a_full_sqlite_disk_is_one_line_and_exit_1(tmp_path, make_doc):
    """`knowmesh-mcp import` into a mesh whose disk is full: one line naming the fault, exit 1 (a
    runtime error, not bad usage), no traceback, and the database file as it was."""
    documents = tmp_path / "documents.jsonl"
    documents.write_text("".join(json.dumps(make_doc(id=f"python/full-disk-{i}")) + "\n" for i in range(40)))
    with small_disk(tmp_path / "disk") as disk:
        db = disk / "mesh.db"
        assert cli(db, "import", "--empty", str(documents)).returncode == 0  # made, then closed
        fill(disk)
        before = digest(db)
        imported = cli(db, "import", str(documents), "-v")
        assert digest(db) == before
    assert imported.returncode == 1, (imported.stdout, imported.stderr)
    assert imported.stderr.startswith("knowmesh-mcp: ") and "is full" in imported.stderr, imported.stderr
    assert "nothing was written" in imported.stderr, imported.stderr
    assert len(imported.stderr.strip().splitlines()) == 1, imported.stderr
    assert_no_traceback(imported.stderr)


DISK_FULL_FUNCTION = """CREATE FUNCTION knowmesh_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'could not extend file "base/16384/16385": No space left on device' USING ERRCODE = 'disk_full';
END $$"""
DISK_FULL_TRIGGERS = {
    # the INSERT itself fails, as when a table's file cannot grow
    "statement": "CREATE TRIGGER knowmesh_test_disk_full BEFORE INSERT ON nodes "
                 "FOR EACH ROW EXECUTE FUNCTION knowmesh_test_disk_full()",
    # the COMMIT fails, as when the WAL cannot grow at commit
    "commit": "CREATE CONSTRAINT TRIGGER knowmesh_test_disk_full AFTER INSERT ON nodes DEFERRABLE INITIALLY DEFERRED "
              "FOR EACH ROW EXECUTE FUNCTION knowmesh_test_disk_full()",
}


@pytest.mark.parametrize("when", list(DISK_FULL_TRIGGERS))
async def test_a_write_on_a_full_postgres_disk_is_507_storage_full_and_writes_nothing(pg_database, make_doc, caplog,
                                                                                      capfd, when):
    """PostgreSQL's SQLSTATE 53100 (psycopg.errors.DiskFull), at a statement or at COMMIT: 507
    storage_full over HTTP and MCP, nothing stored, no traceback; the write queue and the mesh's
    lock are released, so the same request succeeds once the disk has room."""
    import psycopg

    service = await Mesh.open(pg_database, seed=False)
    try:
        document = make_doc(id="python/written-on-a-full-disk", error="OSError: [Errno 28] No space left on device")
        with psycopg.connect(pg_database, autocommit=True) as admin:
            admin.execute(DISK_FULL_FUNCTION)
            admin.execute(DISK_FULL_TRIGGERS[when])
            async with serving(build_app(service=service)) as url:
                async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
                    response = await http.post("/v1/nodes", json=document)
                    async with Client(f"{url}/mcp") as client:
                        tool_result = await client.call_tool("create_node", document)
                    after = await written(service)
                    admin.execute("DROP TRIGGER knowmesh_test_disk_full ON nodes")
                    again = await http.post("/v1/nodes", json=document)
    finally:
        await service.close()
    assert_storage_full(response, tool_result)
    assert after == []
    assert again.status_code == 201, again.text
    assert_no_traceback(caplog.text, capfd.readouterr().err)


# -- 2. damaged pages ---------------------------------------------------------------------------------

@pytest.fixture
async def big_mesh(tmp_path, make_doc) -> Path:
    """A closed mesh of several hundred nodes: the starter corpus and 300 more."""
    db = tmp_path / "damaged.db"
    async with opened(db, seed=True) as service:
        extra = [("generated", make_doc(id=f"python/generated-{i}", error=f"GeneratedError{i}: case {i} failed"))
                 for i in range(300)]
        await service.documents.import_documents(extra)
        assert await service.store.count_nodes() >= 400
    return db


# What health reads, each from a b-tree of its own: counting the nodes, the tokens.
DAMAGED = {"node count": "SELECT count(*) FROM nodes", "tokens": "SELECT role FROM agent_tokens"}


@pytest.mark.parametrize("fact", list(DAMAGED))
async def test_health_and_doctor_name_damaged_pages_instead_of_a_500(big_mesh, capfd, fact):
    """A page of what health reads overwritten after the mesh was closed: GET /v1/health answers
    (200: the report was made) with ok false, the failed integrity check and the fact it could not
    read among its problems, and `doctor` exits 1 with the reason, neither with a traceback."""
    db = big_mesh
    page = damage_a_middle_page(db, btree_read_by(db, DAMAGED[fact]))
    with closing(sqlite3.connect(db)) as connection:  # the damage is real: SQLite itself finds it
        assert connection.execute("PRAGMA quick_check(1)").fetchone()[0] != "ok"
        with pytest.raises(sqlite3.DatabaseError, match="malformed"):
            connection.execute(DAMAGED[fact]).fetchall()

    async with serving(build_app(db_path=str(db), with_mcp=False)) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
            response = await http.get("/v1/health")
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["ok"] is False
    assert report["problems"][:2] == [
        f"the database fails its integrity check: Page {page}: btreeInitPage() returns error code 11: "
        "restore it from a backup",
        f"the {fact} could not be read: database disk image is malformed"], report["problems"]

    checked = cli(db, "doctor")
    assert checked.returncode == 1, (checked.stdout, checked.stderr)
    problems = [line for line in checked.stdout.splitlines() if line.startswith("PROBLEM ")]
    assert problems[:2] == [f"PROBLEM         {problem}" for problem in report["problems"][:2]], checked.stdout
    assert_no_traceback(checked.stderr, capfd.readouterr().err)


async def test_doctor_names_a_mesh_too_damaged_to_open(big_mesh):
    """The page of schema_migrations (which every open reads) overwritten: doctor cannot make a
    report, and says the file is damaged (exit 1, a runtime fault), not that it is not a knowmesh
    database (exit 2, as for a file of another application)."""
    damage_a_middle_page(big_mesh, "schema_migrations")
    checked = cli(big_mesh, "doctor")
    assert checked.returncode == 1, (checked.stdout, checked.stderr)
    assert checked.stderr == (f"knowmesh-mcp: {big_mesh} is damaged (database disk image is malformed): "
                              "restore it from a backup\n")


# -- 3. a read-only mesh -------------------------------------------------------------------------------

@pytest.fixture
def mesh_file(tmp_path) -> Path:
    """A closed mesh with the starter corpus, alone in its folder (the folder variant makes that folder read-only)."""
    db = tmp_path / "mesh" / "mesh.db"
    db.parent.mkdir()
    assert cli(db, "search", QUERY).returncode == 0  # the first command on a path makes the mesh
    return db


@pytest.mark.parametrize("how", ["file", "folder"])
def test_a_read_only_mesh_can_be_searched_read_and_checked_from_the_cli(mesh_file, how):
    """search, read and doctor work on a mesh file (or folder) that may not be written; a command
    that writes is one line naming the fault (exit 2), and the file is unchanged."""
    before = digest(mesh_file)
    with read_only(mesh_file, how):
        searched = cli(mesh_file, "search", QUERY, "--json")
        found = json.loads(searched.stdout)["results"][0]["id"] if searched.returncode == 0 else "python/x"
        read = cli(mesh_file, "read", found)
        checked = cli(mesh_file, "doctor")
        token = cli(mesh_file, "token", "add", "alice")
    assert searched.returncode == 0, searched.stderr
    assert read.returncode == 0 and f'id: "{found}"' in read.stdout, read.stderr
    assert checked.returncode == 0 and checked.stdout.splitlines()[-1] == "ok", (checked.stdout, checked.stderr)
    assert token.returncode == 2, (token.stdout, token.stderr)
    assert "read_only_database" in token.stderr and len(token.stderr.strip().splitlines()) == 1, token.stderr
    assert_no_traceback(searched.stderr, read.stderr, checked.stderr, token.stderr)
    assert digest(mesh_file) == before


@pytest.mark.parametrize("how", ["file", "folder"])
def test_serve_read_only_serves_a_read_only_mesh(mesh_file, tmp_path, how):
    """`serve --http --read-only` on a mesh that may not be written starts and answers searches,
    reads and health."""
    log = tmp_path / "serve.log"
    with read_only(mesh_file, how), served(mesh_file, "--read-only", log=log) as url:
        searched = httpx2.get(f"{url}/v1/search", params={"q": QUERY}, timeout=30)
        node = searched.json()["results"][0]["id"]
        read = httpx2.get(f"{url}/v1/nodes/{node}", timeout=30)
        health = httpx2.get(f"{url}/v1/health", timeout=30).json()
    assert searched.status_code == 200 and read.status_code == 200, (searched.text, read.text)
    assert health["ok"] is True, health["problems"]
    assert_no_traceback(log.read_text())


@pytest.mark.parametrize("how", ["file", "folder"])
async def test_a_write_on_a_read_only_mesh_is_a_named_error_not_a_500(mesh_file, make_doc, caplog, capfd, how):
    """A server (not --read-only) on a mesh that may not be written serves reads, and answers a
    write over HTTP and MCP with 403 read_only_database, before anything is made beside the
    database (its address secret), with no traceback."""
    before = digest(mesh_file)
    document = make_doc(id="python/written-on-a-read-only-mesh")
    with read_only(mesh_file, how):
        async with serving(build_app(db_path=str(mesh_file))) as url:
            async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
                searched = await http.get("/v1/search", params={"q": QUERY})
                response = await http.post("/v1/nodes", json=document)
                async with Client(f"{url}/mcp") as client:
                    tool_result = await client.call_tool("create_node", document)
    assert searched.status_code == 200, searched.text
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "read_only_database" and "nothing was written" in error["message"]
    assert tool_result.is_error and tool_result.structured_content == response.json()
    assert digest(mesh_file) == before
    assert_no_traceback(caplog.text, capfd.readouterr().err)


def test_a_read_only_mesh_that_would_need_a_write_to_open_says_so(mesh_file, tmp_path):
    """A read-only mesh cannot be migrated, and a read-only empty file holds no mesh: one line
    each (exit 2), naming what to do, and neither file changes."""
    with closing(sqlite3.connect(mesh_file)) as connection, connection:
        (latest,), = connection.execute("SELECT max(version) FROM schema_migrations")
        connection.execute("DELETE FROM schema_migrations WHERE version = ?", (latest,))  # as an older version left it
    empty = tmp_path / "mesh" / "empty.db"
    empty.touch()
    before = digest(mesh_file)
    with read_only(mesh_file, "folder"):
        older = cli(mesh_file, "search", QUERY)
        nothing = cli(empty, "search", QUERY)
    assert older.returncode == 2 and older.stderr == (
        f"knowmesh-mcp: {mesh_file} is read-only and its schema (version {latest - 1}) is older than this code's "
        f"({latest}): open it once where it may be written, to migrate it\n"), older.stderr
    assert nothing.returncode == 2 and nothing.stderr == (
        f"knowmesh-mcp: {empty} is empty and read-only: there is no mesh in it to read\n"), nothing.stderr
    assert digest(mesh_file) == before and empty.read_bytes() == b""


def test_a_read_only_mesh_indexed_by_another_version_says_so_and_a_pending_corpus_is_served_as_it_is(mesh_file):
    """Opening needed a write (rebuild the index, load a pending starter corpus) and answered
    read_only_database, whose message says reads still work: they did not."""
    with closing(sqlite3.connect(mesh_file)) as connection, connection:
        (index,), = connection.execute("SELECT value FROM meta WHERE key = 'search_index_version'")
        connection.execute("UPDATE meta SET value = 'pending' WHERE key = 'starter_corpus'")
    with read_only(mesh_file, "folder"):
        pending = cli(mesh_file, "search", QUERY)
    with closing(sqlite3.connect(mesh_file)) as connection, connection:
        connection.execute("UPDATE meta SET value = '0' WHERE key = 'search_index_version'")
    before = digest(mesh_file)
    with read_only(mesh_file, "folder"):
        stale = cli(mesh_file, "search", QUERY)
    assert pending.returncode == 0 and pending.stderr == "", pending.stderr
    assert stale.returncode == 2 and stale.stderr == (
        f"knowmesh-mcp: {mesh_file} is read-only and its search index was built by another version: open it once "
        "where it may be written, to rebuild it\n"), stale.stderr
    assert digest(mesh_file) == before and index != "0"


# -- the address secret beside the database ---------------------------------------------------


def test_a_full_disk_leaves_no_empty_address_secret_to_key_every_hash(tmp_path, monkeypatch):
    """The secret file was created first and written after: on a full disk it stayed empty, and every
    client address was then hashed with an empty key, also after space was freed."""
    from knowmesh_mcp.core.addresses import SECRET_ENV, address_secret
    from knowmesh_mcp.core.errors import KnowmeshError

    monkeypatch.delenv(SECRET_ENV, raising=False)
    with small_disk(tmp_path / "disk") as disk:
        db = str(disk / "mesh.db")
        filler = fill(disk)
        with pytest.raises(KnowmeshError) as full:
            address_secret(db)
        assert (full.value.status, full.value.code) == (507, "storage_full")
        assert sorted(path.name for path in disk.iterdir()) == ["filler"], "nothing half made"
        filler.unlink()
        made = address_secret(db)
    assert len(made) == 64 and int(made, 16) >= 0


def test_an_empty_address_secret_an_older_version_left_is_replaced(tmp_path, monkeypatch):
    from knowmesh_mcp.core.addresses import SECRET_ENV, address_secret, secret_file

    monkeypatch.delenv(SECRET_ENV, raising=False)
    db = str(tmp_path / "mesh.db")
    secret_file(db).write_text("")
    made = address_secret(db)
    assert len(made) == 64 and secret_file(db).read_text().strip() == made and address_secret(db) == made
    assert sorted(path.name for path in tmp_path.iterdir()) == ["mesh.db.address-secret"]
