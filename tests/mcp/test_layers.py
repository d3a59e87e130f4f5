"""rotifer.mcp is a room on top of memory/: rotifer runs without the MCP SDK, the
command imports it only when it runs, and the room never reaches into cli/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.layering import rotifer_imports

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "rotifer" / "mcp"


def test_rotifer_and_its_help_never_import_the_sdk() -> None:
    code = ("import sys, rotifer, rotifer.memory, rotifer.genes, rotifer.agents, "
            "rotifer.cli.main, rotifer.langgraph\n"
            "from click.testing import CliRunner\n"
            "from rotifer.cli.main import cli\n"
            "assert CliRunner().invoke(cli, ['--help']).exit_code == 0\n"
            "assert CliRunner().invoke(cli, ['mcp', '--help']).exit_code == 0\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types') "
            "or m.startswith('rotifer.mcp')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_the_room_uses_memory_genes_and_agents_but_not_the_cli() -> None:
    ours = rotifer_imports(PACKAGE)
    assert ours
    assert all(name.split(".")[1] in ("memory", "genes", "agents") for name in ours), ours
