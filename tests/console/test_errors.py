"""Errors go through Starlette's exception handlers: a coded error (what the CLI
prints as ``CODE: message``) is answered as the error page and goes no further;
an error nobody foresaw is the error page too, ``INTERNAL_ERROR: ...`` (500),
which Starlette raises on to the server, and the console's terminal gets it as
one line, never a traceback."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from rotifer.console.app import create_app
from rotifer.console.security import Guard, Protections
from rotifer.console.server import OneLine, one_line_errors
from tests.console.helpers import Served, make_project


def failing(request: Request) -> Response:
    raise RuntimeError("the disk said no\nand more")


def with_failing_page(guard: Guard) -> None:
    inner = guard.app
    assert isinstance(inner, Starlette)
    inner.router.routes.append(Route("/failing", failing))  # a page that fails


def test_coded_and_unforeseen_errors_are_the_error_page(tmp_path: Path) -> None:
    guard = create_app(make_project(tmp_path / "proj"),
                       protections=Protections(host=False, token=False))
    with_failing_page(guard)
    # The test client raises whatever reaches the server: a coded error does not.
    with TestClient(guard) as client:
        coded = client.get("/agents/nobody")
        assert coded.status_code == 400 and "AGENT_NOT_FOUND" in coded.text
        assert coded.headers["content-security-policy"].startswith("default-src 'none'")
        part = client.get("/agents/nobody", headers={"HX-Request": "true"})
        assert part.status_code == 400 and 'role="alert"' in part.text
        assert "<html" not in part.text
    with TestClient(guard, raise_server_exceptions=False) as client:
        page = client.get("/failing")
        assert page.status_code == 500
        assert "INTERNAL_ERROR: the disk said no and more" in page.text  # one line
        assert page.headers["content-security-policy"].startswith("default-src 'none'")


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def wait(self) -> list[logging.LogRecord]:
        """The records, once there is one (the server logs after it answers)."""
        deadline = time.monotonic() + 60
        while not self.records and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.records


def test_the_terminal_gets_one_line_not_a_traceback(tmp_path: Path) -> None:
    """In a real uvicorn: without the filter the server logs the error with its
    traceback; with it (as ``rotifer console`` runs), one line as the page says it."""
    served = Served(make_project(tmp_path / "proj"))
    with_failing_page(served.server.config.app)
    log = logging.getLogger("uvicorn.error")
    kept = Kept()
    log.addHandler(kept)
    try:
        for f in [f for f in log.filters if isinstance(f, OneLine)]:
            log.removeFilter(f)
        assert served.get("/failing").status == 500
        assert kept.wait()[-1].exc_info  # a traceback, unfiltered
        one_line_errors()
        kept.records.clear()
        page = served.get("/failing")
        assert page.status == 500 and "INTERNAL_ERROR: the disk said no" in page.text
        [record] = kept.wait()
        assert record.exc_info is None
        assert record.getMessage() == "console: INTERNAL_ERROR: the disk said no and more"
    finally:
        log.removeHandler(kept)
        for f in [f for f in log.filters if isinstance(f, OneLine)]:
            log.removeFilter(f)
        served.stop()
