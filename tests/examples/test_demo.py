"""``make demo`` runs examples/formatter/demo.sh; run it here, for real, so the
front door cannot break without a failing test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "examples" / "formatter" / "demo.sh"


def test_demo_runs_the_formatter_example_end_to_end(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROTIFER_PROJECT", "ROTIFER_MEMORY_URL")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["DEMO_DIR"] = str(tmp_path / "demo")
    done = subprocess.run(["bash", str(DEMO)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo: ok" in done.stdout
    assert "Traceback" not in done.stderr

    # The memory the demo leaves: one PREFERENCE written by the first formatter,
    # read (not rewritten) by the better one after the swap.
    lines = [json.loads(line) for line in
             (tmp_path / "demo" / ".rotifer" / "audit.jsonl").read_text().splitlines()]
    fmt = [line for line in lines if line["agent"] == "fmt"]
    assert [(line["action"], line["key"]) for line in fmt] == [("write", "formatter/indent")]
    spec = json.loads((tmp_path / "demo" / ".rotifer" / "agents" / "fmt.json").read_text())
    assert spec["genes"] == ["better-formatter"]
