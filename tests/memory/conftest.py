"""Fixtures the memory tests share (the PostgreSQL plumbing, ``backend`` and
``store_factory`` are in tests/pg_plugin.py, registered for every test).

``clock``
    A :class:`~rotifer.memory.ManualClock` at 2026-03-01T12:00:00Z.
``rot``
    The test's ``.rotifer`` folder (audit log, telemetry): ``tmp_path / ".rotifer"``.
``empty_store``
    ``store_factory(rot, clock=clock)``: a store on each backend in turn, no agent.
``store``
    ``empty_store`` with the agent ``"agent"`` created, its quota ``agent_quota``
    (the default quota); a module overrides ``agent_quota`` for another.
``admin``
    An autocommit superuser connection to the session's PostgreSQL database.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rotifer.memory import DEFAULT_QUOTA_BYTES, ManualClock, MemoryStore
from tests.pg_plugin import (
    ALL_BACKENDS,
    BACKENDS,
    PgBouncer,
    PgServer,
    SchemaMaker,
    StoreFactory,
    find_pg_bindir,
    find_pgbouncer,
    with_rotifer_schema,
    with_search_path,
)

__all__ = ["ALL_BACKENDS", "BACKENDS", "PgBouncer", "PgServer", "SchemaMaker", "StoreFactory",
           "find_pg_bindir", "find_pgbouncer", "with_rotifer_schema", "with_search_path"]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock("2026-03-01T12:00:00Z")


@pytest.fixture
def rot(tmp_path: Path) -> Path:
    return tmp_path / ".rotifer"


@pytest.fixture
def empty_store(store_factory: StoreFactory, rot: Path, clock: ManualClock) -> MemoryStore:
    return store_factory(rot, clock=clock)


@pytest.fixture
def agent_quota() -> int:
    return DEFAULT_QUOTA_BYTES


@pytest.fixture
def store(empty_store: MemoryStore, agent_quota: int) -> MemoryStore:
    empty_store.create_agent("agent", quota_bytes=agent_quota)
    return empty_store


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn
