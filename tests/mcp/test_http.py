"""``rotifer mcp --http``: the SDK's client over Streamable HTTP with the printed token;
a bad token, a foreign Host and a web page's Origin refused -- and each of those
attacks succeeding once its protection is switched off (in process, the only way
to switch one off)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from rotifer.agents.project import Project
from rotifer.mcp.acting import WritePolicy
from rotifer.mcp.http import PATH, Protections, Token, http_app
from rotifer.mcp.run import opened
from rotifer.mcp.server import build_server

from .helpers import AGENT, Agent, audit, call, make_agent, refused, start_http, stop

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

INITIALIZE = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "probe", "version": "1"}}})


def post(url: str, headers: dict[str, str]) -> tuple[int, str]:
    """One raw POST of ``initialize`` with exactly these headers (Host included)."""
    host_port = url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest("POST", PATH, skip_host=True, skip_accept_encoding=True)
        sent = {"Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", **headers}
        for name, value in sent.items():
            conn.putheader(name, value)
        body = INITIALIZE.encode()
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        answer = conn.getresponse()
        cors = answer.getheader("Access-Control-Allow-Origin")
        assert cors is None, cors  # no CORS, ever
        return answer.status, answer.read().decode(errors="replace")
    finally:
        conn.close()


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    return make_agent(tmp_path)


def test_the_sdk_client_uses_the_tools_with_the_printed_token(agent: Agent) -> None:
    server = start_http(agent.root, AGENT, "--as", "notes")
    try:
        async def session() -> None:
            client_http = create_mcp_http_client(
                headers={"Authorization": f"Bearer {server.token}"})
            async with client_http, Client(streamable_http_client(
                    server.url, http_client=client_http), cache=None) as client:
                assert "memory_write" in [t.name for t in (await client.list_tools()).tools]
                assert not (await call(client, "memory_write", {"key": "k", "value": "v"})).error
                read = await call(client, "memory_read", {"key": "k"})
                assert read.body["entry"]["value"] == "v"
                refused(await call(client, "memory_write", {
                    "key": "p", "value": "v", "category": "PREFERENCE"}), "MEMORY_ACCESS_DENIED")
                assert [r.name for r in (await client.list_resources()).resources] == ["k"]

        anyio.run(session)
        host = server.url.split("//", 1)[1].split("/", 1)[0]
        assert post(server.url, {"Host": host})[0] == 401
        status, said = post(server.url, {"Host": host, "Authorization": "Bearer wrong"})
        assert status == 401 and server.token not in said
        assert post(server.url, {"Host": f"evil.example:{host.rsplit(':', 1)[1]}",
                                 "Authorization": f"Bearer {server.token}"})[0] == 400
        assert post(server.url, {"Host": host, "Origin": "http://evil.example",
                                 "Authorization": f"Bearer {server.token}"})[0] == 403
        assert post(server.url, {"Host": host,
                                 "Authorization": f"Bearer {server.token}"})[0] == 200
    finally:
        err = stop(server)
    assert server.token not in err  # nothing secret in the logs
    assert "Traceback" not in err and err.strip().endswith("stopped by SIGTERM"), err
    writes = [line for line in audit(agent.root) if line["action"] == "write"]
    assert [(line["key"], line["via"]) for line in writes] == [("k", "mcp")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def in_process(root: Path, protections: Protections) -> Iterator[tuple[str, Token]]:
    """The same application, in this process, with some protections switched off."""
    import uvicorn

    port = _free_port()
    token = Token()
    with opened(Project(root), AGENT, "notes", WritePolicy()) as acting:
        app: Any = http_app(build_server(acting, WritePolicy()), token, "127.0.0.1", port,
                            protections)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                               log_level="warning", access_log=False))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            for _ in range(600):
                if server.started:
                    break
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}{PATH}", token
        finally:
            server.should_exit = True
            thread.join(30)


def test_each_attack_succeeds_without_its_protection(agent: Agent) -> None:
    with in_process(agent.root, Protections()) as (url, token):
        port = url.rsplit(":", 1)[1].split("/")[0]
        good = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {token.value}"}
        assert post(url, {**good, "Host": f"evil.example:{port}"})[0] == 400
        assert post(url, {"Host": f"127.0.0.1:{port}"})[0] == 401
        assert post(url, {**good, "Origin": "http://evil.example"})[0] == 403
        assert post(url, good)[0] == 200
    with in_process(agent.root, Protections(host=False)) as (url, token):
        port = url.rsplit(":", 1)[1].split("/")[0]
        assert post(url, {"Host": f"evil.example:{port}",
                          "Authorization": f"Bearer {token.value}"})[0] == 200
    with in_process(agent.root, Protections(token=False)) as (url, _):
        port = url.rsplit(":", 1)[1].split("/")[0]
        assert post(url, {"Host": f"127.0.0.1:{port}"})[0] == 200
    with in_process(agent.root, Protections(origin=False, host=False)) as (url, token):
        port = url.rsplit(":", 1)[1].split("/")[0]
        assert post(url, {"Host": f"127.0.0.1:{port}", "Origin": "http://evil.example",
                          "Authorization": f"Bearer {token.value}"})[0] == 200


def test_only_loopback_is_served(agent: Agent) -> None:
    from tests.cli.helpers import refused as cli_refused

    cli_refused(agent.root, "MCP_ADDRESS", "mcp", AGENT, "--as", "notes", "--http",
                "--host", "0.0.0.0")
