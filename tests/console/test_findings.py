"""The console's second pass, one test per finding (each failed before its fix):
stale confirmations, ``?done=``, an agent named with a trailing line break, htmx
errors, and the new pages (an entry, exports) over real HTTP."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotifer.agents.genome import Agents
from rotifer.console.app import key_ref
from rotifer.memory.model import DataPolicy
from rotifer.memory.storage.backend import AgentRecord
from tests.console.helpers import HOSTILE_KEY, SECRET_VALUE, InProcess, Served, make_project


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Served]:
    s = InProcess(make_project(tmp_path / "proj"))
    yield s
    s.stop()


def confirm(served: Served, fields: list[tuple[str, str]], agent: str = "ag"
            ) -> tuple[str, str]:
    body = urllib.parse.urlencode([*fields, ("csrf", served.csrf)])
    page = served.post(f"/agents/{urllib.parse.quote(agent, safe='')}/delete/confirm", body)
    assert page.status == 200, page.text
    found = re.search(r'name="expect" value="([^"]*)"', page.text)
    assert found, page.text
    return page.text, body + "&" + urllib.parse.urlencode({"expect": html.unescape(found[1])})


def gene_memory(served: Served, agent: str = "ag"):  # type: ignore[no-untyped-def]
    gene = next(iter(served.project.registry().entries()))
    store = served.project.open_store(agent)
    return store, store.for_gene(agent, gene, "notes")


def keys(served: Served, agent: str = "ag") -> list[str]:
    with served.project.open_store(agent) as store:
        return sorted(e.key for e in store.deployer(agent).list())


def test_a_category_that_changed_since_its_confirmation_is_not_deleted(served: Served) -> None:
    shown, body = confirm(served, [("mode", "category"), ("category", "CACHE")])
    assert "<strong>3 entries</strong>" in shown
    store, memory = gene_memory(served)
    with store:
        memory.write_memory("cache/new", SECRET_VALUE, "CACHE")  # one more since
    before = keys(served)
    resp = served.post("/agents/ag/delete", body)
    assert resp.status == 409
    assert "Changed since you confirmed" in resp.text and "4 entries" in resp.text
    assert "not the 3 entries" in resp.text
    assert keys(served) == before  # nothing deleted
    _, again = confirm(served, [("mode", "category"), ("category", "CACHE")])
    assert served.post("/agents/ag/delete", again).status == 303
    assert not [k for k in keys(served) if k.startswith("cache/")]


def test_bytes_that_changed_since_the_confirmation_refuse_the_delete(served: Served) -> None:
    _, body = confirm(served, [("mode", "category"), ("category", "CACHE")])
    store, memory = gene_memory(served)
    with store:
        memory.write_memory("cache/0", SECRET_VALUE * 20, "CACHE")  # same count, more bytes
    resp = served.post("/agents/ag/delete", body)
    assert resp.status == 409 and "bytes" in resp.text
    assert "cache/0" in keys(served)


def test_a_selected_entry_written_since_its_confirmation_is_not_deleted(
        served: Served) -> None:
    _, body = confirm(served, [("mode", "keys"), ("ref", key_ref("ctx/now")),
                               ("ref", key_ref("cache/1"))])
    store, memory = gene_memory(served)
    with store:
        memory.write_memory("ctx/now", SECRET_VALUE, "CONTEXT")  # same size, new version
    resp = served.post("/agents/ag/delete", body)
    assert resp.status == 409 and "1 of the 2 entries changed" in resp.text
    assert {"ctx/now", "cache/1"} <= set(keys(served))


def test_a_delete_without_its_confirmation_is_refused(lite: Served) -> None:
    body = urllib.parse.urlencode({"mode": "category", "category": "CACHE",
                                   "csrf": lite.csrf})
    resp = lite.post("/agents/ag/delete", body)
    assert resp.status == 400 and "confirm it first" in resp.text
    assert "cache/0" in keys(lite)


def test_the_address_cannot_write_a_status_line(lite: Served) -> None:
    page = lite.get("/agents/ag?done=Audit+verified%3A+all+clear").text
    assert "all clear" not in page and 'id="done"' not in page


def test_an_agent_an_older_version_named_with_a_line_break_is_kept_apart(
        lite: Served) -> None:
    """``fmt`` and ``fmt\\n`` both exist: each shows, escaped, links to itself, and a
    category delete on ``fmt\\n``'s page removes its entries alone."""
    project = lite.project
    Agents(project).create("fmt", ["keeper"])
    spec = json.loads((project.agents_dir / "fmt.json").read_text())
    spec["name"] = "fmt\n"
    (project.agents_dir / "fmt\n.json").write_text(json.dumps(spec))
    with project.open_store("fmt") as store, store.backend.write("fmt\n") as tx:
        tx.insert_agent(AgentRecord("fmt\n", 4096, DataPolicy(), 0, 1, 0, "e" * 32))  # old
    for agent in ("fmt", "fmt\n"):
        store, memory = gene_memory(lite, agent)
        with store:
            memory.write_memory(f"cache/{agent.strip()}-{len(agent)}", b"v", "CACHE")
    overview = lite.get("/").text
    assert "/agents/fmt%0A" in overview and "fmt\\n</a>" in overview
    assert re.search(r'href="[^"]*/agents/fmt"', overview)
    page = lite.get("/agents/fmt%0A")
    assert page.status == 200 and "Memory of fmt\\n" in page.text and "cache/fmt-4" in page.text
    assert "cache/fmt-3" not in page.text
    _, body = confirm(lite, [("mode", "category"), ("category", "CACHE")], agent="fmt\n")
    assert lite.post("/agents/fmt%0A/delete", body).status == 303
    assert keys(lite, "fmt\n") == [] and keys(lite, "fmt") == ["cache/fmt-3"]


