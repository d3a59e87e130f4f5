"""A pytest plugin that runs LangGraph's own store tests against RotiferStore
(issue 32): the store's construction is the only change.

``scripts/langgraph_suites.py`` unpacks the tests of the pinned
langgraph-checkpoint, langgraph-checkpoint-sqlite and
langgraph-checkpoint-postgres source distributions and runs pytest on them
with ``-p rotifer_upstream``.  After collection this plugin replaces, in each
test module, the names of LangGraph's store classes (``InMemoryStore``,
``SqliteStore``, ``AsyncSqliteStore``, ``PostgresStore``,
``AsyncPostgresStore``) with stand-ins whose constructors and
``from_conn_string`` make a ``RotiferStore`` acting as one gene of a fresh
agent (a fresh SQLite memory in a temporary directory, or on the PostgreSQL
of ``ROTIFER_UPSTREAM_PG_URL`` -- for checkpoint-postgres, in the database
its fixture made); ``setup()`` has nothing to do, and what checkpoint-postgres's
fixtures use of PostgresStore itself has a stand-in saying what it does
(``MIGRATIONS``, the TTL sweeper, ``_cursor()``).  Its fixtures' server is
``ROTIFER_UPSTREAM_FIXTURE_PG_URL``.  Everything else in the tests is theirs.
The tests left out, each with its reason, are :data:`LEFT_OUT` and
:data:`LEFT_OUT_MATCHING`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest

from rotifer.langgraph import RotiferStore
from rotifer.langgraph.callers import GeneCaller
from rotifer.langgraph.ttl import check_config as check_ttl_config
from rotifer.memory import MemoryStore

GENE = "v2:" + "a" * 64
_MADE: list[tuple[MemoryStore, Path]] = []


def _memory(conn_string: str | None = None) -> MemoryStore:
    """A fresh memory: on PostgreSQL (``ROTIFER_UPSTREAM_PG_URL`` set) in the
    database the test made for its store when it names one (checkpoint-postgres's
    fixtures create and drop one per store), else in that server's database;
    otherwise SQLite in a temporary directory."""
    where = Path(tempfile.mkdtemp(prefix="rotifer-upstream-"))
    url = os.environ.get("ROTIFER_UPSTREAM_PG_URL") or None
    if url is not None and conn_string and conn_string.startswith(("postgres://",
                                                                   "postgresql://")):
        url = conn_string
    memory = MemoryStore.open(where / ".rotifer", url)
    _MADE.append((memory, where))
    return memory


def _kept_ttl(ttl: Any) -> Any:
    """The TTL config as given if RotiferStore can keep it, else ``None``:
    checkpoint-postgres's fixtures build every store with a TTL of seconds
    refreshed on read, which rotifer's whole days cannot express; its stores
    are made without one, and the tests of TTL itself are left out."""
    try:
        check_ttl_config(ttl)
    except NotImplementedError:
        return None
    return ttl


class _Stand(RotiferStore):
    """A RotiferStore made as a LangGraph store is made (whatever the arguments:
    a connection, ``index=``, ``ttl=``): one gene of a fresh agent."""

    #: PostgresStore's migrations, which checkpoint-postgres's fixtures rewrite
    #: before ``setup()``: RotiferStore has none (the memory makes its schema).
    MIGRATIONS: ClassVar[list[Any]] = []

    def __init__(self, *args: Any, index: Any = None, ttl: Any = None,
                 conn_string: str | None = None, **kwargs: Any) -> None:
        if index is not None and index.get("distance_type", "cosine") != "cosine":
            raise NotImplementedError("RotiferStore ranks by cosine similarity only")
        memory = _memory(conn_string)
        self._memory, self._conn_string = memory, conn_string
        agent = "lg" + uuid.uuid4().hex[:12]  # one database may hold several tests' agents
        memory.create_agent(agent, quota_bytes=1 << 34)
        super().__init__(GeneCaller(memory.for_gene(agent, GENE, "upstream")), index=index,
                         ttl=_kept_ttl(ttl))

    def _close(self) -> None:
        """Close the memory now (a fixture drops the database it lives in next)."""
        for n, (memory, where) in enumerate(_MADE):
            if memory is self._memory:
                del _MADE[n]
                memory.close()
                shutil.rmtree(where, ignore_errors=True)
                return


class _Sync(_Stand):
    """Stands in for SqliteStore / PostgresStore / InMemoryStore."""

    def setup(self) -> None:
        """Nothing to set up: the memory's schema is made when it opens."""

    def start_ttl_sweeper(self, *args: Any, **kwargs: Any) -> None:
        """No sweeper: expired entries are purged by the memory's next call."""

    def stop_ttl_sweeper(self, *args: Any, **kwargs: Any) -> bool:
        return True

    @contextmanager
    def _cursor(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        """A real cursor on the test's database (where the memory lives): the
        fixtures' own statements (dropping PostgresStore's migration table) run
        there for real and find nothing of PostgresStore's."""
        with psycopg.connect(self._conn_string or "", autocommit=True) as conn, \
                conn.cursor() as cur:
            yield cur

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, *, index: Any = None, ttl: Any = None,
                         **kwargs: Any) -> Iterator[RotiferStore]:
        store = cls(index=index, ttl=ttl, conn_string=conn_string)
        try:
            yield store
        finally:
            store._close()


