"""The console's pages and actions (Starlette routes over :mod:`.data`).

Reads are GET; the two actions that change something -- running ``audit
verify`` (it may append ``rolled_back`` lines) and deleting -- are POST, checked
by :mod:`.security` (origin) and here (the CSRF token).  A request from htmx
(``HX-Request``) gets only the part of the page it replaces.  Errors are shown
as the CLI prints them, ``CODE: message`` on one line and escaped, with any
database URL cut out; never a traceback, never a value.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from rotifer.agents.project import Project
from rotifer.memory import Category, MemoryStore, format_time, parse_time
from rotifer.memory.browse import (
    SORTS,
    describe_keys,
    expiring_count,
    list_page,
    next_evictions,
)
from rotifer.memory.errors import invalid
from rotifer.text import human_size, shown

from . import chart
from .data import AgentPage, ConsoleData, Listing, Verified, marks
from .security import CSRF_FIELD, CSRF_HEADER, Guard, Protections, Secrets, allowed_hosts

HERE = Path(__file__).parent
#: The most audit lines the history page lists (newest first); the filters narrow it.
HISTORY_ROWS = 500
#: Refusals and removals the timeline highlights, by action.
HIGHLIGHT = {"access_denied": "refusal", "quota_exceeded": "quota", "evict": "evict",
             "expire": "expire", "rolled_back": "rolled", "deployer_delete": "removal"}
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


def create_app(project: Project, *, host: str = "127.0.0.1", port: int = 8000,
               secrets_: Secrets | None = None,
               protections: Protections | None = None) -> Guard:
    """The console as an ASGI application, guarded (see :mod:`.security`)."""
    data = ConsoleData(project)
    secrets_ = secrets_ or Secrets()
    protections = protections or Protections()
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=True)  # every page: what a gene wrote is escaped
    templates = Jinja2Templates(env=env)
    env.filters.update(shown=shown, size=human_size, ref=key_ref,
                       time=lambda us: format_time(us) if us else "")
    env.globals.update(csrf=secrets_.csrf, csrf_field=CSRF_FIELD, categories=list(Category),
                       sorts=SORTS, marks=marks)

    def page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
        response: Response = templates.TemplateResponse(request, template, context,
                                                        status_code=status)
        return response

    def guarded(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def run(request: Request) -> Response:
            try:
                return handler(request)
            except HTTPException:
                raise
            except Exception as exc:  # every error is a page, never a traceback
                return page(request, "error.html", 400 if getattr(exc, "code", None) else 500,
                            message=error_text(exc))
        return run

    def posted(handler: Callable[[Request, FormData], Response]
               ) -> Callable[[Request], Awaitable[Response]]:
        """A change: its form read and its CSRF token checked, then ``handler`` in a
        worker thread (the store is not used from the event loop)."""
        async def run(request: Request) -> Response:
            form = await request.form()
            given = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD)
            if protections.csrf and not secrets_.csrf_ok(
                    given if isinstance(given, str) else None):
                raise HTTPException(403, "Refused: the form's CSRF token is missing or wrong.")
            response: Response = await run_in_threadpool(
                guarded(lambda r: handler(r, form)), request)
            return response
        return run

    # -- pages -------------------------------------------------------------------

    @guarded
    def overview(request: Request) -> Response:
        agents, problems = data.overview()
        return page(request, "overview.html", agents=agents, problems=problems,
                    verified=data.verified, names=data.gene_names())

    def listing_of(request: Request) -> Listing:
        q = request.query_params
        category = q.get("category") or None
        sort = q.get("sort") or "newest"
        if sort not in SORTS:
            raise invalid(f"sort must be one of {', '.join(SORTS)}")
        return Listing(None if category is None else Category(category) if category in
                       Category.__members__ else _bad_category(category),
                       q.get("prefix", ""), q.get("creator", ""), q.get("q", ""),
                       sort, q.get("cursor", ""))

    @guarded
    def agent(request: Request) -> Response:
        name = request.path_params["name"]
        listing = listing_of(request)

        def read(store: MemoryStore) -> AgentPage:
            found = list_page(store, name, category=listing.category,
                              key_prefix=listing.prefix or None,
                              creator=listing.creator or None,
                              contains=listing.contains or None, sort=listing.sort,
                              limit=listing.limit, cursor=listing.cursor or None)
            victims = {b.key: n for n, b in enumerate(next_evictions(store, name), 1)}
            return AgentPage(name, found, 0, victims, expiring_count(store, name),
                             store.clock.now_us(), 0, 1, {})

        view = data.run(name, read)
        # The total from the usage by category (kept until the agent changes), not a
        # count(*), which reads the agent's whole index (30-90 ms at 100,000 entries).
        view.used, view.quota, view.usage = data.usage(name)
        view.total = sum(u.count for u in view.usage.values())
        fragment = "entries.html" if _swaps(request, "entries") else "agent.html"
        return page(request, fragment, view=view, listing=listing, names=data.gene_names(),
                    message=request.query_params.get("done"))

    @guarded
    def history(request: Request) -> Response:
        name = request.path_params["name"]
        q = request.query_params
        names = data.gene_names()
        key, actor = q.get("key") or None, q.get("actor") or None
        if actor is not None and not actor.startswith("v2:"):  # a gene's name -> its ids
            ids = [gid for gid, gene in names.items() if gene == actor]
            actor = ids[0] if len(ids) == 1 else actor
        since, until = _time(q.get("since"), "since"), _time(q.get("until"), "until")
        skip = int(q["skip"]) if q.get("skip", "").isdigit() else 0
        # Only the lines shown (and one more) are asked for.
        most = skip + HISTORY_ROWS + 1
        lines = data.history(name, key=key, actor=actor, since_us=since, until_us=until,
                             limit=most, rolled_back=True)
        fragment = "timeline.html" if _swaps(request, "timeline") else "history.html"
        shown_lines = lines[skip:skip + HISTORY_ROWS]
        older = {k: v for k, v in q.items() if k != "skip"}
        if skip + HISTORY_ROWS < len(lines):
            older["skip"] = str(skip + HISTORY_ROWS)
        return page(request, fragment, name=name, lines=shown_lines,
                    matched=len(lines) if len(lines) < most else None,
                    skip=skip, older=older if "skip" in older else None,
                    highlight=HIGHLIGHT, names=names,
                    q={k: q.get(k, "") for k in ("key", "actor", "since", "until")})

    @guarded
    def history_chart(request: Request) -> Response:
        name = request.path_params["name"]
        points = data.chart_points(name)
        _, quota, _ = data.usage(name)
        return page(request, "chart.html", picture=chart.svg(points, quota))

    # -- actions -----------------------------------------------------------------

    def verify(request: Request, form: FormData) -> Response:
        name = request.path_params["name"]

        try:
            data.verified[name] = data.verify(name)
        except Exception as exc:
            data.verified[name] = Verified(False, error_text(exc), 0)
        return page(request, "verified.html", name=name, result=data.verified[name])

    def confirm(request: Request, form: FormData) -> Response:
        name = request.path_params["name"]
        mode, keys, category = _selection(form)
        if mode == "category":
            assert category is not None
            _, _, usage = data.usage(name)
            count, nbytes = usage[category].count, usage[category].bytes
            shown_keys: list[str] = []
        else:
            infos = data.run(name, lambda store: describe_keys(store, name, keys))
            count, nbytes = len(infos), sum(e.size for e in infos)
            shown_keys = [e.key for e in infos]
        return page(request, "confirm.html", name=name, mode=mode, keys=keys,
                    category=category, count=count, nbytes=nbytes, shown_keys=shown_keys)

    def delete(request: Request, form: FormData) -> Response:
        name = request.path_params["name"]
        mode, keys, category = _selection(form)

        def remove(store: MemoryStore) -> int:
            deployer = store.deployer(name)  # exactly what `agent memory delete` calls
            if mode == "category":
                return deployer.delete_category(category or "")
            if mode == "key":
                return deployer.delete_key(keys[0])
            return deployer.delete_keys(keys)

        removed = data.run(name, remove)
        done = f"Removed {removed} {'entry' if removed == 1 else 'entries'}"
        return RedirectResponse(request.url_for("agent", name=name).include_query_params(
            done=done), status_code=303)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code)

    routes = [
        Route("/", overview, name="overview"),
        Route("/agents/{name}", agent, name="agent"),
        Route("/agents/{name}/history", history, name="history"),
        Route("/agents/{name}/history/chart", history_chart, name="chart"),
        Route("/agents/{name}/verify", posted(verify), methods=["POST"], name="verify"),
        Route("/agents/{name}/delete/confirm", posted(confirm), methods=["POST"],
              name="confirm"),
        Route("/agents/{name}/delete", posted(delete), methods=["POST", "DELETE"],
              name="delete"),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        data.close()

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error},
                    lifespan=lifespan)
    return Guard(app, secrets_, allowed_hosts(host, port), protections)


def _swaps(request: Request, target: str) -> bool:
    """An htmx request that replaces only ``#target`` (not a history restore, which
    wants the whole page)."""
    h = request.headers
    return h.get("hx-request") == "true" and h.get("hx-target") == target and \
        h.get("hx-history-restore-request") != "true"


def _bad_category(text: str) -> Category:
    raise invalid(f"unknown category {text[:40]!r}; expected one of "
                  + ", ".join(c.value for c in Category))


def _selection(form: FormData) -> tuple[str, list[str], Category | None]:
    """What a delete form names: ``mode`` key (one key), keys (a selection) or category."""
    mode = str(form.get("mode") or "")
    if mode == "category":
        text = str(form.get("category") or "")
        return mode, [], Category(text) if text in Category.__members__ else _bad_category(text)
    if mode == "key":
        ref = form.get("ref")  # from the confirmation; a typed key comes as "key"
        key = key_of(ref) if isinstance(ref, str) else str(form.get("key") or "")
        if not key:
            raise invalid("give the key to delete")
        return mode, [key], None
    if mode == "keys":
        keys = [key_of(str(ref)) for ref in form.getlist("ref")]
        if not keys:
            raise invalid("select at least one entry to delete")
        return mode, keys, None
    raise invalid("unknown kind of deletion")


def _time(text: str | None, what: str) -> int | None:
    """An RFC 3339 time, or a browser's ``YYYY-MM-DDTHH:MM`` taken as UTC."""
    if not text:
        return None
    candidate = text if text[-1:] in "Zz" or "+" in text[10:] else text + (
        ":00Z" if len(text) == 16 else "Z")
    try:
        return parse_time(candidate)
    except ValueError:
        raise invalid(f"{what} must be a time such as 2026-01-01T00:00:00Z") from None
