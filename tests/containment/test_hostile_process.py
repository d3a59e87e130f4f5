"""The hostile-gene suite, the process part: ptrace, and a gene that spins
past its deadline.

ptrace: a contained Python gene calls ``ptrace(PTRACE_ATTACH)`` through ctypes
on its parent (the ``rotifer`` process serving it) and on a harmless
``sleep`` the test started: both refused.  The bite, with ``--trust``, attaches
to the sleeper only: a trusted Python gene runs inside the ``rotifer`` process,
whose parent is this pytest process -- stopping the test runner would hang the
test, and attaching to one's own process is refused by the kernel whatever the
containment -- while the sleeper is another process of the same user the test
owns and kills afterwards (the attach stops it; the gene detaches at once).

Spinning: a Python and a Node gene that never return end with GENE_FAILED
naming the deadline, and no process of theirs is left (no process has the
gene's folder as its working directory, where both are started), though each
also started a thread that waits forever.  A short deadline through
:func:`~rotifer.genes.execute.express` keeps ``make test`` quick; the same through ``rotifer agent run`` (its fixed 10 s deadline) is
marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotifer.genes.contain.sandbox import CONTAINED
from rotifer.genes.errors import GeneFailed
from rotifer.genes.execute import express
from rotifer.genes.gene import load_gene, register_gene
from rotifer.genes.registry import Registry
from rotifer.memory import DeniedMemory
from tests.cli.helpers import (
    add_gene,
    init_project,
    last_line,
    ok_process,
    refused_process,
    run_process,
    wrap,
)

PTRACER = r'''
import ctypes, errno, os

PTRACE_ATTACH, PTRACE_DETACH, WALL = 16, 17, 0x40000000

def attach(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    no = ctypes.c_void_p(0)
    if libc.ptrace(ctypes.c_long(PTRACE_ATTACH), ctypes.c_long(pid), no, no) != 0:
        return "refused " + errno.errorcode.get(ctypes.get_errno(), "?")
    os.waitpid(pid, WALL)
    libc.ptrace(ctypes.c_long(PTRACE_DETACH), ctypes.c_long(pid), no, no)
    return "ok"

def express(input, ctx):
    out = {"sleeper": attach(input["sleeper"])}
    if input.get("parent"):
        out["parent"] = attach(os.getppid())
    return out
'''


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A harmless process of this user for a trusted gene to attach to."""
    proc = subprocess.Popen(["sleep", "600"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_ptrace_is_refused_unless_trusted(tmp_path: Path, sleeper: int, trust: bool) -> None:
    root = init_project(tmp_path / "proj")
    add_gene(root, "tracer", PTRACER, domain="other")
    wrap(root, "tracer")
    ok_process(root, "agent", "create", "a", "--genes", "tracer",
               *(["--trust", "tracer"] if trust else []))
    value = json.dumps({"sleeper": sleeper, "parent": not trust})
    done = run_process(root, "agent", "run", "a", "--input", value)
    assert done.returncode == 0, done
    report = json.loads(done.stdout)
    if trust:
        assert report == {"sleeper": "ok"}, report
        return
    # seccomp answers EPERM before Landlock's own ptrace scoping is asked.
    assert report == {"sleeper": "refused EPERM", "parent": "refused EPERM"}, report
    ok_process(root, "agent", "audit", "verify", "a")


SPIN = {
    "python": ("gene.py", "import threading\n"
               "def express(input, ctx):\n"
               "    threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
               "    print('spinning', flush=True)\n"
               "    while True:\n        pass\n"),
    "node": ("index.js", "const { Worker } = require('worker_threads');\n"
             "exports.express = () => {\n"
             "  new Worker('Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)',"
             " { eval: true });\n"
             "  console.log('spinning');\n  while (true) {}\n};\n"),
}


def processes_in(folder: Path) -> list[int]:
    """The processes whose working directory is ``folder`` (a contained gene's is its own)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd") == str(folder):
                    found.append(int(entry))
            except OSError:  # gone meanwhile, or not ours to read
                pass
    return found


@pytest.mark.parametrize("kind", ["python", "node"])
def test_a_spinning_gene_is_killed_at_its_deadline_and_leaves_nothing(
        tmp_path: Path, kind: str) -> None:
    if kind == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    file, code = SPIN[kind]
    add_gene(tmp_path, "spin", code, file=file)
    registry = Registry(tmp_path / ".rotifer")
    gene = register_gene(load_gene(tmp_path / "genes", "spin", registry), registry, via="wrap")
    folder = gene.path.resolve()
    seen: list[list[int]] = []

    def sink(name: str, line: str) -> None:  # called while the gene spins
        if line == "spinning":
            seen.append(processes_in(folder))

    with pytest.raises(GeneFailed, match=r"spin.*(deadline|timed out)"):
        express(gene, None, DeniedMemory(), deadline_s=3.0, log_sink=sink, grant=CONTAINED)
    # The scan finds the running gene (so it can see one left behind) ...
    assert seen and seen[0], seen
    # ... and once the run has ended, nothing of it is left.
    assert processes_in(folder) == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["python", "node"])
def test_a_spinning_gene_through_agent_run_is_gene_failed(tmp_path: Path, kind: str) -> None:
    if kind == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    root = init_project(tmp_path / "proj")
    file, code = SPIN[kind]
    add_gene(root, "spin", code, file=file)
    wrap(root, "spin")
    ok_process(root, "agent", "create", "a", "--genes", "spin")
    line = last_line(refused_process(root, "GENE_FAILED", "agent", "run", "a", "--input", "null"))
    assert "gene 'spin'" in line and ("deadline" in line or "timed out" in line), line
    assert processes_in((root / "genes" / "spin").resolve()) == []
    ok_process(root, "agent", "audit", "verify", "a")
