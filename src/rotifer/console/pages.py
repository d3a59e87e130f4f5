"""The console's pages (GET): agents, an agent's memory, one entry, exports, history.

Module-level endpoints over ``request.app.state.data`` (:class:`.data.ConsoleData`);
none of them changes anything, and none shows a value.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from rotifer.memory import Category, MemoryStore, parse_time
from rotifer.memory.errors import invalid
from rotifer.memory.views.browse import (
    SORTS,
    EntryInfo,
    describe_keys,
    expiring_count,
    list_page,
    next_evictions,
)
from rotifer.text import shown

from . import chart
from .app import render, swaps
from .data import AgentPage, ConsoleData, Listing, audit_lines
from .security import session_of

#: The most audit lines the history page lists (newest first); the filters narrow it.
HISTORY_ROWS = 500
#: The most entries an export of a listing holds.
EXPORT_MOST = 10_000
#: Refusals and removals the timeline highlights, by action.
HIGHLIGHT = {"access_denied": "refusal", "quota_exceeded": "quota", "evict": "evict",
             "expire": "expire", "rolled_back": "rolled", "deployer_delete": "removal"}


def data_of(request: Request) -> ConsoleData:
    data: ConsoleData = request.app.state.data
    return data


def overview(request: Request) -> Response:
    data = data_of(request)
    agents, problems = data.overview()
    return render(request, "overview.html", agents=agents, problems=problems,
                  verified=data.verified, verifying=data.verify_progress,
                  names=data.gene_names())


def listing_of(request: Request) -> Listing:
    q = request.query_params
    category = q.get("category") or None
    sort = q.get("sort") or "newest"
    if sort not in SORTS:
        raise invalid(f"sort must be one of {', '.join(SORTS)}")
    return Listing(None if category is None else _category(category),
                   q.get("prefix", ""), q.get("creator", ""), q.get("q", ""),
                   sort, q.get("cursor", ""), back=q.getlist("back"))


def read_listing(data: ConsoleData, name: str, listing: Listing) -> AgentPage:
    def read(store: MemoryStore) -> AgentPage:
        found = list_page(store, name, category=listing.category,
                          key_prefix=listing.prefix or None, creator=listing.creator or None,
                          contains=listing.contains or None, sort=listing.sort,
                          limit=listing.limit, cursor=listing.cursor or None)
        victims = {b.key: n for n, b in enumerate(next_evictions(store, name), 1)}
        return AgentPage(name, found, 0, victims, expiring_count(store, name),
                         store.clock.now_us(), 0, 1, {}, standby=store.replay_delay())

    view = data.run(name, read)
    # The total from the usage by category (kept until the agent changes), not a
    # count(*), which reads the agent's whole index (30-90 ms at 100,000 entries).
    view.used, view.quota, view.usage = data.usage(name)
    view.total = sum(u.count for u in view.usage.values())
    return view


def agent(request: Request) -> Response:
    name = request.path_params["name"]
    listing = listing_of(request)
    view = read_listing(data_of(request), name, listing)
    fragment = "entries.html" if swaps(request, "entries") else "agent.html"
    message = None if fragment == "entries.html" else session_of(request).pop_flash()
    return render(request, fragment, view=view, listing=listing,
                  names=data_of(request).gene_names(), message=message,
                  matched=listing.matched(view))


def entry(request: Request) -> Response:
    """One entry: every field but its value, and its lines in the audit log."""
    name = request.path_params["name"]
    key = request.query_params.get("key", "")
    if not key:
        raise invalid("give the key of the entry")
    data = data_of(request)
    found = data.run(name, lambda store: describe_keys(store, name, [key]))
    lines = audit_lines(data, name, key, limit=HISTORY_ROWS)
    return render(request, "entry.html", name=name, key=key, e=found[0] if found else None,
                  lines=lines, names=data.gene_names(), highlight=HIGHLIGHT,
                  now_us=data.run(name, lambda store: store.clock.now_us()))


FIELDS = ("key", "category", "size", "createdBy", "createdByName", "lastAccessedBy",
          "lastAccessedByName", "createdAt", "updatedAt", "readScope", "writeScope",
          "sharePolicy", "maxRetentionDays", "expiresAt")


def described(e: EntryInfo, names: dict[str, str]) -> dict[str, Any]:
    """An entry as an export holds it: every field but the value."""
    return {"key": e.key, "category": e.category.value, "size": e.size,
            "createdBy": e.created_by, "createdByName": names.get(e.created_by),
            "lastAccessedBy": e.last_accessed_by,
            "lastAccessedByName": names.get(e.last_accessed_by),
            "createdAt": e.created_at, "updatedAt": e.updated_at,
            "readScope": e.access.read_scope.value, "writeScope": e.access.write_scope.value,
            "sharePolicy": e.access.share_policy.value,
            "maxRetentionDays": None if e.retention is None else e.retention.max_retention_days,
            "expiresAt": e.expires_at}


def export(request: Request) -> Response:
    """What the listing shows (its filters and sort, every page up to
    :data:`EXPORT_MOST` entries) as JSON or CSV; never a value."""
    name, kind = request.path_params["name"], request.path_params["kind"]
    if kind not in ("json", "csv"):
        raise invalid("export as json or csv")
    data = data_of(request)
    listing = listing_of(request)
    listing.cursor, listing.limit = "", 500
    rows: list[dict[str, Any]] = []
    names = data.gene_names()
    while len(rows) < EXPORT_MOST:
        view = data.run(name, lambda store: list_page(
            store, name, category=listing.category, key_prefix=listing.prefix or None,
            creator=listing.creator or None, contains=listing.contains or None,
            sort=listing.sort, limit=listing.limit, cursor=listing.cursor or None))
        rows += [described(e, names) for e in view.entries]
        if not view.cursor:
            break
        listing.cursor = view.cursor
    del rows[EXPORT_MOST:]
    return _download(name, "entries", kind, rows, FIELDS)


def _download(name: str, what: str, kind: str, rows: list[dict[str, Any]],
              fields: tuple[str, ...]) -> Response:
    if kind not in ("json", "csv"):
        raise invalid("export as json or csv")
    filename = f"{''.join(c if c.isalnum() else '_' for c in name)}-{what}.{kind}"
    headers = {"content-disposition": f'attachment; filename="{filename}"'}
    if kind == "json":
        return Response(json.dumps({"agent": name, what: rows}, indent=1) + "\n",
                        media_type="application/json", headers=headers)
    out = io.StringIO()
    writer = csv.DictWriter(out, fields, lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers=headers)


def _cell(value: object) -> object:
    """A CSV cell a spreadsheet will not run: keys escaped as pages show them, and
    one starting with ``= + - @`` behind a ``'``."""
    if not isinstance(value, str):
        return "" if value is None else value
    text = shown(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def history_lines(request: Request, names: dict[str, str]
                  ) -> tuple[list[dict[str, Any]], int, int]:
    """The history page's lines for its filters (newest first; up to the page
    shown and one more without an ``until``), its ``skip`` and how many it asked."""
    name = request.path_params["name"]
    q = request.query_params
    key, actor = q.get("key") or None, q.get("actor") or None
    if actor is not None and not actor.startswith("v2:"):  # a gene's name -> its ids
        ids = [gid for gid, gene in names.items() if gene == actor]
        actor = ids[0] if len(ids) == 1 else actor
    since, until = _time(q.get("since"), "since"), _time(q.get("until"), "until")
    skip = int(q["skip"]) if q.get("skip", "").isdigit() else 0
    # Only the lines shown (and one more) are asked for.
    most = skip + HISTORY_ROWS + 1
    lines = data_of(request).history(name, key=key, actor=actor, since_us=since,
                                     until_us=until, limit=most, rolled_back=True)
    return lines, skip, most


def history(request: Request) -> Response:
    name = request.path_params["name"]
    q = request.query_params
    names = data_of(request).gene_names()
    lines, skip, most = history_lines(request, names)
    fragment = "timeline.html" if swaps(request, "timeline") else "history.html"
    shown_lines = lines[skip:skip + HISTORY_ROWS]
    base = {k: v for k, v in q.items() if k != "skip"}
    older = {**base, "skip": str(skip + HISTORY_ROWS)} \
        if skip + HISTORY_ROWS < len(lines) else None
    newer = {**base, "skip": str(max(0, skip - HISTORY_ROWS))} if skip else None
    return render(request, fragment, name=name, lines=shown_lines,
                  matched=len(lines) if len(lines) < most else None,
                  skip=skip, older=older, newer=newer, highlight=HIGHLIGHT, names=names,
                  q={k: q.get(k, "") for k in ("key", "actor", "since", "until")},
                  export_query=f"?{request.url.query}" if request.url.query else "")


LINE_FIELDS = ("ts", "seq", "action", "key", "category", "bytes", "actor", "actorName",
               "code", "reason")


def history_export(request: Request) -> Response:
    """The lines the history page shows (its filters and position) as JSON or CSV."""
    name, kind = request.path_params["name"], request.path_params["kind"]
    names = data_of(request).gene_names()
    lines, skip, _ = history_lines(request, names)
    rows = [{**{f: ln.get(f) for f in LINE_FIELDS},
             "actorName": names.get(str(ln.get("actor")))}
            for ln in lines[skip:skip + HISTORY_ROWS]]
    return _download(name, "history", kind, rows, LINE_FIELDS)


def history_chart(request: Request) -> Response:
    name = request.path_params["name"]
    data = data_of(request)
    points, marks = data.chart_points(name)
    _, quota, _ = data.usage(name)
    return render(request, "chart.html", picture=chart.svg(points, quota, marks))


def _category(text: str) -> Category:
    if text in Category.__members__:
        return Category(text)
    raise invalid(f"unknown category {text[:40]!r}; expected one of "
                  + ", ".join(c.value for c in Category))


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


def _ts(line: dict[str, Any]) -> int:
    try:
        return parse_time(str(line.get("ts")))
    except ValueError:
        return 0

