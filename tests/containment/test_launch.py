"""The fork server started at the console script's first line
(rotifer.genes.contain.launch.start_early): a fork of rotifer that exec's the
server at once must leave it holding no more than the server ``Popen`` starts
(ForkServer.prestart): the same scrubbed environment, no descriptor but its
control socket and /dev/null, ``/`` as working folder, a session of its own.
Each attack is also run with the protection switched off, so the test bites."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rotifer.genes.contain.forkserver import server
from rotifer.genes.contain.launch import base_env

SECRETS = {"PGPASSWORD": "hunter2", "ROTIFER_MEMORY_URL": "postgresql://u:hunter2@db/x"}

#: A process that starts the server early (as the console script does) holding
#: a secret in its environment, its arguments and an inheritable descriptor,
#: says the server's pid, and waits for a line on stdin before it exits.
PROBE = """
import json, os, sys
from rotifer.genes.contain import launch
leak = os.open(sys.argv[1], os.O_RDONLY)
os.set_inheritable(leak, True)
if "unscrubbed" in sys.argv:
    launch.base_env = lambda: dict(os.environ)
if "unclosed" in sys.argv:
    os.closerange = lambda low, high: None
launch.start_early()
pid, _ = launch._early
print(json.dumps({"pid": pid, "leak": leak}), flush=True)
sys.stdin.readline()
"""


def started(pid: int) -> list[str]:
    """Wait until ``pid`` is the server (its exec done, not the fork before it)
    and holds no file its own imports open for a moment (a module's ``.pyc``,
    a folder of the standard library): what is left is what it keeps, returned
    (the targets of its descriptors)."""
    kept = ("/dev/null", "socket:", "secret.txt")
    end = time.monotonic() + 30
    while time.monotonic() < end:
        if b"zygote" in Path(f"/proc/{pid}/cmdline").read_bytes():
            targets = []
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):  # closed meanwhile
                    targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            if all(t.startswith(kept) or t.endswith(kept) for t in targets):
                return targets
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never became the fork server")


def holds(pid: int) -> dict[str, object]:
    """What a process holds that a gene forked from it could inherit."""
    env = dict(item.decode().split("=", 1)
               for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if item)
    fds = started(pid)
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return {"env": env, "cwd": os.readlink(f"/proc/{pid}/cwd"),
            "fds": sorted("socket" if target.startswith("socket:") else target
                          for target in fds),
            "session": os.getsid(pid) == pid,
            "argv": [a.decode() for a in argv if b"zygote" not in a],
            "secret in argv": any(b"hunter2" in a for a in argv)}


Probe = Callable[..., tuple["subprocess.Popen[str]", int]]


@pytest.fixture
def probe(tmp_path: Path) -> Iterator[Probe]:
    procs: list[subprocess.Popen[str]] = []

    def run(*flags: str) -> tuple[subprocess.Popen[str], int]:
        env = {**os.environ, **SECRETS}
        proc = subprocess.Popen(
            [sys.executable, "-c", PROBE, str(tmp_path / "secret.txt"), "--password=hunter2",
             *flags], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            cwd=tmp_path)
        procs.append(proc)
        assert proc.stdout is not None
        pid = json.loads(proc.stdout.readline())["pid"]
        started(pid)
        return proc, pid

    (tmp_path / "secret.txt").write_text("hunter2")
    yield run
    for proc in procs:
        proc.kill()
        proc.wait()


def popen_server(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """What the server ForkServer starts with Popen holds, with the same secrets."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    server().shutdown()
    server().prestart()
    pid = server().pid
    assert pid is not None
    try:
        started(pid)
        return holds(pid)
    finally:
        server().shutdown()


def test_the_server_started_early_holds_what_popen_s_holds(
        probe: Probe, monkeypatch: pytest.MonkeyPatch) -> None:
    proc, pid = probe()
    early = holds(pid)
    assert early == popen_server(monkeypatch)
    assert early["env"] == base_env()  # PATH and the locale: no secret
    assert early["cwd"] == "/" and early["session"] is True
    assert early["fds"] == ["/dev/null"] * 3 + ["socket"]
    assert early["secret in argv"] is False
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == 0
    # Nobody asked it for a child: killed and reaped at the probe's exit.
    assert not Path(f"/proc/{pid}").exists()


def test_unscrubbed_the_secret_would_reach_the_server(probe: Probe) -> None:
    _, pid = probe("unscrubbed")
    env = holds(pid)["env"]
    assert isinstance(env, dict) and env["PGPASSWORD"] == "hunter2"  # the test bites


def test_unclosed_a_descriptor_would_reach_the_server(probe: Probe) -> None:
    _, pid = probe("unclosed")
    fds = holds(pid)["fds"]
    assert isinstance(fds, list) and any(fd.endswith("secret.txt") for fd in fds)


