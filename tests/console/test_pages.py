"""The console's pages and deletes over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import html
import json
import os
import re
import urllib.parse
from pathlib import Path

import pytest

from rotifer.agents.project import Project
from rotifer.console import chart
from rotifer.console.app import key_ref
from rotifer.memory import Category
from tests.audit_reading import audit_lines
from tests.console.helpers import Served, fill_history

ROOT = Path(__file__).resolve().parents[2]


def row_of(page: str, key: str) -> str:
    found = re.search(r'<tr class="([^"]*)">\s*<td><input type="checkbox" name="ref" value="'
                      + re.escape(json.dumps(key).replace('"', "&#34;")) + '"', page)
    assert found, key
    return found.group(1)


def confirmed(served: Served, body: str) -> tuple[str, str]:
    """Ask for the confirmation of ``body``; the page, and the delete form's body as
    the confirmation carries it (what it showed included)."""
    page = served.post("/agents/ag/delete/confirm", body).text
    found = re.search(r'name="expect" value="([^"]*)"', page)
    assert found, page
    return page, body + "&" + urllib.parse.urlencode({"expect": html.unescape(found.group(1))})


def audit(project: Project, agent: str = "ag") -> list[dict[str, object]]:
    return [x for x in audit_lines(project.dot) if x["agent"] == agent]


def test_overview_agent_page_marks_and_filters(served: Served) -> None:
    overview = served.get("/").text
    assert "/agents/ag" in overview and "/agents/other" in overview
    assert "keeper" in overview and "v2:" in overview
    page = served.get("/agents/ag").text
    assert "7 entries" in page
    assert "evict-next" in row_of(page, "cache/0") and "#1" in page
    assert "expiring" in row_of(page, "pref/short")
    assert "unbounded" in row_of(page, "pref/theme")
    assert "unbounded" not in row_of(page, "pref/short")
    only = served.get("/agents/ag?category=CACHE&sort=oldest").text
    assert "cache/0" in only and "ctx/now" not in only
    assert only.index("cache/0") < only.index("cache/2")
    first = served.get("/agents/ag?prefix=cache/").text
    assert "pref/theme" not in first and first.index("cache/2") < first.index("cache/0")
    assert "cache/1" in served.get("/agents/ag?q=CACHE/1").text
    bad = served.get("/agents/ag?category=NOPE")
    assert bad.status == 400 and "MEMORY_INVALID_INPUT" in bad.text


def test_history_highlights_and_filters(served: Served) -> None:
    fill_history(served.project, next(iter(served.project.registry().entries())))
    busy = served.get("/agents/busy/history").text
    for mark in ("refusal", "quota", "evict", "removal"):
        assert f'<li class="{mark}">' in busy, mark
    page = served.get("/agents/ag/history").text
    assert page.count('<li class="">') >= 7  # the writes
    assert "cache/1" in served.get("/agents/ag/history?key=cache/1").text
    assert "pref/theme" not in served.get("/agents/ag/history?key=cache/1").text
    assert "No audit lines match" in served.get(
        "/agents/ag/history?since=2999-01-01T00:00").text
    by_name = served.get("/agents/ag/history?actor=keeper").text
    assert "7 lines" in by_name and "0 lines" in served.get(
        "/agents/ag/history?actor=deployer").text
    fragment = served.get("/agents/ag/history?skip=5", **{"HX-Request": "true",
                                                          "HX-Target": "timeline"}).text
    assert "<html" not in fragment and fragment.count("<li") == 2
    svg = served.get("/agents/ag/history/chart").text
    assert "<svg" in svg and "area cache" in svg and "quota 4 KB" in svg


def test_delete_by_category_after_confirmation_is_audited_as_the_deployer(
        served: Served) -> None:
    body = urllib.parse.urlencode({"mode": "category", "category": "CACHE",
                                   "csrf": served.csrf})
    confirm, body = confirmed(served, body)
    size = 3 * (len("cache/0") + len("SECRET-VALUE-never-shown-7d1e"))
    assert "<strong>3 entries</strong>" in confirm and f"{size} bytes" in confirm
    assert "cache/0" in served.get("/agents/ag").text  # confirming deletes nothing
    done = served.post("/agents/ag/delete", body)
    assert done.status == 303 and "Removed" not in done.headers["location"]
    assert 'id="done">Removed 3 entries<' in served.get("/agents/ag").text  # shown once
    assert "Removed" not in served.get("/agents/ag").text
    lines = [x for x in audit(served.project) if x["action"] == "deployer_delete"]
    assert sorted(str(x["key"]) for x in lines) == ["cache/0", "cache/1", "cache/2"]
    assert {x["actor"] for x in lines} == {"deployer"}
    page = served.get("/agents/ag").text
    assert "cache/0" not in page
    timeline = served.get("/agents/ag/history").text
    assert timeline.count('<li class="removal">') == 3


def test_delete_a_selection_and_a_hostile_key_exactly(served: Served) -> None:
    from tests.console.helpers import HOSTILE_KEY

    body = urllib.parse.urlencode([("mode", "keys"), ("ref", key_ref(HOSTILE_KEY)),
                                   ("ref", key_ref("ctx/now")), ("csrf", served.csrf)])
    confirm, body = confirmed(served, body)
    assert "<strong>2 entries</strong>" in confirm
    assert served.post("/agents/ag/delete", body).status == 303
    removed = [x["key"] for x in audit(served.project) if x["action"] == "deployer_delete"]
    assert removed == [HOSTILE_KEY, "ctx/now"]
    again = served.post("/agents/ag/delete", body)
    assert again.status == 400 and "MEMORY_NOT_FOUND" in again.text


def test_verify_runs_on_demand(served: Served) -> None:
    resp = served.post("/agents/ag/verify", urllib.parse.urlencode({"csrf": served.csrf}))
    assert resp.status == 200 and "OK: agent" in resp.text
    assert "OK: agent" in served.get("/").text


def test_chart_series_follows_the_bytes_each_line_adds_or_frees() -> None:
    def line(n: int, action: str, key: str | None, cat: str | None, size: int,
             **extra: object) -> dict[str, object]:
        return {"ts": f"2026-01-01T00:00:0{n}Z", "action": action, "key": key,
                "category": cat, "bytes": size, **extra}

    points = chart.series([
        line(1, "write", "a", "CACHE", 10), line(2, "write", "b", "PREFERENCE", 5),
        line(3, "update", "a", "CACHE", 30, previousBytes=10),
        line(4, "access_denied", "c", "CACHE", 99), line(5, "evict", "a", "CACHE", 30),
        line(6, "drop_agent", None, None, 5), line(7, "write", "z", "PATTERN", 7)])
    got = [(p.bytes[Category.CACHE], p.bytes[Category.PREFERENCE], p.bytes[Category.PATTERN])
           for p in points]
    assert got == [(10, 0, 0), (10, 5, 0), (30, 5, 0), (0, 5, 0), (0, 0, 0), (0, 0, 7)]
    assert len(chart.buckets(points * 400, most=50)) <= 50


def test_vendored_htmx_is_the_pinned_package() -> None:
    pinned = json.loads((ROOT / "package.json").read_text())["dependencies"]["htmx.org"]
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/htmx.org"]["version"] == pinned
    installed = ROOT / "node_modules" / "htmx.org"
    if not installed.exists():
        if os.environ.get("CI"):
            pytest.fail("node_modules has no htmx.org (CI runs make node-deps)")
        pytest.skip("node_modules has no htmx.org: run make node-deps")
    assert json.loads((installed / "package.json").read_text())["version"] == pinned
    vendored = ROOT / "src" / "rotifer" / "console" / "static" / "htmx.min.js"
    assert vendored.read_bytes() == (installed / "dist" / "htmx.min.js").read_bytes()
    assert f"htmx {pinned}" in (vendored.parent / "VENDORED.md").read_text()
