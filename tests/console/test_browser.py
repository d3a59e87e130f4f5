"""The console end to end in a real browser: Playwright driving Debian's chromium headless.

One browser for the module (a fresh profile).  Missing chromium: skipped
locally, failed under ``CI`` (``.ci/run`` installs it).  A failing test leaves
a screenshot (its path is in the failure message).  With
``ROTIFER_SCREENSHOTS=DIR`` the walk also saves a picture of each page there
(how docs/console-*.png are made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.console.helpers import SECRET_VALUE, Served, make_project

CHROMIUM = os.environ.get("ROTIFER_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        reason = f"no chromium at {CHROMIUM} (Debian package chromium)"
        if os.environ.get("CI"):
            pytest.fail(reason + "; CI must run the browser tests")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            headless=True, args=FLAGS, viewport={"width": 1200, "height": 760})
        context.set_default_timeout(60_000)
        yield context
        context.close()


@contextmanager
def screenshot_on_failure(page: Any, where: Path) -> Iterator[None]:
    try:
        yield
    except BaseException as exc:
        path = where / "failure.png"
        try:
            page.screenshot(path=str(path), full_page=True)
        except Exception:  # the browser itself failed: the original error matters
            raise exc from None
        raise AssertionError(f"{exc}\n(screenshot: {path})") from exc


def inside(page: Any, path: str) -> str:
    """``path`` inside the browser's own session (its secret root, from the address)."""
    found = re.match(r"(http://[^/]+/s/[^/]+)", page.url)
    assert found, page.url
    return found[1] + path


