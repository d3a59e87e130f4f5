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


def snap(page: Any, name: str) -> None:
    folder = os.environ.get("ROTIFER_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"console-{name}.png"))


def test_overview_agent_history_delete(browser: Any, tmp_path: Path) -> None:
    served = Served(make_project(tmp_path / "proj", history=True))
    page = browser.new_page()
    try:
        with screenshot_on_failure(page, tmp_path):
            page.goto(f"http://{served.host}/?token={served.secrets.token}")
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

            page.goto(f"http://{served.host}/agents/busy/history")  # six hours, evictions
            page.locator("svg.chart polygon.cache").wait_for()
            assert page.locator(".timeline li.evict").count() >= 1
            assert page.locator(".timeline li.quota").count() == 1
            assert page.locator(".timeline li.refusal").count() >= 1
            snap(page, "history")

            page.goto(f"http://{served.host}/agents/ag?category=CACHE")
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


def test_a_cross_site_page_cannot_delete(browser: Any, tmp_path: Path) -> None:
    """A page on another origin posts the delete form to the console: the browser
    sends no cookie (SameSite=Strict) and another Origin, so nothing is deleted."""
    served = Served(make_project(tmp_path / "proj"))
    page = browser.new_page()
    try:
        with screenshot_on_failure(page, tmp_path):
            page.goto(f"http://{served.host}/?token={served.secrets.token}")  # signed in
            attacker = tmp_path / "attack.html"
            attacker.write_text(
                f'<form id="f" method="post" action="http://{served.host}/agents/ag/delete">'
                '<input name="mode" value="category"><input name="category" value="CACHE">'
                f'<input name="csrf" value="guess"></form>'
                '<script>document.getElementById("f").submit()</script>')
            page.goto(attacker.as_uri())
            page.wait_for_load_state()
            page.wait_for_function("document.body && document.body.innerText.length > 0")
            assert "Removed" not in page.content()
            page.goto(f"http://{served.host}/agents/ag")
            assert page.locator("#entries", has_text="cache/0").count() == 1
    finally:
        page.close()
        served.stop()
