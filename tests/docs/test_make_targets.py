"""``make bench-quick`` must not rewrite the tracked docs/benchmarks.md (issue
36): its short run goes to an untracked file.  Read with ``make -n`` (what it
would run), since the run itself takes minutes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_bench_quick_writes_an_untracked_copy() -> None:
    plan = subprocess.run(["make", "-n", "bench-quick"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout
    bench = [line for line in plan.splitlines() if " -m bench " in line + " "]
    assert bench and all("--out bench/results/" in line for line in bench), plan
    assert "bench/results/" in (REPO / ".gitignore").read_text()
