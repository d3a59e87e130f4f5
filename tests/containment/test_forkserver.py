"""The Python fork server (rotifer.genes.contain.zygote and .forkserver): what
the forked gene process holds (looked at from outside, in /proc, while the
gene runs), that it cannot reach the server or rotifer, that the server holds
nothing of the store, that it is restarted when it died, that a server that
cannot start is a clear GENE_UNAVAILABLE, and that runs from threads each get
their own process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rotifer.genes.contain.forkserver import server
from rotifer.genes.contain.sandbox import CONTAINED, Grant
from rotifer.genes.errors import GeneFailed, GeneUnavailable
from rotifer.genes.execute import express
from rotifer.genes.gene import Gene, load_gene
from rotifer.memory import DeniedMemory, MemoryStore
from tests.containment.test_hostile_process import processes_in
from tests.genes.helpers import write_gene

SECRETS = {"PGPASSWORD": "hunter2", "AWS_SECRET_ACCESS_KEY": "hunter2"}


@pytest.fixture
def fresh_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A server started by this test, with secrets in this process's
    environment (as a deployer's would be); stopped afterwards."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    server().shutdown()
    yield
    server().shutdown()


def gene(tmp_path: Path, name: str, code: str) -> Gene:
    write_gene(tmp_path / "genes", name, code)
    return load_gene(tmp_path / "genes", name)


def descriptors(pid: int) -> dict[int, str]:
    """What each open descriptor of ``pid`` is (``pipe:[N]``, a path, ...)."""
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            found[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
    return found


def environ(pid: int) -> dict[str, str]:
    """The environment block the kernel keeps for ``pid``."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if item)


#: Logs ``now``, then waits for the parent's answer to a memory call: the
#: parent passes the log line on first, so the process is there to look at.
NOW = "    ctx.log('now')\n    try:\n        ctx.memory.read_memory('k')\n    except Exception:\n        pass\n"


def while_running(g: Gene, look: Callable[[int], object], input: Any = None,
                  grant: Grant = CONTAINED) -> tuple[Any, list[object]]:
    """Run ``g`` (which does :data:`NOW` once) and call ``look(pid)`` on its process
    while it runs; (its output, what ``look`` returned)."""
    seen: list[object] = []

    def sink(name: str, line: str) -> None:
        if line == "now":
            pids = processes_in(g.path.resolve())
            assert len(pids) == 1, pids
            seen.append(look(pids[0]))

    return express(g, input, DeniedMemory(), log_sink=sink, grant=grant), seen


LOOKED_AT = ("import os\ndef express(input, ctx):\n" + NOW +
             "    return {'env': dict(os.environ), 'ppid': os.getppid()}\n")


def test_the_gene_process_holds_its_pipes_only_and_a_scrubbed_environment(
        tmp_path: Path, fresh_server: None) -> None:
    """Seen from outside: every descriptor of the gene's process is /dev/null
    or one of its pipes to this process, though this process has a store open
    and the server a socket; its environment block holds no secret of ours."""
    g = gene(tmp_path, "looked", LOOKED_AT)
    with MemoryStore.open(tmp_path / ".rotifer"):
        out, seen = while_running(g, lambda pid: (descriptors(pid), environ(pid),
                                                  set(descriptors(os.getpid()).values())))
    fds, block, ours = seen[0]  # type: ignore[misc]
    assert any(path.endswith(".db") for path in ours), ours
    pipes = {what for what in ours if what.startswith("pipe:")}
    assert all(what == "/dev/null" or what in pipes for what in fds.values()), (fds, pipes)
    assert {3, 4} <= set(fds) and fds[0] == "/dev/null" and fds[1] == fds[2] in pipes, fds
    # The server it was forked from holds a socket (its control channel): closed here.
    server_pid = server().pid
    assert server_pid is not None and out["ppid"] == server_pid
    assert any(what.startswith("socket:") for what in descriptors(server_pid).values())
    assert not any(what.startswith("socket:") for what in fds.values()), fds
    # No secret in the block the kernel keeps, nor in the gene's os.environ.
    assert not set(SECRETS) & set(block), block
    assert set(block) <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}, block
    env = out["env"]
    assert not set(SECRETS) & set(env), env
    assert env["HOME"] == env["TMPDIR"] != os.environ.get("HOME") and "rotifer-gene-" in env["HOME"]
    # The server itself: the same scrubbed block, no file of ours.
    assert not set(SECRETS) & set(environ(server_pid))
    assert not [w for w in descriptors(server_pid).values() if w.startswith("/") and
                w != "/dev/null"], descriptors(server_pid)


