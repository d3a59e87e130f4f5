"""What every test shares.

* ``tests/pg_plugin.py``: the PostgreSQL and pgbouncer plumbing (``pg_url``,
  ``pg_fresh_url``, ``pgbouncer``, ``backend``, ``store_factory``, ...), one
  plugin so every directory reaches the same session server by fixture name.
* ``_clean_env`` (autouse): no test sees the developer's ``ROTIFER_PROJECT`` or
  ``ROTIFER_MEMORY_URL``; a test that wants one sets it (``monkeypatch``).
* ``project``: a fresh project (``rotifer init``) in the test's temp dir.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rotifer.agents.project import Project

pytest_plugins = ["tests.pg_plugin"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests pick their project and store explicitly."""
    monkeypatch.delenv("ROTIFER_PROJECT", raising=False)
    monkeypatch.delenv("ROTIFER_MEMORY_URL", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project.init(tmp_path / "proj")
