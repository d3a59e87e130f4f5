"""The console tests' shared fixture: ``served``, the console on a project
with entries of every kind, on SQLite and on PostgreSQL, through Starlette's
test client (tests/console/helpers.py's :class:`InProcess`).  The security
tests define their own ``served``: a real uvicorn on loopback, since ports and
sockets are what they attack."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console.helpers import InProcess, Served, make_project


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    url = request.getfixturevalue("pg_fresh_url") if request.param == "postgres" else None
    s = InProcess(make_project(tmp_path / "proj", url))
    yield s
    s.stop()