class _Async(_Stand):
    """Stands in for AsyncSqliteStore / AsyncPostgresStore."""

    async def setup(self) -> None:
        """Nothing to set up: the memory's schema is made when it opens."""

    async def start_ttl_sweeper(self, *args: Any, **kwargs: Any) -> None:
        """No sweeper: expired entries are purged by the memory's next call."""

    async def stop_ttl_sweeper(self, *args: Any, **kwargs: Any) -> bool:
        return True

    @asynccontextmanager
    async def _cursor(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """As :meth:`_Sync._cursor`, async."""
        async with await psycopg.AsyncConnection.connect(
                self._conn_string or "", autocommit=True) as conn, conn.cursor() as cur:
            yield cur

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, *, index: Any = None, ttl: Any = None,
                               **kwargs: Any) -> AsyncIterator[RotiferStore]:
        store = cls(index=index, ttl=ttl, conn_string=conn_string)
        try:
            yield store
        finally:
            store._close()


STAND_INS = {"InMemoryStore": _Sync, "SqliteStore": _Sync, "PostgresStore": _Sync,
             "AsyncSqliteStore": _Async, "AsyncPostgresStore": _Async}

#: Tests left out, by the start of ``package:file::name``, and why.
LEFT_OUT: dict[str, str] = {
    # TTL in minutes, refreshed on read: rotifer keeps whole days from the last
    # write (docs/langgraph.md, TTL).
    "langgraph_checkpoint_sqlite:test_ttl.py": "TTL in minutes with refresh on read",
    # The SQL stores' own machinery, which RotiferStore does not have.
    "langgraph_checkpoint_sqlite:test_store.py::test_vector_store_initialization": "reads SqliteStore's sqlite3 "
        "connection (store.conn)",
    "langgraph_checkpoint_sqlite:test_store.py::test_nonnull_migrations": "SqliteStore's schema migrations",
    "langgraph_checkpoint_sqlite:test_store.py::test_sql_injection_vulnerability": "SqliteStore refuses filter keys "
        "beyond [A-Za-z0-9_.-] to keep them out of its SQL; rotifer filters in Python, so any "
        "JSON key is a filter key (as InMemoryStore)",
    "langgraph_checkpoint_sqlite:test_async_store.py::test_no_running_loop": "AsyncSqliteStore's sync methods refuse "
        "to run in the event loop's thread; RotiferStore's work in any thread",
}


def _fixture_server() -> str | None:
    """checkpoint-postgres's fixtures create a database per store on the server
    of their ``DEFAULT_URI`` (a docker compose server on port 5441): the
    throwaway server of ``ROTIFER_UPSTREAM_FIXTURE_PG_URL`` instead, its
    ``postgres`` database as theirs."""
    url = os.environ.get("ROTIFER_UPSTREAM_FIXTURE_PG_URL")
    if not url:
        return None
    return url.rsplit("/", 1)[0] + "/postgres?sslmode=disable"


_PG = "langgraph_checkpoint_postgres:"
LEFT_OUT.update({
    # TTL: the fixtures' TTL of seconds, refreshed on read (the stores are made
    # without it, see _kept_ttl); these tests are about TTL itself.
    _PG + "test_store.py::test_store_ttl": "TTL in minutes with refresh on read",
    _PG + "test_async_store.py::test_store_ttl": "TTL in minutes with refresh on read",
    _PG + "test_store.py::test_omit_expired": "TTL: backdates expires_at in PostgresStore's "
        "store table",
    _PG + "test_async_store.py::test_omit_expired": "TTL: backdates expires_at in "
        "PostgresStore's store table",
    # PostgresStore's own machinery.
    _PG + "test_store.py::test_escape_like_literal": "tests PostgresStore's LIKE escaping "
        "helper, no store",
    _PG + "test_store.py::test_namespace_match_pattern": "tests PostgresStore's pattern "
        "helper, no store",
    _PG + "test_store.py::test_nonnull_migrations": "PostgresStore's schema migrations",
    _PG + "test_async_store.py::test_no_running_loop": "AsyncPostgresStore's sync methods "
        "refuse to run in the event loop's thread; RotiferStore's work in any thread",
    _PG + "test_async_store.py::test_abatch_uses_single_pool_checkout": "counts checkouts "
        "of AsyncPostgresStore's connection pool",
})

#: Tests left out by a pattern (``re.search`` on ``package:file::name[params]``).
LEFT_OUT_MATCHING: dict[str, str] = {
    # pgvector's other distances: rotifer ranks by cosine similarity only.
    _PG + r".*\[.*(l2|inner_product|hamming).*\]": "distance_type l2 / inner_product: "
        "RotiferStore ranks by cosine similarity only",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    server = _fixture_server()
    for item in items:
        where = f"{item.path.parent.parent.name.split('-')[0]}:{item.nodeid.split('/')[-1]}"
        if any(where.startswith(prefix) for prefix in LEFT_OUT) or any(
                re.search(pattern, where) for pattern in LEFT_OUT_MATCHING):
            dropped.append(item)
            continue
        module = getattr(item, "module", None)
        if module is not None:
            for name, stand_in in STAND_INS.items():
                if name in vars(module):
                    setattr(module, name, stand_in)
            if server is not None:
                for holder in (module, sys.modules.get("tests.conftest")):
                    for name in ("DEFAULT_URI", "DEFAULT_POSTGRES_URI"):
                        if holder is not None and name in vars(holder):
                            setattr(holder, name, server if name == "DEFAULT_URI"
                                    else server.split("postgres?")[0])
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield  # the test's fixtures are finalized: close the memories it made
    while _MADE:
        memory, where = _MADE.pop()
        memory.close()
        shutil.rmtree(where, ignore_errors=True)
