"""Every refusal of the console, by real HTTP requests to a real uvicorn on loopback --
and, for each protection that can be switched off, the same attack succeeding
without it (so the test bites)."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotifer.console.app import key_ref
from rotifer.console.security import IDLE_SECONDS, Protections, cookie_name
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
    """The form a confirmation of deleting ``key`` shows (its version included)."""
    from rotifer.memory.views.browse import describe_keys

    with served.project.open_store("ag") as store:
        seq = {e.key: e.seq for e in describe_keys(store, "ag", [key])}
    fields = [("mode", "keys"), ("ref", key_ref(key)), ("expect", json.dumps(seq))]
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
        for cookie in ("", f"{cookie_name(served.port)}=wrong", f"{cookie_name(served.port)}=",
                       "other=1"):
            for where in (path, served.at(path)):
                resp = request(served.port, "GET", where, {"Host": served.host,
                                                           "Cookie": cookie})
                assert resp.status == 401, (where, cookie)
                assert "cache/" not in resp.text


def test_without_the_token_check_anyone_reads_the_console(project_dir: Path) -> None:
    s = open_with(project_dir, token=False)
    try:
        resp = request(s.port, "GET", "/agents/ag", {"Host": s.host})
        assert resp.status == 200 and "cache/0" in resp.text
    finally:
        s.stop()


def test_the_token_is_traded_for_a_session_under_its_own_secret_path(served: Served) -> None:
    token = served.sessions.token
    resp = request(served.port, "GET", f"/agents/ag?token={token}&sort=size",
                   {"Host": served.host})
    assert resp.status == 303
    location = resp.headers["location"]
    assert token not in location  # the token leaves the address
    root, rest = location[:len("/s/") + 43], location[len("/s/") + 43:]
    assert root.startswith("/s/") and rest == "/agents/ag?sort=size"
    cookie = resp.headers["set-cookie"]
    name_value, *attributes = [p.strip() for p in cookie.split(";")]
    assert name_value.startswith(f"{cookie_name(served.port)}=") and token not in cookie
    assert {"HttpOnly", "SameSite=Strict", f"Path={root}"} <= set(attributes)
    page = request(served.port, "GET", location, {"Host": served.host, "Cookie": name_value})
    assert page.status == 200 and "cache/0" in page.text
    wrong = request(served.port, "GET", "/?token=nope", {"Host": served.host})
    assert wrong.status == 403 and "set-cookie" not in wrong.headers


def test_the_token_signs_in_once_and_each_sign_in_is_its_own_session(served: Served) -> None:
    token = served.sessions.token
    first = request(served.port, "GET", f"/?token={token}", {"Host": served.host})
    assert first.status == 303
    again = request(served.port, "GET", f"/?token={token}", {"Host": served.host})
    assert again.status == 403 and "set-cookie" not in again.headers  # spent
    assert served.sessions.token != token  # the next browser's (printed by the console)
    other = served.sign_in()
    assert other.cookie != served.session.cookie and other.path != served.session.path
    assert other.csrf != served.session.csrf
    # One session's cookie does not open another's path.
    crossed = request(served.port, "GET", other.root + "/agents/ag",
                      {"Host": served.host, "Cookie": served.cookie})
    assert crossed.status == 401


def test_without_the_one_time_check_a_token_from_the_history_signs_in_again(
        project_dir: Path) -> None:
    s = open_with(project_dir, once=False)
    try:
        for _ in range(2):
            resp = request(s.port, "GET", f"/?token={s.first_token}", {"Host": s.host})
            assert resp.status == 303
    finally:
        s.stop()


def test_a_session_ends_when_idle_and_at_logout(served: Served) -> None:
    assert served.get("/agents/ag").status == 200
    served.now[0] += IDLE_SECONDS - 1
    assert served.get("/agents/ag").status == 200  # each request restarts the idle time
    served.now[0] += IDLE_SECONDS + 1
    gone = served.get("/agents/ag")
    assert gone.status == 401 and "cache/0" not in gone.text  # the address in history
    served.session = served.sign_in()
    csrf = urllib.parse.urlencode({"csrf": served.csrf})
    assert served.post("/logout", urllib.parse.urlencode({"csrf": "guess"})).status == 403
    out = served.post("/logout", csrf)
    assert out.status == 200 and "Max-Age=0" in out.headers["set-cookie"]
    assert served.get("/agents/ag").status == 401
    served.session = served.sign_in()


def test_the_token_redirect_never_leaves_the_console(served: Served) -> None:
    resp = request(served.port, "GET", f"//evil.example/?token={served.sessions.token}",
                   {"Host": served.host})
    assert resp.status == 303 and resp.headers["location"].startswith("/s/")
    assert resp.headers["location"].endswith("/") and "evil" not in resp.headers["location"]


# -- a cookie that reached another server on this host (finding 1) -----------------


def replay(served: Served, cookie: str, key: str) -> tuple[int, int, int]:
    """What a server on another port of 127.0.0.1 does with the console's cookie:
    read the agent page at the paths it can know, take a CSRF token, delete."""
    host = {"Host": served.host, "Cookie": cookie}
    page = request(served.port, "GET", "/agents/ag", host)
    guessed = request(served.port, "GET", "/s/guess/agents/ag", host)
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    body = delete_form(served, key, found.group(1) if found else "none")
    deleted = request(served.port, "POST", "/agents/ag/delete", {
        **host, "Origin": served.origin, "Content-Type": "application/x-www-form-urlencoded"},
        body)
    return page.status, guessed.status, deleted.status


def test_a_cookie_alone_opens_nothing(served: Served) -> None:
    statuses = replay(served, served.cookie, "cache/0")
    assert statuses == (401, 401, 401)
    assert "cache/0" in keys_of(served)


def test_without_the_secret_path_a_replayed_cookie_reads_and_deletes(tmp_path: Path) -> None:
    from rotifer.agents.project import Project

    s = Served(Project(make_project(tmp_path / "proj").root), Protections(path=False))
    try:
        page = request(s.port, "GET", "/agents/ag", {"Host": s.host, "Cookie": s.cookie})
        assert page.status == 200 and "cache/0" in page.text
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found
        body = delete_form(s, "cache/0", found.group(1))
        done = request(s.port, "POST", "/agents/ag/delete", {
            "Host": s.host, "Cookie": s.cookie, "Origin": s.origin,
            "Content-Type": "application/x-www-form-urlencoded"}, body)
        assert done.status == 303
        assert "cache/0" not in keys_of(s)
    finally:
        s.stop()


# -- changes: methods, Origin, CSRF ------------------------------------------------


def test_a_change_needs_the_consoles_origin(served: Served) -> None:
    body = delete_form(served, "cache/0", served.csrf)
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
        resp = s.post("/agents/ag/delete", delete_form(s, "cache/1", s.csrf),
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
        resp = request(served.port, method, served.at("/agents/ag/delete"), {
            "Host": served.host, "Cookie": served.cookie, "Origin": served.origin})
        assert resp.status == 405, method
    # A GET never deletes: the delete route answers only POST and DELETE.
    assert served.get("/agents/ag/delete?mode=category&category=CACHE").status == 405
    assert "cache/0" in keys_of(served)


def test_no_cross_origin_reads(served: Served) -> None:
    """No answer -- page, refusal or preflight -- lets another origin's script read it."""
    answers = [served.get("/", Origin="http://evil.example"),
               request(served.port, "OPTIONS", served.at("/"), {
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
