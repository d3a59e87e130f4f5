"""A real project for the console tests, and the console serving it.

:func:`make_project` builds a project with one gene and agents whose memory
holds entries of every kind the pages mark.  :class:`Served` runs the console
app (with chosen protections, so a test can switch one off to show its attack
works without it) in a real uvicorn server in a thread, on 127.0.0.1 and a free
port; :func:`request` sends raw HTTP with whatever headers an attacker would.
The security, concurrency and browser tests use it: sockets, ports and
concurrent requests are their point.  :class:`InProcess` is the same interface
through Starlette's ``TestClient`` (no server, no socket), for the tests of
what the pages say and do.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.testclient import TestClient

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.console.app import create_app
from rotifer.console.security import Protections, Session, Sessions, cookie_name
from rotifer.memory.clock import SystemClock
from tests.genes.helpers import write_gene

GENE_CODE = "def express(input, ctx):\n    return input\n"
RETAIN_1_DAY = {"maxRetentionDays": 1, "autoDeleteOnTermination": False,
                "anonymizationSupported": False}
#: A key a gene could choose to fool a reader: an escape sequence and a bidi override.
HOSTILE_KEY = "evil/\x1b[31mred\u202eKEY<script>alert(1)</script>"
SECRET_VALUE = b"SECRET-VALUE-never-shown-7d1e"


def make_project(root: Path, memory_url: str | None = None, *, history: bool = False
                 ) -> Project:
    """Agents ``ag`` (entries of every category, marks, a hostile key) and ``other``;
    with ``history``, ``busy`` too (:func:`fill_history`)."""
    project = Project.init(root)
    if memory_url is not None:
        (project.dot / "config.json").write_text(f'{{"memoryUrl": "{memory_url}"}}')
    write_gene(project.genes_dir, "keeper", GENE_CODE, domain="notes")
    gene = wrap_gene(project, "keeper")
    agents = Agents(project)
    agents.create("ag", ["keeper"], quota_bytes=4096)
    agents.create("other", ["keeper"])
    with project.open_store("ag") as store:
        memory = store.for_gene("ag", gene.v2_id, "notes")
        memory.write_memory("pref/theme", SECRET_VALUE, "PREFERENCE")
        memory.write_memory("pref/short", b"1", "PREFERENCE", None, RETAIN_1_DAY)
        for i in range(3):
            memory.write_memory(f"cache/{i}", SECRET_VALUE, "CACHE")
        memory.write_memory("ctx/now", SECRET_VALUE, "CONTEXT")
        memory.write_memory(HOSTILE_KEY, SECRET_VALUE, "PATTERN")
    if history:
        fill_history(project, gene.v2_id or "")
    return project


def fill_history(project: Project, gene_id: str) -> None:
    """Agent ``busy``: six hours of history (a clock set back), a CACHE filling its
    quota and being evicted, refusals, a quota refusal and a deployer's delete."""
    from rotifer.memory import AgentMemoryError, ManualClock

    clock = ManualClock(SystemClock().now_us() - 6 * 3600 * 1_000_000)
    Agents(project).create("busy", ["keeper"], quota_bytes=3000)
    with project.open_store("busy", clock=clock) as store:
        memory = store.for_gene("busy", gene_id, "notes")
        stranger = store.for_gene("busy", "v2:" + "e" * 64, "elsewhere")
        memory.write_memory("pref/lang", b"en", "PREFERENCE")
        for i in range(60):
            clock.advance(seconds=300)
            memory.write_memory(f"cache/{i:02d}", b"x" * 60, "CACHE")
            if i % 7 == 3:
                memory.write_memory(f"pattern/{i:02d}", b"y" * 90, "PATTERN")
            if i % 20 == 10:
                with contextlib.suppress(AgentMemoryError):
                    stranger.write_memory("pref/lang", b"fr", "PREFERENCE")
        clock.advance(seconds=300)
        with contextlib.suppress(AgentMemoryError):
            memory.write_memory("pref/huge", b"z" * 4000, "PREFERENCE")
        store.deployer("busy").delete_key("cache/59")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Served:
    """The console app in a real uvicorn on 127.0.0.1:port (a thread of this process)."""

    project: Project
    protections: Protections = field(default_factory=Protections)

    def __post_init__(self) -> None:
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        #: The sessions' clock (seconds): a test moves it instead of waiting.
        self.now = [0.0]
        self.sessions = Sessions(clock=lambda: self.now[0])
        self.first_token = self.sessions.token
        self._serve(create_app(self.project, port=self.port, sessions=self.sessions,
                               protections=self.protections))
        self.session = self.sign_in()

    def _serve(self, app: Starlette) -> None:
        """Start serving ``app``: a real uvicorn in a thread, on :attr:`port`."""
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    def _send(self, method: str, path: str, headers: dict[str, Any],
              body: str | None = None) -> Response:
        """One request, with exactly these headers (by real HTTP here)."""
        return request(self.port, method, path, headers, body)

    def sign_in(self) -> Session:
        """Sign in as a browser does (the current token); the session."""
        if not self.protections.token:
            anyone = next(iter(self.sessions._sessions.values()))
            return anyone
        resp = self._send("GET", f"/?token={self.sessions.token}", {"Host": self.host})
        assert resp.status == 303, resp
        value = resp.headers["set-cookie"].split(";")[0].split("=", 1)[1]
        session = self.sessions.find(value)
        assert session is not None
        return session

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)

    @property
    def cookie(self) -> str:
        return f"{cookie_name(self.port)}={self.session.cookie}"

    @property
    def csrf(self) -> str:
        return self.session.csrf

    @property
    def origin(self) -> str:
        return f"http://{self.host}"

    def at(self, path: str) -> str:
        """``path`` inside the session's secret root (as the console's links are)."""
        return self.session.root + path if self.protections.path or not self.protections.token \
            else path

    def get(self, path: str, **headers: str) -> Response:
        return self._send("GET", self.at(path), {"Host": self.host, "Cookie": self.cookie,
                                                 **headers})

    def post(self, path: str, body: str, **headers: str) -> Response:
        return self._send("POST", self.at(path), {
            "Host": self.host, "Cookie": self.cookie, "Origin": self.origin,
            "Content-Type": "application/x-www-form-urlencoded", **headers}, body)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    text: str


