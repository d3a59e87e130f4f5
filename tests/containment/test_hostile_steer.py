"""The hostile-gene suite, what a gene could do to rotifer's processes and
beyond its grant (issue 30, findings 4, 5 and 10).

- Steering the fork server: a contained gene lowers the server's open-file
  limit, renices it and pins it to one CPU: each refused (EPERM), and the next
  gene of the same process runs as before.  Trusted (inside this process) the
  same calls succeed, and the next contained gene then cannot start.
- Orphans: ``rotifer agent run`` is SIGKILLed while its gene spins; no process
  of the gene is left (a Python gene's dies with the fork server, itself ended
  when rotifer's end of its socket closes; a Node gene's by its parent-death
  signal).  A trusted Node gene, started without one, outlives rotifer.
- ``--allow-tcp``: a gene granted one port may connect to it, but an MPTCP
  socket (whose subflows Landlock's port rules do not see) and ``listen()``
  without ``bind()`` (which serves on an ephemeral port on every address) are
  refused; trusted, both work.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rotifer.genes.contain.forkserver import server
from rotifer.genes.contain.sandbox import CONTAINED, Grant
from rotifer.genes.errors import GeneFailed, GeneUnavailable
from rotifer.genes.execute import express
from rotifer.memory import DeniedMemory
from tests.cli.helpers import add_gene, init_project, ok_process, rotifer_command, run_process, wrap
from tests.containment.test_forkserver import ECHO, fresh_server, gene  # noqa: F401
from tests.containment.test_hostile_process import SPIN, processes_in

STEER = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)

class Limit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_ulong), ("max", ctypes.c_ulong)]

def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return "refused " + os.strerror(e.errno)

def prlimit(pid):
    if libc.prlimit(pid, 7, ctypes.byref(Limit(3, 3)), None) != 0:
        raise OSError(ctypes.get_errno(), "prlimit")

def express(input, ctx):
    pid = input["server"]
    return {"limit": attempt(lambda: prlimit(pid)),
            "renice": attempt(lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
            "pin": attempt(lambda: os.sched_setaffinity(pid, {0}))}
'''


def limits(pid: int) -> tuple[str, int, str]:
    """The server's open-file limit line, niceness and allowed CPUs."""
    text = Path(f"/proc/{pid}/limits").read_text()
    files = next(line for line in text.splitlines() if line.startswith("Max open files"))
    nice = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    cpus = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("Cpus_allowed_list"))
    return files, nice, cpus


@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_a_gene_cannot_steer_the_fork_server(tmp_path: Path, fresh_server: None,  # noqa: F811
                                             trust: bool) -> None:
    echo = gene(tmp_path, "echo", ECHO)
    steer = gene(tmp_path, "steer", STEER)
    assert express(echo, 1, DeniedMemory(), grant=CONTAINED)[0] == 1
    pid = server().pid
    assert pid is not None
    before = limits(pid)
    out = express(steer, {"server": pid}, DeniedMemory(), grant=Grant(trusted=trust))
    if trust:
        assert out == {"limit": "ok", "renice": "ok", "pin": "ok"}
        assert limits(pid) != before
        with pytest.raises((GeneUnavailable, GeneFailed)):  # the server cannot take the pipes
            express(echo, 2, DeniedMemory(), grant=CONTAINED)
        return
    assert set(out.values()) == {"refused Operation not permitted"}, out
    assert limits(pid) == before
    assert express(echo, 2, DeniedMemory(), grant=CONTAINED)[0] == 2
    assert server().pid == pid  # the same server served it


def eventually(check: Callable[[], bool], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return check()


def spinning(folder: Path) -> bool:
    """A process of the gene has spent half a second of CPU: it runs the gene
    (a Node process that has not had its start message would exit at
    rotifer's end on its own)."""
    for pid in processes_in(folder):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[11]) + int(fields[12]) >= os.sysconf("SC_CLK_TCK") // 2:
            return True
    return False


@pytest.mark.parametrize(("kind", "trust"), [("python", False), ("node", False),
                                             ("node", True)],
                         ids=["contained-python", "contained-node", "trusted-node"])
def test_nothing_outlives_a_killed_rotifer(tmp_path: Path, kind: str, trust: bool) -> None:
    if kind == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    root = init_project(tmp_path / "proj")
    file, code = SPIN[kind]
    add_gene(root, "spin", code, file=file)
    wrap(root, "spin")
    ok_process(root, "agent", "create", "a", "--genes", "spin", *(["--trust", "spin"] if trust else []))
    folder = (root / "genes" / "spin").resolve()
    proc = subprocess.Popen([*rotifer_command(), "agent", "run", "a", "--input", "null"],
                            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert eventually(lambda: spinning(folder), 60), "the gene never started spinning"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        gone = eventually(lambda: not processes_in(folder), 10)
        if trust:
            assert not gone, "a trusted Node gene has no parent-death signal: it outlives"
        else:
            assert gone, processes_in(folder)
    finally:
        proc.kill()
        proc.wait()
        for pid in processes_in(folder):
            os.kill(pid, signal.SIGKILL)


TCP_PY = r'''
import socket

def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return "refused " + type(e).__name__

def connect(port, proto=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    try:
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
    finally:
        s.close()

def listen():
    s = socket.socket()
    try:
        s.listen()
        assert s.getsockname()[1] > 0
    finally:
        s.close()

def express(input, ctx):
    return {"granted port": attempt(lambda: connect(input["granted"])),
            "mptcp to another port": attempt(lambda: connect(input["other"], 262)),
            "listen without bind": attempt(listen)}
'''

TCP_NODE = r'''
const net = require("net");
exports.express = (input) => new Promise((resolve) => {
  const s = net.createServer();
  s.on("error", (e) => resolve({"listen without bind": "refused " + (e.code || e.name)}));
  s.listen(0, () => { s.close(); resolve({"listen without bind": "ok"}); });
});
'''


@pytest.mark.parametrize("kind", ["python", "node"])
@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_allow_tcp_grants_a_port_and_nothing_more(tmp_path: Path, kind: str,
                                                  trust: bool) -> None:
    if kind == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262).close()
    except OSError:
        pytest.skip("this kernel has no MPTCP: nothing to refuse")
    root = init_project(tmp_path / "proj")
    add_gene(root, "net", TCP_PY if kind == "python" else TCP_NODE,
             file="gene.py" if kind == "python" else "index.js")
    wrap(root, "net")
    with socket.create_server(("127.0.0.1", 0)) as granted, \
            socket.create_server(("127.0.0.1", 0)) as other:
        port = granted.getsockname()[1]
        ok_process(root, "agent", "create", "a", "--genes", "net", "--allow-tcp", f"net:{port}",
                   *(["--trust", "net"] if trust else []))
        done = run_process(root, "agent", "run", "a", "--input",
                           json.dumps({"granted": port, "other": other.getsockname()[1]}))
    assert done.returncode == 0, done
    report: dict[str, str] = json.loads(done.stdout)
    if trust:
        assert set(report.values()) == {"ok"}, report
        return
    assert report.pop("granted port", "ok") == "ok"
    assert [a for a, r in report.items() if r == "ok"] == [], report
