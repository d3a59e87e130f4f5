"""``make demo`` runs examples/formatter/demo.sh; run it here, for real, so the
front door cannot break without a failing test, and the README's account of
what it prints cannot drift from what it prints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audit_reading import project_audit

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "formatter" / "demo.sh"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The demo project, and the finished ``demo.sh`` that made it (run once)."""
    project = tmp_path_factory.mktemp("demo") / "demo"
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROTIFER_PROJECT", "ROTIFER_MEMORY_URL")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["DEMO_DIR"] = str(project)
    done = subprocess.run(["bash", str(DEMO)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    return project, done


def test_demo_runs_the_formatter_example_end_to_end(
        demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    project, done = demo
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo: ok" in done.stdout
    assert "Traceback" not in done.stderr

    # The memory the demo leaves: one PREFERENCE written by the first formatter,
    # read (not rewritten) by the better one after the swap.
    fmt = [line for line in project_audit(project) if line["agent"] == "fmt"]
    assert [(line["action"], line["key"]) for line in fmt] == [("write", "formatter/indent")]
    spec = json.loads((project / ".rotifer" / "agents" / "fmt.json").read_text())
    assert spec["genes"] == ["better-formatter"]


def readme_audit_table() -> list[tuple[str, str, str | None]]:
    """The README's table of the lines the demo's audit log holds: (agent, action, key)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("| agent | action | key |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        agent, action, key = (cell.strip().strip("`") for cell in line.split("|")[1:4])
        rows.append((agent, action, key or None))
    return rows


def test_the_readme_says_what_the_demo_audits(
        demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    project, done = demo
    assert done.returncode == 0, done.stdout + done.stderr
    lines = project_audit(project)
    table = readme_audit_table()
    assert len(table) == len(lines), (table, lines)
    for (agent, action, key), line in zip(table, lines, strict=True):
        if agent.endswith("…"):
            assert line["agent"].startswith(agent[:-1]), (agent, line)
        else:
            assert line["agent"] == agent, (agent, line)
        assert (line["action"], line["key"]) == (action, key), line
    # The README counts them too.
    count = {2: "two", 3: "three", 4: "four"}[len(lines)]
    assert re.search(rf"\b{count} JSON lines\b", (ROOT / "README.md").read_text())
    # And the demo prints exactly those lines.
    printed = done.stdout.split("# What was recorded (.rotifer/audit.jsonl):\n", 1)[1]
    assert [json.loads(x) for x in printed.splitlines() if x.startswith("{")] == lines


def run_demo(project: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROTIFER_PROJECT", "ROTIFER_MEMORY_URL")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["DEMO_DIR"] = str(project)
    return subprocess.run(["bash", str(DEMO)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_demo_reruns_in_the_same_dir_and_ends_with_typescript_advice(
        demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """Issue 36: DEMO_DIR=... make demo a second time starts afresh (no
    AGENT_EXISTS); piped, it prints no escape codes; its last line says how
    TypeScript genes get their compiler; every command it shows can be pasted."""
    project, first = demo
    assert first.returncode == 0, first.stdout + first.stderr
    again = run_demo(project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "starting" in again.stdout and "afresh" in again.stdout
    assert len([x for x in project_audit(project) if x["agent"] == "fmt"]) == 1
    assert "\x1b" not in again.stdout + again.stderr
    assert "TypeScript" in again.stdout.strip().splitlines()[-1]
    shown = [line[2:] for line in again.stdout.splitlines() if line.startswith("$ rotifer agent run")]
    assert shown and all("--input '{" in line for line in shown), shown


def test_demo_leaves_a_folder_that_holds_another_project_alone(tmp_path: Path) -> None:
    project = tmp_path / "mine"
    project.mkdir()
    (project / ".rotifer").mkdir()
    (project / ".rotifer" / "keep").write_text("x")
    done = run_demo(project)
    assert done.returncode == 1 and "already holds a rotifer project" in done.stderr
    assert (project / ".rotifer" / "keep").exists()


@pytest.mark.parametrize("script", ["formatter/demo.sh", "langgraph/demo.sh"])
def test_demo_steps_print_a_command_that_pastes(script: str) -> None:
    """The line a demo prints before a step, pasted into a shell, runs the
    same words (JSON with quotes and spaces, a quote inside); piped, no escapes."""
    text = (ROOT / "examples" / script).read_text()
    start = text.index("if [ -t 1 ]") if "shown()" in text else text.index("step()")
    end = text.index("\n", text.index("step()"))
    word = '{"user": "it\'s me", "n": [1, 2]}'
    probe = text[start:end] + "\nstep printf '%s|' rotifer --input \"$1\"\n"
    done = subprocess.run(["bash", "-c", probe, "demo", word], capture_output=True,
                          text=True, check=True)
    assert "\x1b" not in done.stdout
    shown_line = next(x for x in done.stdout.splitlines() if x.startswith("$ "))[2:]
    again = subprocess.run(["bash", "-c", shown_line], capture_output=True, text=True,
                           check=True)
    assert again.stdout == f"rotifer|--input|{word}|"
