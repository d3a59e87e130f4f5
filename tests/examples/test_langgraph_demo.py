"""examples/langgraph/demo.sh, run for real: a LangGraph graph keeps a user's
preferences in an agent's memory across two processes, and rotifer's commands
list and audit what it did."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("langgraph.graph")

from tests.audit_reading import project_audit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "langgraph"


def _env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROTIFER_PROJECT", "ROTIFER_MEMORY_URL")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHON"] = sys.executable
    env["DEMO_DIR"] = str(project)
    return env


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    project = tmp_path_factory.mktemp("lg") / "demo"
    done = subprocess.run(["bash", str(EXAMPLE / "demo.sh")], env=_env(project),
                          capture_output=True, text=True, timeout=300, check=False)
    return project, done


def test_the_graph_remembers_across_runs_and_rotifer_sees_it(
        demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    project, done = demo
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo: ok" in done.stdout and "Traceback" not in done.stderr
    # the gene read what the graph wrote
    assert '{"user": "alice", "preferences": {"lang": "fr", "theme": "dark"}}' in done.stdout
    assert "langgraph/users/alice/preferences  PREFERENCE" in done.stdout
    assert "OK agent 'assistant'" in done.stdout
    lines = project_audit(project)
    assert [(line["action"], line["key"], line["category"]) for line in lines] == [
        ("write", "langgraph/users/alice/preferences", "PREFERENCE"),
        ("write", "langgraph/replies/alice/last", "CACHE"),
        ("update", "langgraph/replies/alice/last", "CACHE"),  # the second run's reply
    ]
    assert len({line["actor"] for line in lines}) == 1


def _graph_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("langgraph_example_graph", EXAMPLE / "graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # LangGraph resolves State's annotations through it
    spec.loader.exec_module(module)
    return module


def test_refusals_are_one_line_errors(demo: tuple[Path, subprocess.CompletedProcess[str]],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """In-process (the example's main()), so no second interpreter pays LangGraph's import."""
    project, done = demo
    assert done.returncode == 0
    graph = _graph_module()
    base = ["--project", str(project), "--user", "alice"]
    assert graph.main([*base, "--agent", "nobody", "--gene", "prefs"]) == 1
    assert capsys.readouterr().err.startswith("AGENT_NOT_FOUND:")
    gene = project / "genes" / "prefs" / "gene.py"
    original = gene.read_text()
    try:
        gene.write_text(original + "\n# changed\n")
        assert graph.main([*base, "--agent", "assistant", "--gene", "prefs",
                           "--set", "theme=x"]) == 1
    finally:
        gene.write_text(original)
    assert capsys.readouterr().err.startswith("MEMORY_ACCESS_DENIED: gene 'prefs' is not wrapped")
    assert graph.main([*base, "--agent", "assistant", "--gene", "prefs"]) == 0
    assert json.loads(capsys.readouterr().out)["preferences"] == {"lang": "fr", "theme": "dark"}
