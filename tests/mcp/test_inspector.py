"""The MCP Inspector's CLI mode (``npx @modelcontextprotocol/inspector --cli``, pinned in
package.json and installed by ``make node-deps``) -- a client nobody here wrote --
lists the tools of ``rotifer mcp`` over stdio and calls one.  Offline: ``npx
--no-install`` with npm told it is offline, so nothing is downloaded at run time.
Skipped where node_modules has no inspector (CI installs it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import clean_env, rotifer_command

from .helpers import AGENT, audit, make_agent

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / "node_modules" / "@modelcontextprotocol" / "inspector"

pytestmark = pytest.mark.skipif(
    not INSPECTOR.is_dir() or shutil.which("npx") is None,
    reason="the MCP Inspector is not installed (make node-deps)")


def inspector(tmp_path: Path, root: Path, *args: str) -> dict[str, object]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = clean_env({"HOME": str(home), "npm_config_offline": "true",
                     "npm_config_update_notifier": "false"})
    done = subprocess.run(
        ["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli",
         *rotifer_command(), "--project", str(root), "mcp", AGENT, "--as", "notes", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, (done.stdout, done.stderr)
    answer = json.loads(done.stdout)
    assert isinstance(answer, dict)
    return answer


def test_the_inspector_lists_the_tools_and_calls_one(tmp_path: Path) -> None:
    root = make_agent(tmp_path).root
    listed = inspector(tmp_path, root, "--method", "tools/list")
    tools = listed["tools"]
    assert isinstance(tools, list)
    assert sorted(t["name"] for t in tools) == ["memory_delete", "memory_read",
                                                "memory_search", "memory_usage",
                                                "memory_write"]
    called = inspector(tmp_path, root, "--method", "tools/call", "--tool-name", "memory_write",
                       "--tool-arg", "key=from/inspector", "value=hi")
    assert called.get("isError") in (None, False), called
    assert [(line["key"], line["via"]) for line in audit(root)
            if line["action"] == "write"] == [("from/inspector", "mcp")]
