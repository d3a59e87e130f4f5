"""The console as a Starlette application: routes, templates, error handling.

The endpoints live at module level in :mod:`.pages` (reads, GET: plain
functions, which Starlette runs in its thread pool, so the store is never used
from the event loop) and :mod:`.actions` (changes, POST, checked by
:mod:`.security` for origin and there for the session's CSRF token); they find
the project's data, the templates and the sessions on ``request.app.state``.
A request from htmx (``HX-Request``) gets only the part of the page it
replaces.  Errors go through Starlette's exception handlers: refusals
(``HTTPException``) as plain text, any other error an endpoint raises as the
error page (or, for htmx, the fragment it swaps in), shown as the CLI prints
it, ``CODE: message`` on one line and escaped, with any database URL cut out;
never a traceback, never a value.  An error without a code (one nobody
foresaw) is a 500 ``INTERNAL_ERROR``, which Starlette also raises on to the
server: the console's terminal gets it as one line (:mod:`.server`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import URL
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from rotifer.agents.project import Project
from rotifer.genes.errors import RotiferError
from rotifer.memory import Category, format_time
from rotifer.memory.errors import AgentMemoryError, invalid
from rotifer.memory.views.browse import SORTS
from rotifer.text import human_size, shown

from .data import ConsoleData, marks
from .security import (
    CSRF_FIELD,
    Guard,
    Protections,
    Sessions,
    allowed_hosts,
    cookie_name,
    session_of,
)
from .timeline import timeline_rows

HERE = Path(__file__).parent
_URL = re.compile(r"postgres(?:ql)?://\S+", re.IGNORECASE)


def scrub(text: str) -> str:
    """An error message as a page may show it: one line, escaped, no database URL."""
    return shown(_URL.sub("postgresql://…", text.replace("\n", " ")))


def error_text(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    code_text = getattr(code, "value", code) or "INTERNAL_ERROR"
    message = str(getattr(exc, "message", None) or exc)
    if message.startswith(f"{code_text}:"):
        return scrub(message)
    return scrub(f"{code_text}: {message}")


def key_ref(key: str) -> str:
    """A key as a form field carries it: JSON with only ASCII (a browser rewrites
    line breaks in form values; JSON escapes keep every key exact)."""
    return json.dumps(key, ensure_ascii=True)


def key_of(ref: str) -> str:
    try:
        key = json.loads(ref)
    except ValueError:
        key = None
    if not isinstance(key, str):
        raise invalid("a selected key did not arrive intact; reload the page")
    return key


def link(request: Request, route: str, /, **params: Any) -> URL:
    """``request.url_for`` with every path parameter percent-encoded: a name with a
    line break (an agent an older version created) keeps it in the address
    instead of losing it in the browser and naming another agent."""
    return request.url_for(route, **{k: quote(str(v), safe="") for k, v in params.items()})


def plural(count: int, one: str, many: str | None = None) -> str:
    """``1 entry``, ``2 entries``, ``1,000 days``."""
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def brief(rfc3339: str) -> str:
    """A time in a table cell: to the second, on two short lines (the exact time is
    the cell's title)."""
    return rfc3339[:19].replace("T", " ")


def render(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    """A page (or an htmx fragment) with the session's CSRF token."""
    templates: Jinja2Templates = request.app.state.templates
    context.setdefault("csrf", session_of(request).csrf)
    response: Response = templates.TemplateResponse(request, template, context,
                                                    status_code=status)
    return response


def create_app(project: Project, *, host: str = "127.0.0.1", port: int = 8000,
               sessions: Sessions | None = None,
               protections: Protections | None = None) -> Guard:
    """The console as an ASGI application, guarded (see :mod:`.security`)."""
    from . import actions, pages

    data = ConsoleData(project)
    protections = protections or Protections()
    sessions = Sessions() if sessions is None else sessions
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=True)  # every page: what a gene wrote is escaped
    env.filters.update(shown=shown, size=human_size, ref=key_ref, plural=plural, brief=brief,
                       time=lambda us: format_time(us) if us else "")
    env.globals.update(csrf_field=CSRF_FIELD, categories=list(Category), sorts=SORTS,
                       marks=marks, url_for=_url_for, timeline_rows=timeline_rows)
    templates = Jinja2Templates(env=env)

    routes = [
        Route("/", pages.overview, name="overview"),
        Route("/agents/{name}", pages.agent, name="agent"),
        Route("/agents/{name}/entry", pages.entry, name="entry"),
        Route("/agents/{name}/export.{kind}", pages.export, name="export"),
        Route("/agents/{name}/history", pages.history, name="history"),
        Route("/agents/{name}/history/chart", pages.history_chart, name="chart"),
        Route("/agents/{name}/history/export.{kind}", pages.history_export,
              name="history_export"),
        Route("/agents/{name}/verify", actions.verify, methods=["POST"], name="verify"),
        Route("/agents/{name}/verify/progress", actions.verifying, name="verifying"),
        Route("/agents/{name}/delete/confirm", actions.confirm, methods=["POST"],
              name="confirm"),
        Route("/agents/{name}/delete", actions.delete, methods=["POST", "DELETE"],
              name="delete"),
        Route("/logout", actions.logout, methods=["POST"], name="logout"),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        data.close()

    # Coded errors (what the CLI prints as CODE: message) are answered by
    # Starlette's ExceptionMiddleware; anything else by its ServerErrorMiddleware
    # (500), which then raises it on to the server: .server logs it as one line.
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        HTTPException: _http_error, RotiferError: _failure, AgentMemoryError: _failure,
        Exception: _failure})
    app.state.data = data
    app.state.templates = templates
    app.state.sessions = sessions
    app.state.protections = protections
    app.state.cookie = cookie_name(port)
    return Guard(app, sessions, allowed_hosts(host, port), port, protections)


@jinja2.pass_context
def _url_for(context: dict[str, Any], route: str, /, **params: Any) -> URL:
    return link(context["request"], route, **params)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return PlainTextResponse(str(exc.detail), status_code=exc.status_code)


async def _failure(request: Request, exc: Exception) -> Response:
    return failure_page(request, exc)


def failure_page(request: Request, exc: BaseException) -> Response:
    status = 400 if getattr(exc, "code", None) else 500
    text = error_text(exc)
    if request.headers.get("hx-request") == "true":  # htmx swaps it where the answer goes
        return render(request, "problem.html", status, message=text)
    return render(request, "error.html", status, message=text)



def swaps(request: Request, target: str) -> bool:
    """An htmx request that replaces only ``#target`` (not a history restore, which
    wants the whole page)."""
    h = request.headers
    return h.get("hx-request") == "true" and h.get("hx-target") == target and \
        h.get("hx-history-restore-request") != "true"
