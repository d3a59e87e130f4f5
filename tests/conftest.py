"""What every test shares.

* ``tests/pg_plugin.py``: the PostgreSQL and pgbouncer plumbing (``pg_url``,
  ``pg_fresh_url``, ``pgbouncer``, ``backend``, ``store_factory``, ...), one
  plugin so every directory reaches the same session server by fixture name.
* ``_clean_env`` (autouse): no test sees the developer's ``ROTIFER_PROJECT`` or
  ``ROTIFER_MEMORY_URL``; a test that wants one sets it (``monkeypatch``).
* ``project``: a fresh project (``rotifer init``) in the test's temp dir.
* ``pytest_configure``: Ctrl-C is deliverable even when the suite was started
  with SIGINT ignored (a background job of a script, ``nohup``).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from rotifer.agents.project import Project

pytest_plugins = ["tests.pg_plugin"]


def pytest_configure(config: pytest.Config) -> None:
    """The tests of Ctrl-C send real SIGINTs, to this process and to the
    rotifer processes it starts.  A shell starts a background job with SIGINT
    ignored, and an ignored signal stays ignored across ``exec``: the suite run
    from such a job (``make test &`` in a script) would see every Ctrl-C
    vanish.  Python's own handler here makes children start with the default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests pick their project and store explicitly."""
    monkeypatch.delenv("ROTIFER_PROJECT", raising=False)
    monkeypatch.delenv("ROTIFER_MEMORY_URL", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project.init(tmp_path / "proj")
