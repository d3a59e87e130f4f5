"""Every refusal of the console, by real HTTP requests to a real uvicorn on loopback --
and, for each protection that can be switched off, the same attack succeeding
without it (so the test bites)."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotifer.console.app import key_ref
from rotifer.console.security import Protections
from tests.console.helpers import SECRET_VALUE, Served, make_project, request


@pytest.fixture(scope="module")
def project_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("console") / "proj"
    make_project(root)
    return root


@pytest.fixture(scope="module")
def served(project_dir: Path) -> Iterator[Served]:
    from rotifer.agents.project import Project

    s = Served(Project(project_dir))
    yield s
    s.stop()


def open_with(project_dir: Path, **off: bool) -> Served:
    from rotifer.agents.project import Project

    return Served(Project(project_dir), Protections(**off))


def delete_form(served: Served, key: str, csrf: str | None = None) -> str:
    fields = [("mode", "keys"), ("ref", key_ref(key))]
    if csrf is not None:
        fields.append(("csrf", csrf))
    return urllib.parse.urlencode(fields)


def keys_of(served: Served) -> str:
    return served.get("/agents/ag").text


# -- Host allowlist (DNS rebinding) ------------------------------------------------


def test_unknown_host_is_refused(served: Served) -> None:
    for host in ("evil.example", f"evil.example:{served.port}", f"127.0.0.2:{served.port}", ""):
        resp = served.get("/", Host=host)
        assert resp.status == 400, host
        assert "ag" not in resp.text
    assert served.get("/", Host=f"localhost:{served.port}").status == 200


def test_without_the_host_check_a_rebinding_page_reads_the_console(project_dir: Path) -> None:
    s = open_with(project_dir, host=False)
    try:
        resp = s.get("/", Host=f"evil.example:{s.port}")
        assert resp.status == 200 and "/agents/ag" in resp.text
    finally:
        s.stop()


# -- the token and its cookie ------------------------------------------------------


def test_no_cookie_no_page(served: Served) -> None:
    for path in ("/", "/agents/ag", "/agents/ag/history", "/static/htmx.min.js"):
        for cookie in ("", "rotifer_console=wrong", "rotifer_console=", "other=1"):
            resp = request(served.port, "GET", path, {"Host": served.host, "Cookie": cookie})
            assert resp.status == 401, (path, cookie)
            assert "cache/" not in resp.text


def test_without_the_token_check_anyone_reads_the_console(project_dir: Path) -> None:
    s = open_with(project_dir, token=False)
    try:
        resp = request(s.port, "GET", "/agents/ag", {"Host": s.host})
        assert resp.status == 200 and "cache/0" in resp.text
    finally:
        s.stop()


def test_the_token_is_traded_for_a_strict_httponly_cookie(served: Served) -> None:
    resp = request(served.port, "GET", f"/agents/ag?token={served.secrets.token}&sort=size",
                   {"Host": served.host})
    assert resp.status == 303
    assert resp.headers["location"] == "/agents/ag?sort=size"  # the token leaves the address
    cookie = resp.headers["set-cookie"]
    assert cookie.startswith(f"rotifer_console={served.secrets.session};")
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= {p.strip() for p in cookie.split(";")}
    assert served.secrets.token not in cookie
    wrong = request(served.port, "GET", "/?token=nope", {"Host": served.host})
    assert wrong.status == 403 and "set-cookie" not in wrong.headers


def test_the_token_redirect_never_leaves_the_console(served: Served) -> None:
    resp = request(served.port, "GET", f"//evil.example/?token={served.secrets.token}",
                   {"Host": served.host})
    assert resp.status == 303 and resp.headers["location"] == "/"


# -- changes: methods, Origin, CSRF ------------------------------------------------


def test_a_change_needs_the_consoles_origin(served: Served) -> None:
    body = delete_form(served, "cache/0", served.secrets.csrf)
    for origin in (None, "http://evil.example", f"http://evil.example:{served.port}", "null"):
        resp = served.post("/agents/ag/delete", body, Origin=origin)  # type: ignore[arg-type]
        assert resp.status == 403, origin
    assert "cache/0" in keys_of(served)


def test_a_change_needs_the_csrf_token(served: Served) -> None:
    for csrf in (None, "", "guess"):
        resp = served.post("/agents/ag/delete", delete_form(served, "cache/0", csrf))
        assert resp.status == 403, csrf
    assert "cache/0" in keys_of(served)


def test_without_the_origin_check_a_cross_site_form_deletes(project_dir: Path,
                                                            tmp_path: Path) -> None:
    from rotifer.agents.project import Project

    copy = tmp_path / "proj"
    make_project(copy)
    s = Served(Project(copy), Protections(origin=False))
    try:
        # The attacker's page would still need the CSRF token: with it, only Origin stood.
        resp = s.post("/agents/ag/delete", delete_form(s, "cache/1", s.secrets.csrf),
                      Origin="http://evil.example")
        assert resp.status == 303
        assert "cache/1" not in keys_of(s)
    finally:
        s.stop()


def test_without_the_csrf_check_a_same_origin_post_without_token_deletes(
        tmp_path: Path) -> None:
    from rotifer.agents.project import Project

    copy = tmp_path / "proj"
    make_project(copy)
    s = Served(Project(copy), Protections(csrf=False))
    try:
        resp = s.post("/agents/ag/delete", delete_form(s, "cache/2"))
        assert resp.status == 303
        assert "cache/2" not in keys_of(s)
    finally:
        s.stop()


def test_only_get_post_delete(served: Served) -> None:
    for method in ("PUT", "PATCH", "OPTIONS", "TRACE"):
        resp = request(served.port, method, "/agents/ag/delete", {
            "Host": served.host, "Cookie": served.cookie, "Origin": served.origin})
        assert resp.status == 405, method
    # A GET never deletes: the delete route answers only POST and DELETE.
    assert served.get("/agents/ag/delete?mode=category&category=CACHE").status == 405
    assert "cache/0" in keys_of(served)


def test_no_cross_origin_reads(served: Served) -> None:
    """No answer -- page, refusal or preflight -- lets another origin's script read it."""
    answers = [served.get("/", Origin="http://evil.example"),
               request(served.port, "OPTIONS", "/", {
                   "Host": served.host, "Origin": "http://evil.example",
                   "Access-Control-Request-Method": "POST"}),
               request(served.port, "GET", "/", {"Host": served.host}),
               served.post("/agents/ag/delete", "", Origin="http://evil.example")]
    for resp in answers:
        assert not any(h.startswith("access-control-") for h in resp.headers), resp.headers
        assert "frame-ancestors 'none'" in resp.headers["content-security-policy"]
        assert resp.headers["referrer-policy"] == "same-origin"


# -- what pages show ----------------------------------------------------------------


def test_pages_never_show_a_value_and_escape_keys(served: Served) -> None:
    pages = [served.get(p).text for p in ("/", "/agents/ag", "/agents/ag?sort=size",
                                          "/agents/ag/history", "/agents/ag/history/chart")]
    for text in pages:
        assert SECRET_VALUE.decode() not in text
        assert "<script>alert" not in text and "\x1b" not in text and "\u202e" not in text
    assert "evil/\\x1b[31mred\\u202eKEY&lt;script&gt;" in pages[1]


def test_no_database_url_in_a_page(tmp_path: Path) -> None:

    project = make_project(tmp_path / "proj")
    (project.dot / "config.json").write_text(json.dumps(
        {"memoryUrl": "postgresql://admin:hunter2@127.0.0.1:9/db?sslmode=disable"}))
    s = Served(project)
    try:
        for path in ("/", "/agents/ag", "/agents/ag/history"):
            resp = s.get(path)
            assert "hunter2" not in resp.text and "admin:" not in resp.text, resp.text
        assert "MEMORY_STORAGE_ERROR" in s.get("/agents/ag").text
    finally:
        s.stop()
