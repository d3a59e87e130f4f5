"""A pytest plugin that runs LangGraph's own store tests against RotiferStore
(issue 32): the store's construction is the only change.

``scripts/langgraph_suites.py`` unpacks the tests of the pinned
langgraph-checkpoint, langgraph-checkpoint-sqlite (and, with a PostgreSQL URL,
langgraph-checkpoint-postgres) source distributions and runs pytest on them
with ``-p rotifer_upstream``.  After collection this plugin replaces, in each
test module, the names of LangGraph's store classes (``InMemoryStore``,
``SqliteStore``, ``AsyncSqliteStore``, ``PostgresStore``,
``AsyncPostgresStore``) with stand-ins whose constructors and
``from_conn_string`` make a ``RotiferStore`` acting as one gene of a fresh
agent (a fresh SQLite memory in a temporary directory, or on the PostgreSQL
of ``ROTIFER_UPSTREAM_PG_URL``); ``setup()`` has nothing to do.  Everything
else in the tests is theirs.  The tests left out, each with its reason, are
:data:`LEFT_OUT`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from rotifer.langgraph import RotiferStore
from rotifer.langgraph.callers import GeneCaller
from rotifer.memory import MemoryStore

GENE = "v2:" + "a" * 64
_MADE: list[tuple[MemoryStore, Path]] = []


def _memory() -> MemoryStore:
    where = Path(tempfile.mkdtemp(prefix="rotifer-upstream-"))
    url = os.environ.get("ROTIFER_UPSTREAM_PG_URL") or None
    memory = MemoryStore.open(where / ".rotifer", url)
    _MADE.append((memory, where))
    return memory


class _Stand(RotiferStore):
    """A RotiferStore made as a LangGraph store is made (whatever the arguments:
    a connection, ``index=``, ``ttl=``): one gene of a fresh agent."""

    def __init__(self, *args: Any, index: Any = None, ttl: Any = None, **kwargs: Any) -> None:
        memory = _memory()
        agent = "lg" + uuid.uuid4().hex[:12]  # one database may hold several tests' agents
        memory.create_agent(agent, quota_bytes=1 << 34)
        super().__init__(GeneCaller(memory.for_gene(agent, GENE, "upstream")), index=index,
                         ttl=ttl)


class _Sync(_Stand):
    """Stands in for SqliteStore / PostgresStore / InMemoryStore."""

    def setup(self) -> None:
        """Nothing to set up: the memory's schema is made when it opens."""

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, *, index: Any = None, ttl: Any = None,
                         **kwargs: Any) -> Iterator[RotiferStore]:
        yield cls(index=index, ttl=ttl)


class _Async(_Stand):
    """Stands in for AsyncSqliteStore / AsyncPostgresStore."""

    async def setup(self) -> None:
        """Nothing to set up: the memory's schema is made when it opens."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, *, index: Any = None, ttl: Any = None,
                               **kwargs: Any) -> AsyncIterator[RotiferStore]:
        yield cls(index=index, ttl=ttl)


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        where = f"{item.path.parent.parent.name.split('-')[0]}:{item.nodeid.split('/')[-1]}"
        if any(where.startswith(prefix) for prefix in LEFT_OUT):
            dropped.append(item)
            continue
        module = getattr(item, "module", None)
        if module is not None:
            for name, stand_in in STAND_INS.items():
                if name in vars(module):
                    setattr(module, name, stand_in)
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