def test_a_bad_since_is_an_error_not_the_whole_timeline(lite: Served) -> None:
    resp = lite.get("/agents/ag/history?since=yesterday",
                    **{"HX-Request": "true", "HX-Target": "timeline"})
    assert resp.status == 400 and 'role="alert"' in resp.text
    assert "since must be a time" in resp.text and "<li" not in resp.text
    assert "<html" not in resp.text  # the fragment htmx swaps in


def test_the_entry_page_shows_every_field_but_the_value(lite: Served) -> None:
    page = lite.get("/agents/ag/entry?" + urllib.parse.urlencode({"key": "pref/short"}))
    assert page.status == 200
    text = page.text
    assert SECRET_VALUE.decode() not in text
    for field in ("PREFERENCE", "Read scope", "Share policy", "1 day;", "Expires", "keeper"):
        assert field in text, field
    assert re.search(r'id="expires">\d{4}-\d\d-\d\dT', text)
    assert "1 line" in text and ">write<" in text  # its audit line
    hostile = lite.get("/agents/ag/entry?" + urllib.parse.urlencode({"key": HOSTILE_KEY}))
    assert "<script>alert" not in hostile.text and "\\x1b" in hostile.text


def test_exports_hold_what_the_listing_shows_and_never_a_value(lite: Served) -> None:
    data = lite.get("/agents/ag/export.json?category=CACHE&sort=oldest")
    assert data.status == 200 and "attachment" in data.headers["content-disposition"]
    doc = json.loads(data.text)
    assert [e["key"] for e in doc["entries"]] == ["cache/0", "cache/1", "cache/2"]
    assert {"value"} & set(doc["entries"][0]) == set()
    table = lite.get("/agents/ag/export.csv").text
    rows = list(csv.DictReader(io.StringIO(table)))
    assert len(rows) == 7 and SECRET_VALUE.decode() not in table
    assert "\x1b" not in table and any("\\x1b" in r["key"] for r in rows)
    assert lite.get("/agents/ag/export.xml").status == 400


def test_plurals_and_paging_both_ways(lite: Served) -> None:
    store, memory = gene_memory(lite, "other")
    with store:
        memory.write_memory("only", b"1", "CACHE")
        assert "1 entry ·" in lite.get("/agents/other").text
        for i in range(54):
            memory.write_memory(f"many/{i:02d}", b"1", "CACHE")
    assert "Entries 1–7 of 7 entries" in lite.get("/agents/ag").text
    assert "Entries 1–3 of 3 matches" in lite.get("/agents/ag?category=CACHE").text
    first = lite.get("/agents/other").text
    assert "Entries 1–50 of 55 entries" in first and "previous-page" not in first
    found = re.search(r'id="next-page" href="http://[^/]+(/[^"]+)"', first)
    assert found
    second = lite.get(html.unescape(found[1])[len(lite.session.root):]).text
    assert "Entries 51–55 of 55 entries" in second and "next-page" not in second
    back = re.search(r'id="previous-page" href="http://[^/]+(/[^"]+)"', second)
    assert back
    again = lite.get(html.unescape(back[1])[len(lite.session.root):]).text
    assert "Entries 1–50 of 55 entries" in again


def test_the_chart_is_readable_at_low_usage_with_axis_values() -> None:
    """100 bytes of a 10 MB quota filled 0.001% of the old picture (a hairline);
    now the value axis ends just above the use, with values, and the quota is a note."""
    from rotifer.console import chart
    from rotifer.memory import Category

    def at(minute: int) -> int:
        return 1_767_225_600_000_000 + minute * 60_000_000

    points = [chart.Point(at(m), {**dict.fromkeys(Category, 0), Category.CACHE: 20 * m})
              for m in range(1, 6)]
    picture = chart.svg(points, 10 * 1024 * 1024, [(at(3), "evict"), (at(4), "refusal")])
    heights = [float(pt.split(",")[1]) for pt in
               re.search(r'class="area cache" points="([^"]+)"', picture)[1].split()]  # type: ignore[index]
    plot = chart.HEIGHT - 2 * chart.PAD
    assert max(heights) - min(heights) > plot / 2  # the band fills half the picture
    ticks = re.findall(r'class="tick"[^>]*>([^<]+)<', picture)
    assert ticks[:5] == ["0 B", "30 B", "60 B", "90 B", "120 B"]
    assert any(t.startswith("2026-01-01 00:0") for t in ticks)  # time values
    assert "quota 10 MB (above the chart)" in picture
    assert 'class="mark evict"' in picture and 'class="mark refusal"' in picture


def test_the_history_exports_the_lines_its_page_shows(lite: Served) -> None:
    page = lite.get("/agents/ag/history?key=cache/1").text
    found = re.search(r'id="history-csv" href="http://[^/]+(/[^"]+)"', page)
    assert found
    table = lite.get(html.unescape(found[1])[len(lite.session.root):]).text
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [(r["action"], r["key"], r["actorName"]) for r in rows] == [
        ("write", "cache/1", "keeper")]
    doc = json.loads(lite.get("/agents/ag/history/export.json").text)
    assert len(doc["history"]) == 7 and SECRET_VALUE.decode() not in json.dumps(doc)