def test_the_console_script_starts_it_early_only_for_contained_runs(tmp_path: Path) -> None:
    """entry.main starts the server before it imports anything of the command
    (not subprocess, socket, json, the fork server's module, click): for a
    contained ``agent run``; not for a trusted one, nor for another command."""
    (tmp_path / ".rotifer" / "agents").mkdir(parents=True)
    for name, trust in (("c", []), ("t", ["g"])):
        (tmp_path / ".rotifer" / "agents" / f"{name}.json").write_text(
            json.dumps({"genes": ["g"], "containment": {"trust": trust}}))
    code = ("import sys, types\n"
            "from rotifer.genes.contain import launch\n"
            "seen, real = [], launch.start_early\n"
            "def spy():\n"
            "    seen.extend(m for m in ('subprocess', 'socket', 'json', 'click',\n"
            "                            'rotifer.genes.contain.forkserver') if m in sys.modules)\n"
            "    real()\n"
            "launch.start_early = spy\n"
            "fake = types.ModuleType('rotifer.cli.main')\n"
            "fake.run = lambda argv: 0\n"
            "sys.modules['rotifer.cli.main'] = fake\n"
            "sys.argv = ['rotifer', '--project', *sys.argv[1:]]\n"
            "import rotifer.cli.entry as entry\n"
            "try:\n    entry.main()\nexcept SystemExit:\n    pass\n"
            "print(launch._early is not None, seen)")

    def first_line(*argv: str) -> str:
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path), *argv],
                              capture_output=True, text=True, timeout=60)
        return done.stdout.strip()

    assert first_line("agent", "run", "c", "--input", "{}") == "True []"
    assert first_line("agent", "run", "t", "--input", "{}") == "False []"
    assert first_line("agent", "list") == "False []"


def _servers_of_this_tree() -> set[int]:
    """Fork servers of this checkout's rotifer (by their command line) whose
    parent is not this test process."""
    import rotifer

    src = os.path.dirname(os.path.dirname(os.path.realpath(rotifer.__file__))).encode()
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if b"zygote" in argv and src in argv and ppid != os.getpid():
                found.add(int(pid))
    return found


def test_ctrl_c_at_any_moment_of_a_contained_run_leaves_one_line_and_no_server(
        tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the console script's whole process group,
    the fork that becomes the server too if it comes before that fork leaves
    the group: whatever the moment, at most one INTERRUPTED line, no traceback
    through rotifer's code, and no server left once the command has ended."""
    import random

    from rotifer.genes.contain.sandbox import missing
    from tests.cli.helpers import add_gene, clean_env, init_project, ok, rotifer_command, wrap

    if missing():
        pytest.skip(f"cannot contain here: {missing()}")
    server().shutdown()
    root = init_project(tmp_path / "proj")
    add_gene(root, "g", "def express(input, ctx):\n    return input\n")
    wrap(root, "g")
    ok(root, "agent", "create", "a", "--genes", "g")
    argv = [*rotifer_command(), "agent", "run", "a", "--input", "{}"]
    before = _servers_of_this_tree()
    started = time.monotonic()
    subprocess.run(argv, cwd=root, env=clean_env(), capture_output=True, check=True, timeout=120)
    whole = time.monotonic() - started
    rng = random.Random()
    for i in range(10):
        proc = subprocess.Popen(argv, cwd=root, env=clean_env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        time.sleep(whole * (i + rng.random()) / 10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert not re.search(r'File "[^"]*/rotifer/[^"]+\.py"', err), err  # none of rotifer's
        if "Traceback" in err:  # Python's own start-up (site), before any of rotifer runs
            continue
        assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err)
        assert err in ("", "INTERRUPTED: interrupted\n"), err
    end = time.monotonic() + 10
    while _servers_of_this_tree() - before and time.monotonic() < end:
        time.sleep(0.05)
    assert _servers_of_this_tree() - before == set()


def test_a_gene_s_process_collects_garbage(tmp_path: Path) -> None:
    """The server imports the runtime with the garbage collector off (speed),
    and turns it on before it serves: a gene's process has it on."""
    from rotifer.genes.contain.sandbox import CONTAINED, missing
    from rotifer.genes.execute import express
    from rotifer.genes.gene import load_gene
    from rotifer.memory import DeniedMemory
    from tests.genes.helpers import write_gene

    if missing():
        pytest.skip(f"cannot contain here: {missing()}")
    write_gene(tmp_path / "genes", "gc", "import gc\ndef express(input, ctx):\n"
                                         "    return [gc.isenabled(), len(gc.get_threshold())]\n")
    server().shutdown()
    assert express(load_gene(tmp_path / "genes", "gc"), {}, DeniedMemory(),
                   grant=CONTAINED) == [True, 3]
    server().shutdown()
