"""``agent move | export | import`` show progress on a terminal, and only there.

The commands run as real subprocesses with stderr on a real pseudo-terminal
(``pty``) or on a pipe.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from .helpers import clean_env, copy_spec, ok, rotifer_command
from .test_transfer_cli import WRITES, make_project


def on_terminal(cwd: Path, *args: str) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal: (exit status, stdout, what the terminal got)."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen([*rotifer_command(), *args], cwd=cwd, env=clean_env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=terminal)
        os.close(terminal)
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            seen += chunk
        out = proc.stdout.read() if proc.stdout else b""
        status = proc.wait(120)
    finally:
        os.close(controller)
    return status, out.decode(), seen.decode(errors="replace")


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "proj")
    ok(root, "agent", "create", "bot", "--genes", "memo", "--memory-quota", "4KB")
    ok(root, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES}))
    return root


def test_export_and_import_draw_a_bar_on_a_terminal(proj: Path, tmp_path: Path) -> None:
    file = tmp_path / "bot.json"
    status, out, terminal = on_terminal(proj, "agent", "export", "bot", str(file))
    assert status == 0, terminal
    assert "Exported agent 'bot'" in out
    assert "exporting [" in terminal and "100%" in terminal
    assert "3/3 entries" in terminal  # what it exports: not the CACHE entry left behind
    assert "4/4 entries" not in terminal and "/4 entries" not in terminal
    status, out, terminal = on_terminal(proj, "agent", "export", "bot",
                                        str(tmp_path / "all.json"), "--keep-cache")
    assert status == 0 and "4/4 entries" in terminal, terminal

    other = make_project(tmp_path / "other")
    copy_spec(proj, other)
    status, out, terminal = on_terminal(other, "agent", "import", str(file))
    assert status == 0, terminal
    assert "importing [" in terminal and "100%" in terminal and "3 entries" in terminal


def test_quiet_or_no_terminal_means_no_bar(proj: Path, tmp_path: Path) -> None:
    status, out, terminal = on_terminal(proj, "agent", "export", "bot",
                                        str(tmp_path / "a.json"), "--quiet")
    assert status == 0 and "Exported" in out
    assert "exporting" not in terminal and "[" not in terminal
    done = subprocess.run([*rotifer_command(), "agent", "export", "bot",
                           str(tmp_path / "b.json")], cwd=proj, env=clean_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stderr == ""


def test_move_draws_a_bar(proj: Path, tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'elsewhere.db'}"
    status, out, terminal = on_terminal(proj, "agent", "move", "bot", "--to", url)
    assert status == 0, terminal
    assert "Moved agent 'bot'" in out
    assert "moving [" in terminal and "100%" in terminal
    assert "3/3 entries" in terminal, terminal  # the CACHE entry stays behind


def test_audit_verify_and_show_draw_a_bar_on_a_terminal_only(proj: Path) -> None:
    """Issue 22 item 4: the log is read in passes, each with its bar on a terminal;
    stdout is the same, and a pipe or --quiet gets no bar."""
    status, out, terminal = on_terminal(proj, "agent", "audit", "verify", "bot", "--full")
    assert status == 0, terminal
    assert out.startswith("OK agent 'bot'")
    bars = [line for line in terminal.split("\n") if "verifying [" in line]
    assert len(bars) == 2 and all("100%" in bar for bar in bars)  # one per pass
    # Without --full, the agent's own lines by the history index: one pass.
    status, out, terminal = on_terminal(proj, "agent", "audit", "verify", "bot")
    assert status == 0 and out.startswith("OK agent 'bot'"), terminal
    bars = [line for line in terminal.split("\n") if "verifying [" in line]
    assert len(bars) == 1 and "100%" in bars[0], terminal
    status, out, terminal = on_terminal(proj, "agent", "audit", "show", "bot", "--limit", "1")
    assert status == 0 and "reading [" in terminal and len(out.splitlines()) == 2
    status, out, terminal = on_terminal(proj, "agent", "audit", "verify", "bot", "--quiet")
    assert status == 0 and "verifying" not in terminal
    piped = subprocess.run([*rotifer_command(), "agent", "audit", "verify", "bot"], cwd=proj,
                           env=clean_env(), capture_output=True, text=True, timeout=120,
                           check=False)
    assert piped.returncode == 0 and piped.stderr == ""