def request(port: int, method: str, path: str, headers: dict[str, Any],
            body: str | None = None, addr: str = "127.0.0.1") -> Response:
    """One real HTTP request to addr:port (loopback) with exactly these headers."""
    conn = http.client.HTTPConnection(addr, port, timeout=120)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            if value is not None:
                conn.putheader(name, value)
        data = body.encode() if body is not None else None
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        resp = conn.getresponse()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()},
                        resp.read().decode("utf-8", "replace"))
    finally:
        conn.close()


@dataclass
class InProcess(Served):
    """:class:`Served`'s interface through Starlette's ``TestClient``: the same
    app, sessions and headers, requests handled in this process without a
    server (as Starlette's own tests do); :attr:`port` is only named, for the
    Host allowlist."""

    def _serve(self, app: Starlette) -> None:
        self.client = TestClient(app, base_url=f"http://{self.host}", follow_redirects=False,
                                 raise_server_exceptions=False)
        self.client.__enter__()  # runs the app's lifespan, as uvicorn does

    def stop(self) -> None:
        self.client.__exit__(None, None, None)

    def _send(self, method: str, path: str, headers: dict[str, Any],
              body: str | None = None) -> Response:
        self.client.cookies.clear()  # only the headers a test sends, as request() does
        resp = self.client.request(method, path, headers=headers,
                                   content=body.encode() if body is not None else None)
        return Response(resp.status_code, {k.lower(): v for k, v in resp.headers.items()},
                        resp.text)
