"""Fixtures for the LangGraph store tests: the memory suite's real SQLite and
PostgreSQL stores (``backend``, ``store_factory``) come from tests/pg_plugin.py,
registered for every test."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.store.base")
