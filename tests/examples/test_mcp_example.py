"""examples/mcp/: the configurations a user pastes start a server that answers (each
one's command, args and env, run for real against a project made as the README
says), and demo.sh prints the transcript the README shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

from tests.cli.helpers import ok
from tests.mcp.helpers import make_agent

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mcp"
CONFIGS = ["claude_desktop_config.json", "claude_code_mcp.json", "cursor_mcp.json"]


@pytest.mark.parametrize("name", CONFIGS)
def test_each_pasted_configuration_starts_a_server(name: str, tmp_path: Path) -> None:
    server = json.loads((EXAMPLE / name).read_text())["mcpServers"]["rotifer-memory"]
    assert Path(server["command"]).name == "rotifer"
    root = make_agent(tmp_path).root  # its genes notes and planner, as the README's
    ok(root, "agent", "create", "assistant", "--genes", "notes,planner")
    env = {k: v for k, v in os.environ.items() if k not in ("ROTIFER_PROJECT",
                                                          "ROTIFER_MEMORY_URL")}
    env.update({**server["env"], "ROTIFER_PROJECT": str(root), "ROTIFER_TELEMETRY": "0"})
    command = str(Path(sys.executable).with_name("rotifer"))  # the user's absolute path

    async def session() -> list[str]:
        params = StdioServerParameters(command=command, args=server["args"], env=env)
        async with Client(params, cache=None) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert "memory_search" in anyio.run(session)


def test_the_demo_prints_the_readme_transcript() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ROTIFER_PROJECT",
                                                          "ROTIFER_MEMORY_URL")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["ROTIFER_TELEMETRY"] = "0"
    done = subprocess.run(["bash", str(EXAMPLE / "demo.sh")], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    readme = (EXAMPLE / "README.md").read_text()
    shown = readme.split("```text\n", 1)[1].split("```", 1)[0]
    printed = done.stdout
    for line in shown.splitlines():
        assert line in printed, line
    assert re.search(r'"action": "write", "key": "notes/meeting".*"via": "mcp"', printed)
