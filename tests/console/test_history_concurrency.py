"""The console serves pages concurrently: a verify that waits holds no other page
(issue 31, item 7), and the history and chart come from the history index.

The verify is made to wait for real: another connection holds the SQLite
file's write lock, so the verify's write transaction (it holds the agent
while it reads) queues behind it.  Meanwhile the agent's history page must be
served.  With one lock around every use of the stores (the console before
this issue), the page waited behind the verify until the verify gave up.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import urllib.parse
from pathlib import Path

from rotifer.agents.project import Project
from rotifer.memory.audit.history import step_of, usable_entries
from tests.console.helpers import Response, Served, make_project


def test_a_verify_waiting_for_the_store_holds_no_other_page(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", history=True)
    served = Served(project)
    blocker = sqlite3.connect(project.dot / "playground.db", isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # the file's write lock, held
        answer: list[Response] = []
        verify = threading.Thread(target=lambda: answer.append(served.post(
            "/agents/busy/verify", urllib.parse.urlencode({"csrf": served.csrf}))))
        verify.start()
        time.sleep(1.0)  # let the verify reach the server and queue for the lock
        assert verify.is_alive() and not answer
        page = served.get("/agents/busy/history")
        chart = served.get("/agents/busy/history/chart")
        assert page.status == 200 and "cache/58" in page.text
        assert chart.status == 200 and "<svg" in chart.text
        assert verify.is_alive(), "the pages were served only after the verify ended"
        blocker.execute("ROLLBACK")
        verify.join(120)
        assert answer and answer[0].status == 200 and "OK" in answer[0].text
    finally:
        blocker.close()
        served.stop()


def test_the_history_pages_read_the_index(tmp_path: Path) -> None:
    """The agents the console shows were made by ``agent create``: their index is
    whole, so the pages read their own lines (and say the same as without it:
    tests/memory/test_audit_index.py)."""
    project = make_project(tmp_path / "proj", history=True)
    with Project(project.root).open_store("busy", create=False) as store, \
            store.backend.read() as tx:
        assert usable_entries(tx, store.audit.path, "busy", tx.get_agent("busy")) is not None


def test_the_chart_reduced_while_it_is_made_is_the_chart_reduced_after() -> None:
    """``series_of(steps, most)`` (only the kept points made) draws exactly what
    ``buckets(series_of(steps))`` draws."""
    from rotifer.console import chart

    lines = [(1_772_366_400_000_000 + i * 997, ("write", "update", "evict", "drop_agent",
                                                 "access_denied")[i % 5 if i % 97 else 3],
              i % 53, ("CACHE", "PATTERN", "CONTEXT", "PREFERENCE", "BOGUS")[i % 5], i % 300)
             for i in range(5000)]
    steps = [s for s in (step_of(*line) for line in lines) if s is not None]
    assert chart.series_of(steps, 50) == chart.buckets(chart.series_of(steps), most=50)
    assert len(chart.series_of(steps, 50)) <= 50


def test_the_chart_kept_by_the_console_follows_every_change(tmp_path: Path) -> None:
    """The console keeps each agent's chart until the agent changes: a write, a
    deployer's delete and a new memory of the same name each draw it anew."""
    from rotifer.console.data import ConsoleData
    from rotifer.memory import Category

    project = make_project(tmp_path / "proj", history=True)
    data = ConsoleData(project)
    try:
        first = data.chart_points("busy")[0]
        assert first == data.chart_points("busy")[0]
        with project.open_store("busy") as store:
            gene = next(iter(project.registry().entries()))
            store.for_gene("busy", gene, "notes").write_memory("pattern/new", b"p" * 50,
                                                              "PATTERN")
        second = data.chart_points("busy")[0]
        grown = second[-1].bytes[Category.PATTERN] - first[-1].bytes[Category.PATTERN]
        assert grown == 50 + len("pattern/new")  # an entry's size counts its key
        with project.open_store("busy") as store:
            store.deployer("busy").delete_key("pattern/new")
        assert sum(data.chart_points("busy")[0][-1].bytes.values()) == \
            sum(first[-1].bytes.values())
    finally:
        data.close()


def test_a_verify_from_the_page_answers_at_once_and_shows_its_progress(tmp_path: Path
                                                                        ) -> None:
    """From htmx (the console's own button) the verify starts in a thread of its
    own and the answer is its progress, which asks again until the result is
    there: here the verify waits for the store's write lock, and the button's
    answer, its progress, the overview and the other pages all come meanwhile."""
    project = make_project(tmp_path / "proj", history=True)
    served = Served(project)
    hx = {"HX-Request": "true"}
    blocker = sqlite3.connect(project.dot / "playground.db", isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # the verify will wait for it
        body = urllib.parse.urlencode({"csrf": served.csrf})
        started = served.post("/agents/busy/verify", body, **hx)
        assert started.status == 200 and "<progress" in started.text, started.text
        assert "/agents/busy/verify/progress" in started.text and "verify-result" not in \
            started.text
        running = served.get("/agents/busy/verify/progress", **hx)
        assert running.status == 200 and "<progress" in running.text
        assert "Verifying the audit log of busy" in served.get("/").text
        assert served.get("/agents/busy/history").status == 200
        twice = served.post("/agents/busy/verify", body, **hx)  # the same verify, not two
        assert "<progress" in twice.text
        assert sum(t.name.startswith("verify ") for t in threading.enumerate()) == 1
        blocker.execute("ROLLBACK")
        deadline = time.monotonic() + 120
        while "<progress" in (now := served.get("/agents/busy/verify/progress", **hx)).text:
            assert time.monotonic() < deadline, "the verify never ended"
            time.sleep(0.05)
        assert "verify-result" in now.text and "OK: agent" in now.text, now.text
        assert "OK: agent" in served.get("/").text
    finally:
        blocker.close()
        served.stop()


def test_the_reduced_chart_is_the_reduced_full_chart_for_any_steps() -> None:
    """The same with times out of order (writers' lines interleave), refusals,
    ends of the memory, unknown categories and keys without a name, for every
    reduction from 1 point to none: only the state at each slice's end is
    copied, and it is the state ``buckets`` keeps."""
    import random

    from rotifer.console import chart

    rng = random.Random(31)
    actions = ("write", "update", "evict", "delete", "import", "access_denied",
               "drop_agent", "move", "expire")
    for _ in range(60):
        at, steps = 1_772_366_400_000_000, []
        for i in range(rng.choice([0, 1, 7, 360, 361, 1200])):
            at += rng.choice([0, 1, 997, -5, 100_000])
            step = step_of(at, rng.choice(actions), rng.choice([None, i % 53, i % 7]),
                           rng.choice(["CACHE", "PATTERN", "CONTEXT", "PREFERENCE", "BOGUS",
                                       None]), rng.randrange(300))
            if step is not None:
                steps.append(step)
        for most in (1, 2, 50, 360):
            assert chart.series_of(steps, most) == chart.buckets(chart.series_of(steps), most)
