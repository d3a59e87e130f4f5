"""Fixtures for the LangGraph store tests: the memory suite's real SQLite and
PostgreSQL stores (``backend``, ``store_factory``; see tests/memory/conftest.py)."""

from __future__ import annotations

import pytest

from tests.memory.conftest import (  # noqa: F401  (fixtures, used by name)
    backend,
    pg_schemas,
    pg_url,
    store_factory,
)

pytest.importorskip("langgraph.store.base")
