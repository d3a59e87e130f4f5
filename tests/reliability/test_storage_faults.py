"""A damaged or locked database: MEMORY_STORAGE_ERROR, never a silent fallback or an empty memory.

"Memory never falls back to another store."  An empty answer (a read that
returns null, a query that returns nothing, a formatter that falls back to
its default indent) would be a silent fallback to an empty memory, so every
test below checks the call *fails* with MEMORY_STORAGE_ERROR -- through the
Python API, through a Python gene and through a WASM gene in a real agent.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from rotifer.agents.build import compile_gene, wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.agents.run import run_agent
from rotifer.genes.errors import GeneRejected
from rotifer.memory import AgentMemoryError, AuditLog, ErrorCode, GeneMemory, MemoryStore
from rotifer.memory.storage.postgres import PostgresBackend
from rotifer.memory.storage.sqlite import SqliteBackend
from tests.genes.helpers import FORMATTER, write_gene, write_wat_gene

from .helpers import gene_id

A = gene_id("a")
AGENT = "agent"
PAGE = 4096


def storage_error(fn: Callable[[], object]) -> AgentMemoryError:
    with pytest.raises(AgentMemoryError) as info:
        fn()
    assert info.value.code is ErrorCode.STORAGE_ERROR, info.value
    return info.value


def fill(db: Path, rot: Path, n: int = 300) -> None:
    with MemoryStore.open(rot, url=f"sqlite:{db}") as store:
        store.create_agent(AGENT)
        g = store.for_gene(AGENT, A, "d")
        for i in range(n):
            g.write_memory(f"k{i:04d}", os.urandom(400), "CACHE")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    conn.close()


def every_call(store: MemoryStore) -> dict[str, Callable[[], object]]:
    """Each call from scratch (``for_gene`` itself reads the agent's record)."""

    def g() -> GeneMemory:
        return store.for_gene(AGENT, A, "d")

    return {
        "read": lambda: g().read_memory("k0150"),
        "query": lambda: g().query_memory({"limit": 1000}),
        "write": lambda: g().write_memory("k0001", b"new", "CACHE"),
        "delete": lambda: g().delete_memory("k0002"),
        "list": lambda: store.deployer(AGENT).list(),
        "usage": lambda: store.usage(AGENT),
    }


# -- damaged files ----------------------------------------------------------------

def damage_pages(data: bytearray) -> bytearray:
    """Every page but the first (header and schema) overwritten with noise."""
    data[PAGE:] = os.urandom(len(data) - PAGE)
    return data


def damage_header(data: bytearray) -> bytearray:
    data[:16] = b"not a database!!"
    return data


DAMAGE: dict[str, Callable[[bytearray], bytearray]] = {
    "all-pages-but-the-first": damage_pages,
    "header": damage_header,
    "truncated-to-half": lambda d: d[: len(d) // 2],
    "noise": lambda d: bytearray(os.urandom(len(d))),
}


@pytest.mark.reliability(
    "Faults", "Database file damaged (noise, bad header, truncated, data pages overwritten)",
    "opening or every call (read, query, write, delete, list, usage) is "
    "MEMORY_STORAGE_ERROR; the damaged file is left as it is")
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_database_file(tmp_path: Path, damage: str) -> None:
    """A SQLite file with 300 entries is damaged on disk, then opened: either the open
    fails, or each of the six calls does; none returns null, an empty list or a zero
    total, and the damaged bytes are not replaced by a fresh database."""
    db, rot = tmp_path / "memory.db", tmp_path / ".rotifer"
    fill(db, rot)
    damaged = bytes(DAMAGE[damage](bytearray(db.read_bytes())))
    db.write_bytes(damaged)
    try:
        store = MemoryStore.open(rot, url=f"sqlite:{db}")
    except AgentMemoryError as exc:
        assert exc.code is ErrorCode.STORAGE_ERROR
    else:
        try:
            for name, call in every_call(store).items():
                err = storage_error(call)
                assert "malformed" in str(err) or "damaged" in str(err), (name, err)
        finally:
            store.close()
    assert db.read_bytes()[:PAGE] == damaged[:PAGE]


SQLITE_EDITS = {
    "unknown-category": "UPDATE memory_entries SET category = 'BOGUS' WHERE key = 'k0150'",
    "retention-not-json": "UPDATE memory_entries SET retention = '{oops' WHERE key = 'k0150'",
    "retention-wrong-shape": "UPDATE memory_entries SET retention = '{\"days\": 3}' "
                             "WHERE key = 'k0150'",
    "unknown-scope": "UPDATE memory_entries SET read_scope = 'EVERYONE' WHERE key = 'k0150'",
    "value-as-text": "UPDATE memory_entries SET value = 'text' WHERE key = 'k0150'",
}


@pytest.mark.reliability(
    "Faults", "A stored row that cannot be decoded (unknown category or scope, retention "
    "that is not a policy, value stored as text)",
    "MEMORY_STORAGE_ERROR for read, query, write and list (regression: a ValueError or "
    "MEMORY_INVALID_INPUT escaped before)")
@pytest.mark.parametrize("edit", list(SQLITE_EDITS))
def test_undecodable_row_sqlite(tmp_path: Path, edit: str) -> None:
    """One row of a well-formed SQLite file is edited to hold something the store never
    writes; every call that reads that row must fail with MEMORY_STORAGE_ERROR."""
    db, rot = tmp_path / "memory.db", tmp_path / ".rotifer"
    fill(db, rot, n=5 + 150)
    conn = sqlite3.connect(db)
    conn.execute(SQLITE_EDITS[edit])
    conn.commit()
    conn.close()
    with MemoryStore.open(rot, url=f"sqlite:{db}") as store:
        calls = every_call(store)
        for name in ("read", "query", "list"):
            err = storage_error(calls[name])
            assert "damaged" in str(err), (name, err)
        g = store.for_gene(AGENT, A, "d")
        storage_error(lambda: g.write_memory("k0150", b"x", "CACHE"))
        storage_error(lambda: g.delete_memory("k0150"))


@pytest.mark.postgres
@pytest.mark.reliability(
    "Faults", "A stored row that cannot be decoded (PostgreSQL: retention JSON of the wrong "
    "shape)", "MEMORY_STORAGE_ERROR for read, query and list (regression)")
def test_undecodable_row_postgres(pg_fresh_url: str, tmp_path: Path) -> None:
    """A retention policy is edited in PostgreSQL to a JSON object with the wrong fields;
    reading, querying and listing must fail with MEMORY_STORAGE_ERROR."""
    rot = tmp_path / ".rotifer"
    with MemoryStore.open(rot, url=pg_fresh_url) as store:
        store.create_agent(AGENT)
        store.for_gene(AGENT, A, "d").write_memory("k0150", b"v", "CACHE")
        with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
            conn.execute("UPDATE memory_entries SET retention = '{\"days\": 3}'::jsonb")
        calls = every_call(store)
        for name in ("read", "query", "list"):
            assert "damaged" in str(storage_error(calls[name])), name


# -- through real agents ------------------------------------------------------------

@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.delenv("ROTIFER_PROJECT", raising=False)
    monkeypatch.delenv("ROTIFER_MEMORY_URL", raising=False)
    proj = Project.init(tmp_path / "proj")
    write_gene(proj.genes_dir, "fmt", FORMATTER)
    wrap_gene(proj, "fmt")
    write_wat_gene(proj.genes_dir, "wfmt", "prefs")
    compile_gene(proj, "wfmt")
    agents = Agents(proj)
    agents.create("py", ["fmt"])
    agents.create("wasm", ["wfmt"])
    assert run_agent(proj, "py", {"code": "x", "indent": 8})["indent"] == 8
    assert run_agent(proj, "wasm", {"indent": 8}) == {"indent": 8}
    return proj


def _checkpoint(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _remove(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def _empty(db: Path) -> None:
    _remove(db)
    db.write_bytes(b"")


def _pages(db: Path) -> None:
    _checkpoint(db)
    db.write_bytes(bytes(damage_pages(bytearray(db.read_bytes()))))


PROJECT_FAULTS: dict[str, Callable[[Path], None]] = {
    "deleted": _remove, "emptied": _empty, "pages-damaged": _pages,
}


@pytest.mark.reliability(
    "Faults", "The project's playground.db deleted, emptied or damaged under its agents",
    "`agent run` of a Python and of a WASM gene fails with MEMORY_STORAGE_ERROR; neither "
    "answers from an empty memory (the default indent)")
@pytest.mark.parametrize("fault", list(PROJECT_FAULTS))
def test_agents_never_run_on_an_empty_memory(project: Project, fault: str) -> None:
    """Both agents saved indent 8; the database is then deleted, replaced by an empty file,
    or has its data pages overwritten, and both agents are run again without an indent: a
    Python gene must see MEMORY_STORAGE_ERROR, a WASM gene -13 (reported as a rejection
    with that code), never the default indent 2."""
    PROJECT_FAULTS[fault](project.dot / "playground.db")
    with pytest.raises(AgentMemoryError) as info:
        run_agent(project, "py", {"code": "x"})
    assert info.value.code is ErrorCode.STORAGE_ERROR
    try:
        out = run_agent(project, "wasm", {})
    except AgentMemoryError as exc:
        assert exc.code is ErrorCode.STORAGE_ERROR
    except GeneRejected as exc:
        assert exc.code == "MEMORY_STORAGE_ERROR", exc
    else:
        pytest.fail(f"the WASM gene answered {out} from a damaged memory")


# -- locks ----------------------------------------------------------------------

HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "exclusive-mode":
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE memory_agents SET next_seq = next_seq")
    conn.execute("COMMIT")  # keeps the exclusive lock on the file until the connection closes
else:
    conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
conn.close()
"""


def quick_store(db: Path, rot: Path) -> MemoryStore:
    backend = SqliteBackend(db, busy_timeout_s=0.3)
    return MemoryStore(backend, AuditLog(rot / "audit.jsonl", rot / "telemetry.jsonl"))


@contextmanager
def lock_held(db: Path, how: str) -> Iterator[None]:
    """Another process holds ``db`` locked (``transaction`` or ``exclusive-mode``)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), how],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


@pytest.mark.reliability(
    "Faults", "Database locked by another process's write transaction (SQLite, WAL)",
    "changes fail with MEMORY_STORAGE_ERROR after the busy timeout, unaudited and not "
    "made; reads still see the real entries; all works once the lock goes")
def test_write_locked_database(tmp_path: Path) -> None:
    """A store with a 0.3 s busy timeout is open when another process takes BEGIN
    EXCLUSIVE on the file; the store tries to write, delete and deployer-delete, and to
    read and query; then the lock is released and it writes again."""
    db, rot = tmp_path / "memory.db", tmp_path / ".rotifer"
    fill(db, rot, n=20)
    audit_before = (rot / "audit.jsonl").read_bytes()
    store = quick_store(db, rot)
    try:
        g = store.for_gene(AGENT, A, "d")
        with lock_held(db, "transaction"):
            for call in (lambda: g.write_memory("k0001", b"new", "CACHE"),
                         lambda: g.delete_memory("k0002"),
                         lambda: store.deployer(AGENT).delete_category("CACHE")):
                assert "locked" in str(storage_error(call))
            assert (rot / "audit.jsonl").read_bytes() == audit_before
            entry = g.read_memory("k0001")
            assert entry is not None and len(entry.value) == 400
            assert len(g.query_memory({"limit": 1000})) == 20
        g.write_memory("k0001", b"new", "CACHE")
        assert g.read_memory("k0001").value == b"new"  # type: ignore[union-attr]
    finally:
        store.close()


@pytest.mark.reliability(
    "Faults", "Database held in exclusive locking mode by another process (no one else may "
    "even read)",
    "opening the store fails with MEMORY_STORAGE_ERROR -- it never starts on an empty "
    "memory or a copy")
def test_exclusively_locked_database(tmp_path: Path) -> None:
    """Another process keeps the file in PRAGMA locking_mode=EXCLUSIVE after a write (in
    WAL mode that is only possible while no one else has the file open); opening a store
    on it must fail, and once the holder exits the entries are all there."""
    db, rot = tmp_path / "memory.db", tmp_path / ".rotifer"
    fill(db, rot, n=20)
    with lock_held(db, "exclusive-mode"):
        assert "locked" in str(storage_error(lambda: quick_store(db, rot)))
    store = quick_store(db, rot)
    try:
        assert len(store.deployer(AGENT).list()) == 20
    finally:
        store.close()


@pytest.mark.postgres
@pytest.mark.reliability(
    "Faults", "Agent row locked by another PostgreSQL session",
    "changes fail with MEMORY_STORAGE_ERROR after lock_timeout, unaudited and not made")
def test_locked_agent_postgres(pg_fresh_url: str, tmp_path: Path) -> None:
    """Another session holds SELECT ... FOR UPDATE on the agent's row; a store with a
    300 ms lock_timeout tries to write and delete."""
    rot = tmp_path / ".rotifer"
    with MemoryStore.open(rot, url=pg_fresh_url) as store:
        store.create_agent(AGENT)
        store.for_gene(AGENT, A, "d").write_memory("k", b"v", "CACHE")
    audit_before = (rot / "audit.jsonl").read_bytes()
    store = MemoryStore(PostgresBackend(pg_fresh_url, lock_timeout_ms=300),
                        AuditLog(rot / "audit.jsonl"))
    try:
        with psycopg.connect(pg_fresh_url) as holder:
            holder.execute("SELECT 1 FROM memory_agents WHERE agent_id = %s FOR UPDATE",
                           (AGENT,))
            g = store.for_gene(AGENT, A, "d")
            storage_error(lambda: g.write_memory("k", b"changed", "CACHE"))
            storage_error(lambda: g.delete_memory("k"))
            holder.rollback()
        assert (rot / "audit.jsonl").read_bytes() == audit_before
        entry = store.for_gene(AGENT, A, "d").read_memory("k")
        assert entry is not None and entry.value == b"v"
    finally:
        store.close()


def test_fill_helper_leaves_no_wal(tmp_path: Path) -> None:
    """Guard: the damage tests overwrite the main file, so fill() must checkpoint fully."""
    fill(tmp_path / "m.db", tmp_path / ".rotifer", n=3)
    wal = tmp_path / "m.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    shutil.rmtree(tmp_path / ".rotifer")