def snap(page: Any, name: str) -> None:
    folder = os.environ.get("ROTIFER_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"console-{name}.png"))


def test_overview_agent_history_delete(browser: Any, tmp_path: Path) -> None:
    served = Served(make_project(tmp_path / "proj", history=True))
    page = browser.new_page()
    try:
        with screenshot_on_failure(page, tmp_path):
            page.goto(f"http://{served.host}/?token={served.sessions.token}")
            assert "token" not in page.url  # traded for the cookie, gone from the address
            page.get_by_role("heading", name="Agents").wait_for()
            page.locator("button.verify").first.click()
            page.locator(".verify-result").first.wait_for()
            assert page.locator(".verify-result").first.inner_text().startswith("OK")
            snap(page, "overview")

            page.locator("a.agent-link", has_text="ag").first.click()
            page.get_by_role("heading", name="Memory of ag").wait_for()
            assert page.locator("tr.evict-next").count() >= 1
            assert page.locator("tr.unbounded").count() == 1
            page.select_option("select[name=category]", "CACHE")  # htmx swaps the table
            page.wait_for_url(re.compile(r"category=CACHE"))
            page.locator("#entries tbody tr").nth(2).wait_for()
            assert page.locator("#entries tbody tr").count() == 3
            snap(page, "agent")

            page.locator("#history-link").click()
            page.get_by_role("heading", name="History of ag").wait_for()
            page.locator("svg.chart").wait_for()  # drawn after the page, behind a spinner
            assert page.locator(".timeline li").count() == 7

            page.goto(inside(page, '/agents/busy/history'))  # six hours, evictions
            page.locator("svg.chart polygon.cache").wait_for()
            assert page.locator(".timeline li.evict").count() >= 1
            assert page.locator(".timeline li.quota").count() == 1
            assert page.locator(".timeline li.refusal").count() >= 1
            snap(page, "history")

            page.goto(inside(page, '/agents/ag?category=CACHE'))
            page.get_by_role("heading", name="Memory of ag").wait_for()
            row = page.locator("#entries tbody tr", has_text="cache/1")
            row.locator("input[type=checkbox]").check()
            page.locator("#delete-selected").click()
            confirm = page.locator("#confirm-text")
            confirm.wait_for()
            assert "1 entry" in confirm.inner_text() and "bytes" in confirm.inner_text()
            snap(page, "confirm")
            page.locator("#confirm-delete").click()
            page.locator("#done").wait_for()
            assert page.locator("#done").inner_text() == "Removed 1 entry"
            assert page.locator("#entries", has_text="cache/1").count() == 0
            assert SECRET_VALUE.decode() not in page.content()

        lines = [json.loads(x) for x in
                 (served.project.dot / "audit.jsonl").read_text().splitlines()]
        last = lines[-1]
        assert (last["action"], last["key"], last["actor"], last["category"]) == (
            "deployer_delete", "cache/1", "deployer", "CACHE")
    finally:
        page.close()
        served.stop()


def test_verify_shows_its_progress_and_holds_no_page(browser: Any, tmp_path: Path) -> None:
    """The button starts the verify and shows its progress (here it waits for the
    store's write lock, held by another connection); the deployer goes to the
    history page and back meanwhile, and the result appears once the lock goes."""
    import sqlite3

    served = Served(make_project(tmp_path / "proj", history=True))
    page = browser.new_page()
    blocker = sqlite3.connect(served.project.dot / "playground.db", isolation_level=None)
    try:
        with screenshot_on_failure(page, tmp_path):
            page.goto(f"http://{served.host}/?token={served.sessions.token}")
            page.get_by_role("heading", name="Agents").wait_for()
            blocker.execute("BEGIN IMMEDIATE")
            row = page.locator("tr", has_text="busy")
            row.locator("button.verify").click()
            row.locator(".verifying progress").wait_for()
            snap(page, "verifying")
            page.goto(inside(page, "/agents/busy/history"))
            page.get_by_role("heading", name="History of busy").wait_for()
            page.go_back()
            page.locator("tr", has_text="busy").locator(".verifying progress").wait_for()
            blocker.execute("ROLLBACK")
            result = page.locator("tr", has_text="busy").locator(".verify-result")
            result.wait_for()
            assert result.inner_text().startswith("OK")
    finally:
        blocker.close()
        page.close()
        served.stop()


def test_a_cross_site_page_cannot_delete(browser: Any, tmp_path: Path) -> None:
    """A page on another origin posts the delete form to the console: the browser
    sends no cookie (SameSite=Strict) and another Origin, so nothing is deleted."""
    served = Served(make_project(tmp_path / "proj"))
    page = browser.new_page()
    try:
        with screenshot_on_failure(page, tmp_path):
            page.goto(f"http://{served.host}/?token={served.sessions.token}")  # signed in
            page.get_by_role("heading", name="Agents").wait_for()
            agent = inside(page, "/agents/ag")
            attacker = tmp_path / "attack.html"
            # Even an attacker who knew the secret path: no cookie, another Origin.
            attacker.write_text(
                f'<form id="f" method="post" action="{agent}/delete">'
                '<input name="mode" value="category"><input name="category" value="CACHE">'
                f'<input name="csrf" value="guess"></form>'
                '<script>document.getElementById("f").submit()</script>')
            page.goto(attacker.as_uri())
            page.wait_for_load_state()
            page.wait_for_function("document.body && document.body.innerText.length > 0")
            assert "Removed" not in page.content()
            page.goto(agent)
            assert page.locator("#entries", has_text="cache/0").count() == 1
    finally:
        page.close()
        served.stop()


class Listener:
    """A plain HTTP server on another port of 127.0.0.1 that records the Cookie and
    Referer headers it receives: what any local program could run."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.seen: list[dict[str, str]] = []
        seen = self.seen

        class Record(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append({"path": self.path, "cookie": self.headers.get("Cookie", ""),
                             "referer": self.headers.get("Referer", "")})
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(b"<p>hello</p>")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Record)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("path_check", [True, False])
def test_a_cookie_chromium_sends_to_another_port_opens_nothing(
        browser: Any, tmp_path: Path, path_check: bool) -> None:
    """The deployer, signed in, visits another local server: with the secret path the
    cookie (Path=/s/SECRET) does not even reach it, and the cookie taken from the
    browser and replayed by a raw client reads nothing; without it (the first
    console), the listener receives the cookie and reads the agent's keys."""
    from rotifer.console.security import Protections
    from tests.console.helpers import request

    served = Served(make_project(tmp_path / "proj"), Protections(path=path_check))
    listener = Listener()
    page = browser.new_page()
    try:
        with screenshot_on_failure(page, tmp_path):
            page.goto(f"http://{served.host}/?token={served.sessions.token}")
            page.get_by_role("heading", name="Agents").wait_for()
            page.goto(f"http://127.0.0.1:{listener.port}/anything")
            page.wait_for_load_state()
            received = " ".join(h["cookie"] for h in listener.seen)
            assert "/s/" not in " ".join(h["referer"] for h in listener.seen)
            cookie = next(c for c in page.context.cookies()
                          if c["name"] == f"rotifer_console_{served.port}")
            stolen = f"{cookie['name']}={cookie['value']}"
            read = request(served.port, "GET", "/agents/ag",
                           {"Host": served.host, "Cookie": stolen})
            if path_check:
                assert "rotifer_console" not in received
                assert read.status == 401 and "cache/0" not in read.text
            else:
                assert stolen in received  # cookies are not kept apart by port
                assert read.status == 200 and "cache/0" in read.text
    finally:
        page.close()
        listener.stop()
        served.stop()


def test_modal_confirmation_select_all_entry_page_and_logout(browser: Any,
                                                             tmp_path: Path) -> None:
    served = Served(make_project(tmp_path / "proj"))
    page = browser.new_page()
    try:
        with screenshot_on_failure(page, tmp_path):
            page.goto(f"http://{served.host}/agents/ag?token={served.sessions.token}")
            page.get_by_role("heading", name="Memory of ag").wait_for()
            assert "/s/" in page.url and "token" not in page.url
            boxes = page.locator("#entries tbody input[type=checkbox]")
            assert boxes.first.get_attribute("aria-label", timeout=5000).startswith("select ")
            assert page.get_by_label("select cache/1").count() == 1  # says which row
            page.locator("#select-all").check()
            assert all(boxes.nth(i).is_checked() for i in range(boxes.count()))
            page.locator("#select-all").uncheck()

            page.get_by_role("button", name="Delete category…").click()
            dialog = page.locator("dialog#dialog")
            page.locator("dialog#dialog[open] #confirm-text").wait_for()
            assert page.evaluate("document.activeElement.id") == "cancel"  # focus inside
            assert page.evaluate("document.querySelector('#dialog').matches(':modal')")
            page.keyboard.press("Escape")
            page.wait_for_function("!document.querySelector('#dialog').open")
            assert not dialog.is_visible()
            assert page.locator("#entries", has_text="cache/0").count() == 1  # kept

            page.locator("#entries a.key-cell", has_text="pref/short").click()
            page.locator("#fields").wait_for()
            assert "PREFERENCE" in page.locator("#fields").inner_text()
            snap(page, "entry")

            page.goto(inside(page, '/agents/ag/history'))
            page.get_by_label("Since").fill("yesterday")
            page.get_by_role("button", name="Filter").click()
            page.locator("#timeline [role=alert]").wait_for()  # the error, not the lines
            assert "since must be a time" in page.locator("#timeline").inner_text()
            assert page.locator("#timeline li").count() == 0

            where = inside(page, "/agents/ag")
            page.locator("#logout").click()
            page.get_by_text("Signed out").wait_for()
            page.goto(where)
            assert "Not signed in" in page.content()
    finally:
        page.close()
        served.stop()


def test_dark_scheme_follows_the_system(browser: Any, tmp_path: Path) -> None:
    served = Served(make_project(tmp_path / "proj"))
    page = browser.new_page()
    try:
        with screenshot_on_failure(page, tmp_path):
            page.goto(f"http://{served.host}/?token={served.sessions.token}")
            background = "getComputedStyle(document.body).backgroundColor"
            page.emulate_media(color_scheme="light")
            assert page.evaluate(background) == "rgb(255, 255, 255)"
            page.emulate_media(color_scheme="dark")
            assert page.evaluate(background) == "rgb(22, 26, 34)"
            icon = page.locator("link[rel=icon]").get_attribute("href")
            assert icon and page.request.get(icon).status == 200  # the favicon serves
            snap(page, "overview-dark")
    finally:
        page.close()
        served.stop()


def test_a_long_key_is_one_line_and_no_page_widens(browser: Any, tmp_path: Path) -> None:
    """A 1 KiB key rendered 100 lines tall and widened the history page to 7,400 px;
    now it is cut to one line (the whole key in its title) and pages fit the window."""
    project = make_project(tmp_path / "proj")
    gene = next(iter(project.registry().entries()))
    long_key = "long/" + "k" * 1019
    with project.open_store("ag") as store:
        store.for_gene("ag", gene, "notes").write_memory(long_key, b"1", "CACHE")
    served = Served(project)
    page = browser.new_page()
    try:
        with screenshot_on_failure(page, tmp_path):
            page.goto(f"http://{served.host}/agents/ag?token={served.sessions.token}")
            cell = page.locator("#entries a.key-cell", has_text="long/")
            assert cell.get_attribute("title") == long_key
            assert cell.bounding_box()["height"] < 40
            for path in ("/agents/ag", "/agents/ag/history"):
                page.goto(inside(page, path))
                page.wait_for_load_state()
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= page.evaluate("window.innerWidth"), (path, width)
            line = page.locator(".timeline code.key-cell", has_text="long/").first
            assert line.bounding_box()["height"] < 40
    finally:
        page.close()
        served.stop()
