"""The backend seam: what the store asks of a backend is on the protocols.

Both backends subclass :class:`~rotifer.memory.storage.backend.Backend` and their
transactions :class:`~rotifer.memory.storage.backend.Transaction`, so the store reaches
every capability by its name (no ``getattr`` probing), and SQLite's "is this a
lock wait?" is read from the error's SQLite result code, not its text.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from rotifer.memory import MemoryStore
from rotifer.memory.storage.backend import Backend, Transaction
from rotifer.memory.storage.sqlite.backend import _is_busy
from rotifer.memory.transfer.operations import describe

from .conftest import StoreFactory


def test_both_backends_are_on_the_protocols(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert Backend in type(store.backend).__mro__  # subclassed, so checked by mypy too
    with store.backend.read() as tx:
        assert Transaction in type(tx).__mro__
    assert store.backend.location and "password" not in store.backend.location
    where = describe(store)
    assert where.startswith(f"{store.backend.name}:{store.backend.location}")


def test_sqlite_location_is_the_path_and_has_no_schema(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{db}") as store:
        assert (store.backend.location, store.backend.schema) == (str(db), "")
        assert describe(store) == f"sqlite:{db}"


def test_busy_is_read_from_the_result_code(tmp_path: Path) -> None:
    """A real lock held by another connection is busy; an error whose text
    merely says "locked" (another error code, or none) is not."""
    db = tmp_path / "busy.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(db, isolation_level=None, timeout=0)
    try:
        waiter.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        busy = exc
    else:  # pragma: no cover - the holder's lock is there
        raise AssertionError("BEGIN IMMEDIATE did not wait for the holder")
    assert busy.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY and _is_busy(busy)
    try:
        waiter.execute("SELECT * FROM locked_or_busy_table")
    except sqlite3.OperationalError as exc:
        other = exc
    assert "locked" in str(other) and not _is_busy(other)  # the old text match said busy
    assert not _is_busy(sqlite3.OperationalError("database is locked"))  # no code at all
    holder.execute("ROLLBACK")
    holder.close()
    waiter.close()
