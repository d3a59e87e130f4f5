"""``rotifer console`` as a user runs it: a real process, its printed address, its logs."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import clean_env, refused, rotifer_command
from tests.console.helpers import SECRET_VALUE, make_project, request

URL = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)")


def test_serves_loopback_with_a_token_and_logs_no_secret(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root)
    proc = subprocess.Popen([*rotifer_command(), "console", "--port", "0"], cwd=root,
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        found = URL.search("".join(lines))
        assert found, lines
        port, token = int(found.group(1)), found.group(2)
        host = {"Host": f"127.0.0.1:{port}"}
        first = request(port, "GET", f"/?token={token}", host)
        assert first.status == 303
        cookie = first.headers["set-cookie"].split(";")[0]
        root = first.headers["location"].rstrip("/")
        page = request(port, "GET", f"{root}/agents/ag", {**host, "Cookie": cookie})
        assert page.status == 200 and "cache/0" in page.text
        assert request(port, "GET", "/", host).status == 401
        with pytest.raises(ConnectionRefusedError):  # bound to 127.0.0.1 alone
            socket.create_connection(("127.0.0.2", port), timeout=30).close()
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    logs = "".join(lines[1:]) + out + err
    assert token not in logs.replace(f"?token={token}", "", 1)  # only in the printed address
    assert logs.count(token) <= 1
    assert SECRET_VALUE.decode() not in logs
    assert "Traceback" not in err


def test_another_address_needs_the_flag(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root)
    refused(root, "CONSOLE_ADDRESS", "console", "--host", "0.0.0.0", "--port", "0")


def test_allow_remote_warns(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root)
    proc = subprocess.Popen([*rotifer_command(), "console", "--host", "0.0.0.0", "--port", "0",
                             "--allow-remote"], cwd=root, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        found = URL.search(proc.stdout.readline() + proc.stdout.readline())
        assert found, "no address printed"
        port = int(found.group(1))
        # Without the loopback default the console answers on any address of the machine
        # (127.0.0.2 stands for one here: the test sends nothing beyond loopback) --
        # and the Host check still refuses a name it was not started for.
        with socket.create_connection(("127.0.0.2", port), timeout=30):
            pass
        assert request(port, "GET", "/", {"Host": f"127.0.0.2:{port}"}, addr="127.0.0.2"
                       ).status == 400
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "warning: the console listens on 0.0.0.0" in err


def console(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*rotifer_command(), "console", *args], cwd=root, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)


def test_localhost_listens_on_every_address_a_browser_may_try(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root)
    proc = console(root, "--host", "localhost", "--port", "0")
    try:
        assert proc.stdout is not None
        text = proc.stdout.readline() + proc.stdout.readline()
        found = re.search(r"http://localhost:(\d+)/\?token=([A-Za-z0-9_-]+)", text)
        assert found, text
        port = int(found.group(1))
        for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(family) as sock:  # the console answers on both
                sock.connect((address, port))
        host = {"Host": f"localhost:{port}"}
        assert request(port, "GET", f"/?token={found.group(2)}", host, addr="::1").status == 303
    finally:
        stop(proc)


def test_a_name_it_cannot_fully_bind_is_refused(tmp_path: Path) -> None:
    """A squatter holds [::1]:PORT; the console asked for localhost:PORT would listen on
    127.0.0.1 alone while Chromium sends the token to [::1] first."""
    root = tmp_path / "proj"
    make_project(root)
    with socket.socket(socket.AF_INET6) as squatter:
        squatter.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        squatter.bind(("::1", 0))
        squatter.listen(4)
        port = squatter.getsockname()[1]
        try:  # the same port must be free on 127.0.0.1 for the test to mean anything
            socket.create_server(("127.0.0.1", port)).close()
        except OSError:
            pytest.skip("the squatter's port is taken on 127.0.0.1 too")
        err = refused(root, "CONSOLE_ADDRESS", "console", "--host", "localhost",
                      "--port", str(port))
        assert f"[::1] port {port}" in err and "localhost" in err
        squatter.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing, and no token, reached it
            squatter.accept()


def test_each_sign_in_spends_the_token_and_the_console_prints_the_next(
        tmp_path: Path) -> None:
    root = tmp_path / "proj"
    make_project(root)
    proc = console(root, "--port", "0")
    try:
        assert proc.stdout is not None
        found = URL.search("".join(proc.stdout.readline() for _ in range(3)))
        assert found
        port, token = int(found.group(1)), found.group(2)
        host = {"Host": f"127.0.0.1:{port}"}
        assert request(port, "GET", f"/?token={token}", host).status == 303
        assert request(port, "GET", f"/?token={token}", host).status == 403  # spent
        following = URL.search(proc.stdout.readline())
        assert following and following.group(2) != token
        assert request(port, "GET", f"/?token={following.group(2)}", host).status == 303
    finally:
        stop(proc)