REACH = r'''
import ctypes, errno, os

def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return "refused " + errno.errorcode.get(e.errno, "?")

def attach(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    no = ctypes.c_void_p(0)
    if libc.ptrace(ctypes.c_long(16), ctypes.c_long(pid), no, no) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")

def express(input, ctx):
    out = {}
    for who in () if input is None else ("server", "rotifer"):
        pid = input[who]
        out["signal " + who] = attempt(lambda: os.kill(pid, 0))
        if input["trace"]:
            out["trace " + who] = attempt(lambda: attach(pid))
    return out
'''


@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_a_gene_cannot_signal_or_trace_the_server_or_rotifer(tmp_path: Path,
                                                             trust: bool) -> None:
    """Landlock scopes signals to the gene's own domain (the server, like rotifer,
    is outside it); seccomp refuses ptrace.  Trusted (in this process), the
    same signal (0: the permission check alone) reaches both."""
    g = gene(tmp_path, "reach", REACH)
    express(g, None, DeniedMemory(), grant=CONTAINED)  # a server to aim at
    pid = server().pid
    assert pid is not None
    value = {"server": pid, "rotifer": os.getpid(), "trace": not trust}
    out = express(g, value, DeniedMemory(), grant=Grant(trusted=trust))
    if trust:
        assert set(out.values()) == {"ok"}, out
        return
    assert out == {f"{what} {who}": "refused EPERM" for who in ("server", "rotifer")
                   for what in ("signal", "trace")}, out
    assert server().pid == pid and Path(f"/proc/{pid}").exists()


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def eventually(check: Callable[[], bool], what: str) -> None:
    """``check`` comes true within a minute (the server reaps after the run's end)."""
    end = time.monotonic() + 60
    while not check():
        assert time.monotonic() < end, what
        time.sleep(0.05)


ECHO = "import os\ndef express(input, ctx):\n" + NOW + "    return [input, os.getpid()]\n"


def gone(pid: int) -> bool:
    try:
        return "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return True


def test_a_dead_server_is_restarted_and_takes_its_genes_along(tmp_path: Path,
                                                              fresh_server: None) -> None:
    g = gene(tmp_path, "echo", ECHO)
    assert express(g, 1, DeniedMemory(), grant=CONTAINED)[0] == 1
    first = server().pid
    assert first is not None
    # Killed between runs: the next run starts a new one.
    os.kill(first, signal.SIGKILL)
    eventually(lambda: "Z" in Path(f"/proc/{first}/stat").read_text().split()[2]
               or not Path(f"/proc/{first}").exists(), "the server died")
    assert express(g, 2, DeniedMemory(), grant=CONTAINED)[0] == 2
    second = server().pid
    assert second not in (None, first)
    # Killed while a gene runs: the gene's process dies with it (its
    # parent-death signal: nothing outlives the server), so that run is
    # GENE_FAILED; nothing of it is left, the next run gets a new server.
    def kill_server(pid: int) -> None:
        os.kill(second or 0, signal.SIGKILL)
        eventually(lambda: gone(pid), "the gene's process died with the server")

    with pytest.raises(GeneFailed, match="gene 'echo'"):
        while_running(g, kill_server, 3)
    assert processes_in(g.path.resolve()) == []
    assert express(g, 4, DeniedMemory(), grant=CONTAINED)[0] == 4
    assert server().pid not in (None, first, second)


def test_a_server_that_cannot_start_is_gene_unavailable(
        tmp_path: Path, fresh_server: None, monkeypatch: pytest.MonkeyPatch) -> None:
    g = gene(tmp_path, "echo", ECHO)
    assert express(g, 0, DeniedMemory(), grant=CONTAINED)[0] == 0
    server().shutdown()
    monkeypatch.setattr("sys.executable", "/bin/false")
    with pytest.raises(GeneUnavailable, match="gene 'echo': the Python fork server"):
        express(g, 1, DeniedMemory(), grant=CONTAINED)
    monkeypatch.undo()
    server().shutdown()
    assert express(g, 1, DeniedMemory(), grant=CONTAINED)[0] == 1


def test_runs_from_threads_each_get_a_process_and_leave_none(tmp_path: Path) -> None:
    """A parallel composition runs genes from threads: each run its own child,
    its own answer; afterwards the server has reaped every one."""
    g = gene(tmp_path, "echo", ECHO)
    with ThreadPoolExecutor(max_workers=8) as pool:
        outs = list(pool.map(lambda i: express(g, i, DeniedMemory(), grant=CONTAINED),
                             range(24)))
    assert [o[0] for o in outs] == list(range(24))
    assert len({o[1] for o in outs}) == 24
    pid = server().pid
    assert pid is not None
    eventually(lambda: children(pid) == [], "the server reaped its children")
    assert json.dumps(outs)  # plain JSON, as in process
