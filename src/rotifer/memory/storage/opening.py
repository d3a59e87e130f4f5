"""Opening a store's backend: which one a URL names, the project's SQLite file
otherwise.  :meth:`MemoryStore.open <rotifer.memory.store.MemoryStore.open>`
opens it so; so does what only reads the agents' records (``rotifer agent
list``), which then imports neither the audit log nor the engine -- the write
path of the store (tests/cli/test_startup_imports.py)."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import storage
from ..private import private_dir, secure
from . import URL_VARIABLE
from .backend import Backend


def open_backend(rotifer_dir: Path, url: str | None = None, *, create: bool = True) -> Backend:
    """The backend ``url`` or ``ROTIFER_MEMORY_URL`` names if it is a PostgreSQL
    server's, else ``rotifer_dir/playground.db``.  Never falls back; see
    :meth:`MemoryStore.open <rotifer.memory.store.MemoryStore.open>` for ``create``."""
    rotifer_dir = Path(rotifer_dir)
    if create:
        try:
            private_dir(rotifer_dir)
        except OSError as exc:
            raise storage(f"cannot create {rotifer_dir}: {exc.strerror or exc}") from exc
    secure(rotifer_dir)
    url = url or os.environ.get(URL_VARIABLE) or None
    if url is None or url.startswith("sqlite:"):
        from .sqlite import SqliteBackend

        path = Path(url[len("sqlite:"):]) if url else rotifer_dir / "playground.db"
        return SqliteBackend(path, create=create)
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresBackend  # type: ignore[import-not-found,unused-ignore]

        backend: Backend = PostgresBackend(url)
        return backend
    raise storage(f"unknown memory URL {url!r}: use postgresql://... or sqlite:PATH")
