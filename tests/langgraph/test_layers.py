"""rotifer.langgraph is a room of its own above memory/: rotifer runs without
LangGraph, and the adapter uses no layer but memory/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.layering import rotifer_imports

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "rotifer" / "langgraph"


def test_rotifer_itself_never_imports_langgraph() -> None:
    code = ("import sys, rotifer, rotifer.memory, rotifer.genes, rotifer.agents, "
            "rotifer.cli.main; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('langgraph', 'langchain_core') or m == 'rotifer.langgraph'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_the_adapter_uses_only_memory() -> None:
    ours = rotifer_imports(PACKAGE)
    assert ours and all(name.startswith("rotifer.memory") for name in ours), ours
