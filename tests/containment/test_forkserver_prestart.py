"""The fork server started ahead (issue 33): a server no gene asked for a child
is killed at exit instead of waited for; one that served a run is stopped as
before.  And the console script's guess that a command's genes are all trusted
(so it starts no server): a guess that is unsure says no."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotifer.cli.entry import trusts_every_gene
from rotifer.genes.contain.forkserver import ForkServer, server
from rotifer.genes.contain.sandbox import CONTAINED
from rotifer.genes.execute import express
from rotifer.genes.gene import load_gene
from rotifer.memory import DeniedMemory
from tests.genes.helpers import write_gene


@pytest.fixture
def own_server() -> Iterator[ForkServer]:
    server().shutdown()
    yield server()
    server().shutdown()


def _proc(fork_server: ForkServer) -> subprocess.Popen[bytes]:
    proc = fork_server._proc
    assert proc is not None
    return proc


def test_a_server_never_asked_for_a_child_is_killed_at_exit(own_server: ForkServer) -> None:
    own_server.prestart()
    proc = _proc(own_server)
    own_server.shutdown()
    assert proc.returncode == -signal.SIGKILL
    assert own_server.pid is None


def test_a_server_that_ran_a_gene_is_stopped_not_killed(own_server: ForkServer,
                                                         tmp_path: Path) -> None:
    from rotifer.genes.contain.sandbox import missing

    if missing():
        pytest.skip(f"cannot contain here: {missing()}")
    write_gene(tmp_path / "genes", "echo", "def express(input, ctx):\n    return input\n")
    gene = load_gene(tmp_path / "genes", "echo")
    own_server.prestart()
    proc = _proc(own_server)
    denied = DeniedMemory("no memory here")
    assert express(gene, {"a": 1}, denied, cache_dir=tmp_path / "cache", agent=None,
                   grant=CONTAINED) == {"a": 1}
    own_server.shutdown()
    assert proc.returncode == 0  # it closed on its control socket's end, as before


def _project(tmp_path: Path, agent: dict[str, object]) -> Path:
    (tmp_path / ".rotifer" / "agents").mkdir(parents=True)
    (tmp_path / ".rotifer" / "agents" / "a.json").write_text(json.dumps(agent))
    return tmp_path


@pytest.mark.parametrize(("agent", "expected"), [
    ({"genes": ["g"], "containment": {"trust": ["g"]}}, True),
    ({"genes": ["g", "h"], "containment": {"trust": ["g", "h"]}}, True),
    ({"genes": ["g", "h"], "containment": {"trust": ["g"]}}, False),
    ({"genes": ["g"]}, False),
    ({"genes": [], "containment": {"trust": []}}, False),
    ({"genes": "g", "containment": {"trust": "g"}}, False),
    ({"genes": [["g"]], "containment": {"trust": [["g"]]}}, False),
])
def test_agent_run_is_all_trusted_only_when_its_file_trusts_every_gene(
        tmp_path: Path, agent: dict[str, object], expected: bool) -> None:
    root = _project(tmp_path, agent)
    assert trusts_every_gene(["--project", str(root), "agent", "run", "a"]) is expected
    assert trusts_every_gene([f"--project={root}", "agent", "run", "a", "--input", "{}"]) \
        is expected


def test_unsure_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, {"genes": ["g"], "containment": {"trust": ["g"]}})
    (root / ".rotifer" / "agents" / "broken.json").write_text("{not json")
    monkeypatch.delenv("ROTIFER_PROJECT", raising=False)
    assert trusts_every_gene(["--project", str(root), "agent", "run", "broken"]) is False
    assert trusts_every_gene(["--project", str(root), "agent", "run", "missing"]) is False
    assert trusts_every_gene(["--project", str(tmp_path / "nowhere"), "agent", "run", "a"]) \
        is False
    assert trusts_every_gene(["agent", "run", "--input", "{}"]) is False
    monkeypatch.chdir(root / ".rotifer" / "agents")  # found upward from a subfolder
    assert trusts_every_gene(["agent", "run", "a"]) is True
    monkeypatch.setenv("ROTIFER_PROJECT", str(root))
    assert trusts_every_gene(["agent", "run", "a"]) is True


@pytest.mark.parametrize(("argv", "expected"), [
    (["run", "g", "--trust", "--input", "{}"], True),
    (["test", "g", "--trust"], True),
    (["run", "g", "--input", "{}"], False),
    (["test", "g"], False),
    (["run", "g", "--", "--trust"], False),
    (["agent", "list"], False),
])
def test_run_and_test_are_all_trusted_with_their_trust_flag(argv: list[str],
                                                            expected: bool) -> None:
    assert trusts_every_gene(argv) is expected
