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
        page = request(port, "GET", "/agents/ag", {**host, "Cookie": cookie})
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
