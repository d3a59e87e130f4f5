"""What every test shares.

* ``tests/pg_plugin.py``: the PostgreSQL and pgbouncer plumbing (``pg_url``,
  ``pg_fresh_url``, ``pgbouncer``, ``backend``, ``store_factory``, ...), one
  plugin so every directory reaches the same session server by fixture name.
* ``_clean_env`` (autouse): no test sees the developer's ``ROTIFER_PROJECT`` or
  ``ROTIFER_MEMORY_URL``; a test that wants one sets it (``monkeypatch``).
* ``project``: a fresh project (``rotifer init``) in the test's temp dir.
* ``_genes_may_enter``: as root, the folders pytest makes for tests let others
  pass (o+x): contained genes then run as ``nobody``
  (genes/contain/privileges.py) and must reach the gene's folder; pytest makes
  each of these folders 0700.
* ``pytest_configure``: Ctrl-C is deliverable even when the suite was started
  with SIGINT ignored (a background job of a script, ``nohup``).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
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
    if os.geteuid() == 0:
        _genes_may_enter(config)


def _genes_may_enter(config: pytest.Config) -> None:
    """As root: every folder pytest makes for a test (``tmp_path``,
    ``tmp_path_factory.mktemp``, the base above them) lets others pass (o+x,
    not list), as a project's folders usually do, so genes running as nobody
    reach a project made there.  A session without ``--basetemp`` gets a base
    of its own, removed at its end: pytest makes the shared
    ``/tmp/pytest-of-root`` 0700 again at every session's start, which would
    close it under a session running at the same time."""
    if not config.option.basetemp:
        base = Path(tempfile.mkdtemp(prefix="pytest-rotifer-"))
        base.chmod(0o711)
        config.option.basetemp = str(base / "t")
        config.add_cleanup(lambda: shutil.rmtree(base, ignore_errors=True))
    factory = pytest.TempPathFactory
    mktemp, getbasetemp = factory.mktemp, factory.getbasetemp

    def passable(path: Path) -> Path:
        mode = path.stat().st_mode
        if not mode & 0o001:
            path.chmod(mode | 0o001)
        return path

    def opened_mktemp(self: pytest.TempPathFactory, basename: str,
                      numbered: bool = True) -> Path:
        return passable(mktemp(self, basename, numbered))

    def opened_getbasetemp(self: pytest.TempPathFactory) -> Path:
        return passable(getbasetemp(self))

    factory.mktemp = opened_mktemp  # type: ignore[method-assign]
    factory.getbasetemp = opened_getbasetemp  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests pick their project and store explicitly."""
    monkeypatch.delenv("ROTIFER_PROJECT", raising=False)
    monkeypatch.delenv("ROTIFER_MEMORY_URL", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project.init(tmp_path / "proj")
