"""A project with one agent of two genes in one domain, and MCP clients for ``rotifer mcp``."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from tests.audit_reading import project_audit as audit  # noqa: F401 - its tests import it from here
from tests.cli.helpers import add_gene, clean_env, init_project, ok, rotifer_command, wrap

GENE = "def express(input, ctx):\n    return input\n"
AGENT = "bot"


@dataclass
class Agent:
    root: Path
    ids: dict[str, str]


def make_agent(tmp_path: Path, quota: str = "4KB", url: str | None = None) -> Agent:
    """The project: genes notes and planner in the agent, outsider not; ``url`` the
    memory store (``.rotifer/config.json``'s memoryUrl), else the SQLite file."""
    root = init_project(tmp_path / "proj")
    if url is not None:
        (root / ".rotifer" / "config.json").write_text(json.dumps({"memoryUrl": url}))
    ids = {}
    for name in ("notes", "planner"):
        add_gene(root, name, GENE + f"# {name}\n", domain="assistant")
        ids[name] = wrap(root, name)
    add_gene(root, "outsider", GENE + "# outsider\n", domain="assistant")
    ids["outsider"] = wrap(root, "outsider")
    ok(root, "agent", "create", AGENT, "--genes", "notes,planner", "--memory-quota", quota)
    return Agent(root, ids)


def server_params(root: Path, *args: str) -> StdioServerParameters:
    command = rotifer_command()
    return StdioServerParameters(command=command[0],
                                 args=[*command[1:], "--project", str(root), "mcp", *args],
                                 env=clean_env(), cwd=str(root))


@asynccontextmanager
async def stdio(root: Path, *args: str) -> AsyncIterator[Client]:
    """The SDK's own client, talking to a real ``rotifer mcp`` subprocess over stdio."""
    async with Client(server_params(root, *args), cache=None) as client:
        yield client


@dataclass
class Answer:
    error: bool
    body: dict[str, Any]
    text: str


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> Answer:
    result = await client.call_tool(tool, args or {})
    text = "".join(getattr(c, "text", "") for c in result.content)
    body = result.structured_content or {}
    return Answer(bool(result.is_error), body, text)


def refused(answer: Answer, code: str) -> str:
    assert answer.error, answer
    assert answer.text.startswith(f"{code}: "), answer.text
    assert answer.body["error"]["code"] == code
    return answer.text


URL_LINE = re.compile(r"^URL: (http://\S+)$", re.MULTILINE)
TOKEN_LINE = re.compile(r"^Token: (\S+)$", re.MULTILINE)


@dataclass
class HttpServer:
    process: subprocess.Popen[str]
    url: str
    token: str


def start_http(root: Path, *args: str) -> HttpServer:
    """``rotifer mcp ... --http --port 0``: its URL and token from the lines it prints."""
    process = subprocess.Popen(
        [*rotifer_command(), "--project", str(root), "mcp", *args, "--http", "--port", "0"],
        cwd=root, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    seen = ""
    while True:
        line = process.stdout.readline()
        if not line:
            err = process.stderr.read() if process.stderr else ""
            raise AssertionError(f"rotifer mcp --http ended: {seen}{err}")
        seen += line
        if line.startswith("Token: "):
            break
    url, token = URL_LINE.search(seen), TOKEN_LINE.search(seen)
    assert url and token, seen
    return HttpServer(process, url.group(1), token.group(1))


def stop(server: HttpServer) -> str:
    """SIGTERM; what the server wrote on stderr."""
    server.process.terminate()
    try:
        _, err = server.process.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover
        os.kill(server.process.pid, 9)
        _, err = server.process.communicate()
    return err
