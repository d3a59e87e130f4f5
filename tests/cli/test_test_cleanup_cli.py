"""``rotifer test`` never leaves its temporary memory behind: a run stopped
by SIGTERM, SIGHUP or SIGINT drops it before it exits, and the memory of a run
killed outright (SIGKILL) is removed by the next ``rotifer test`` -- but never
the memory of a run that is still going.  Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rotifer.memory import MemoryStore

from .helpers import (
    add_gene,
    audit,
    clean_env,
    init_project,
    last_line,
    ok,
    rotifer_command,
    run,
    store_agents,
    wrap,
)

#: Writes to its memory, says it started, then waits until the test releases
#: it.  It switches off its own run deadline, so that only the test decides
#: when it ends however slow the machine is.
BLOCKER = '''
import os, signal, time
def express(input, ctx):
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)
    ctx.memory.write_memory("blocker/seen", b"1", "CACHE")
    open(input["started"], "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(input["release"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"released": os.path.exists(input["release"])}
'''
QUICK = '''
def express(input, ctx):
    ctx.memory.write_memory("quick/x", b"1", "CACHE")
    return {"ok": True}
'''


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = init_project(tmp_path / "proj")
    add_gene(root, "blocker", BLOCKER, domain="blocker")
    add_gene(root, "quick", QUICK, domain="quick")
    (root / "genes" / "quick" / "tests.json").write_text(json.dumps(
        [{"input": {}, "expect": {"ok": True}}]))
    wrap(root, "blocker")
    wrap(root, "quick")
    return root


def test_memories(root: Path) -> list[str]:
    return [a for a in store_agents(root) if a.startswith("rotifer-test:")]


test_memories.__test__ = False  # type: ignore[attr-defined]


def start_blocked(root: Path, tag: str) -> tuple[subprocess.Popen[str], Path]:
    """Start ``rotifer test blocker`` and wait until its gene runs; the process
    and the file that releases it."""
    started, release = root.parent / f"{tag}.started", root.parent / f"{tag}.release"
    (root / "genes" / "blocker" / "tests.json").write_text(json.dumps(
        [{"input": {"started": str(started), "release": str(release)},
          "expect": {"released": True}}]))
    # --trust: the blocker signals through files outside its folder, which a
    # contained gene cannot write.
    proc = subprocess.Popen([*rotifer_command(), "test", "--trust", "blocker"], cwd=root,
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 120
    while not started.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate()
            raise AssertionError(f"the blocker never started: {proc.returncode} {out} {err}")
        time.sleep(0.02)
    return proc, release


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129),
                                             (signal.SIGINT, 130)])
def test_a_stopped_run_drops_its_memory(proj: Path, sig: signal.Signals, status: int) -> None:
    proc, _ = start_blocked(proj, "a")
    [memory] = test_memories(proj)
    assert memory.startswith("rotifer-test:blocker:")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, (out, err)
    assert "Traceback" not in err
    assert last_line(err).startswith("INTERRUPTED: ")
    assert test_memories(proj) == []
    assert ("drop_agent", memory) in [(line["action"], line["agent"]) for line in audit(proj)]


def test_the_memory_of_a_killed_run_goes_at_the_next_test(proj: Path) -> None:
    proc, _ = start_blocked(proj, "a")
    [memory] = test_memories(proj)
    proc.kill()
    proc.communicate(timeout=120)
    assert test_memories(proj) == [memory]  # SIGKILL: nothing could run
    done = run(proj, "test", "quick")
    assert done.returncode == 0, done
    assert test_memories(proj) == []
    assert "removed 1 temporary test memory" in done.stderr
    drops = [line for line in audit(proj) if line["action"] == "drop_agent"]
    assert memory in [line["agent"] for line in drops]


def test_a_concurrent_run_keeps_its_memory(proj: Path) -> None:
    proc, release = start_blocked(proj, "a")
    [memory] = test_memories(proj)
    try:
        done = run(proj, "test", "quick")
        assert done.returncode == 0, done
        assert "removed" not in done.stderr
        assert proc.poll() is None  # still waiting, and its memory still there
        assert test_memories(proj) == [memory]
    finally:
        release.touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out, err)
    assert test_memories(proj) == []


def test_only_memories_of_dead_owners_are_removed(proj: Path) -> None:
    from rotifer.agents.scratch import current_owner

    me = current_owner()  # this pytest process: alive
    host, boot, pid, start = str(me).split("/")
    if start == "-":
        pytest.skip("no /proc: only the process id can be checked")
    other_boot = "0" * 8 if boot != "0" * 8 else "1" * 8
    alive = f"rotifer-test:g:{me}:{'a' * 32}"
    reused = f"rotifer-test:g:{host}/{boot}/{pid}/{int(start) + 1}:{'b' * 32}"
    rebooted = f"rotifer-test:g:{host}/{other_boot}/{pid}/{start}:{'c' * 32}"
    other_host = f"rotifer-test:g:elsewhere.example/{boot}/1/1:{'d' * 32}"
    older_form = f"rotifer-test:g:{'e' * 32}"
    gone_pid = _a_free_pid()
    gone = f"rotifer-test:g:{host}/{boot}/{gone_pid}/{start}:{'f' * 32}"
    with MemoryStore.open(proj / ".rotifer") as store:
        for agent in (alive, reused, rebooted, other_host, older_form, gone):
            store.create_agent(agent)
    done = run(proj, "test", "quick")
    assert done.returncode == 0, done
    assert sorted(test_memories(proj)) == sorted([alive, other_host, older_form])
    assert "removed 3 temporary test memories" in done.stderr


def _a_free_pid() -> int:
    """The id of a process that has exited (and been reaped): none has it now."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    while True:  # not reused yet? (it could be, in principle, by the time we look)
        try:
            os.kill(proc.pid, 0)
        except ProcessLookupError:
            return proc.pid
        proc = subprocess.Popen(["true"])
        proc.wait()


def test_a_test_run_without_failures_leaves_nothing(proj: Path) -> None:
    ok(proj, "test", "quick")
    assert test_memories(proj) == []
