"""The hostile-gene suite, the kernel part (issue 30): what a gene could do to
files' metadata, with root's capabilities, with fanotify/inotify, to its
parent's limits and priority, with SysV IPC, shared memory and threads --
each attack run through a real ``rotifer agent run`` as a Python and a Node
gene, refused contained and succeeding with ``--trust`` (so the test bites).

Every trusted attack is made harmless: ``chmod``, ``chown``, ``utime`` set
what the store's database already has (the kernel's permission check is the
attack), the setuid bit goes on a small file of the gene's own, the clock and
hostname calls only pass the permission check (``settimeofday(NULL, NULL)``,
``sethostname`` to the same name, ``reboot`` with no magic: EINVAL when
permitted), the parent's priority and CPUs are set to what they are.

The capability attacks succeed trusted only as root: as an ordinary user
(:func:`test_the_kernel_attacks_as_an_unprivileged_user`) the kernel refuses
them whatever rotifer does, and the thread cap is root's (RLIMIT_NPROC of the
genes' own user).
"""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import (
    add_gene,
    clean_env,
    init_project,
    ok_process,
    refused_process,
    rotifer_command,
    run_process,
    wrap,
)
from tests.containment.test_hostile_unprivileged import chown_tree, nobody_dir  # noqa: F401

#: Both genes start threads the same way (the thread cap's attack).
THREADS = r'''
def threads(n):
    stop = threading.Event()
    started = []
    try:
        for _ in range(n):
            t = threading.Thread(target=stop.wait)
            t.start()
            started.append(t)
    finally:
        stop.set()
        for t in started:
            t.join()
'''

PY = r'''
import ctypes, errno, mmap, os, platform, tempfile, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {"x86_64": {"reboot": 169, "settimeofday": 164},
      "aarch64": {"reboot": 142, "settimeofday": 170}}[platform.machine()]

def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return "refused " + errno.errorcode.get(e.errno, str(e.errno))
    except BaseException as e:
        return "refused " + type(e).__name__

def c(result, permitted=()):
    """A libc call's result: -1 is an OSError unless its errno shows the
    permission check passed."""
    if result == -1:
        err = ctypes.get_errno()
        if err not in permitted:
            raise OSError(err, os.strerror(err))
    return result

def setuid_copy():
    path = os.path.join(tempfile.gettempdir(), "rotifer-suid")
    with open(path, "wb") as f:
        f.write(b"#!/bin/sh\n")
    try:
        os.chmod(path, 0o4755)
        assert os.stat(path).st_mode & 0o4000
    finally:
        os.unlink(path)

def capabilities():
    data = ctypes.create_string_buffer(24)
    c(libc.capget(ctypes.c_char_p(bytes([0x22, 0x05, 0x08, 0x20, 0, 0, 0, 0])), data))
    if data.raw[:4] == bytes(4):
        raise OSError(errno.EPERM, "no effective capability")

''' + THREADS + r'''
def watch(path):
    fd = c(libc.inotify_init1(0))
    try:
        c(libc.inotify_add_watch(fd, path.encode(), 0xFFF))
    finally:
        os.close(fd)

def fanotify():
    os.close(c(libc.fanotify_init(0, 0)))

def queue(key):
    q = c(libc.msgget(key, 0o1600))
    c(libc.msgsnd(q, b"\x01\x00\x00\x00\x00\x00\x00\x00secret", 6, 0))

def express(input, ctx):
    db = input["root"] + "/.rotifer/playground.db"
    st = input["stat"]  # what the database has: the trusted attacks set the same
    ppid = os.getppid()
    name = os.uname().nodename.encode()
    return {
        "chmod the store": attempt(lambda: os.chmod(db, st["mode"])),
        "chown the store": attempt(lambda: os.chown(db, st["uid"], st["gid"])),
        "utime the store": attempt(lambda: os.utime(db, ns=(st["atime"], st["mtime"]))),
        "list xattrs of the store": attempt(lambda: os.listxattr(db)),
        "setuid copy": attempt(setuid_copy),
        "capabilities": attempt(capabilities),
        "reboot": attempt(lambda: c(libc.syscall(NR["reboot"], 0, 0, 0, 0), (errno.EINVAL,))),
        "settimeofday": attempt(lambda: c(libc.syscall(NR["settimeofday"], None, None))),
        "sethostname": attempt(lambda: c(libc.sethostname(name, len(name)))),
        "syslog": attempt(lambda: c(libc.klogctl(10, None, 0))),
        "fanotify": attempt(fanotify),
        "inotify the store": attempt(lambda: watch(db)),
        "sysv queue": attempt(lambda: queue(input["key"])),
        "shared memory": attempt(lambda: mmap.mmap(-1, 1 << 20).close()),
        "limits of the parent": attempt(
            lambda: c(libc.prlimit(ppid, 7, None, ctypes.create_string_buffer(16)))),
        "renice the parent": attempt(
            lambda: os.setpriority(os.PRIO_PROCESS, ppid, os.getpriority(os.PRIO_PROCESS, ppid))),
        "CPUs of the parent": attempt(
            lambda: os.sched_setaffinity(ppid, os.sched_getaffinity(ppid))),
        "300 threads": attempt(lambda: threads(300)),
    }
'''

NODE = r'''
const fs = require("fs");
const os = require("os");
const path = require("path");
function attempt(f) {
  try { f(); return "ok"; } catch (e) { return "refused " + (e.code || e.name); }
}
exports.express = (input) => {
  const db = input.root + "/.rotifer/playground.db";
  const st = input.stat;  // what the database has: the trusted attacks set the same
  const ppid = process.ppid;
  return {
    "chmod the store": attempt(() => fs.chmodSync(db, st.mode)),
    "chown the store": attempt(() => fs.chownSync(db, st.uid, st.gid)),
    "utime the store": attempt(() => fs.utimesSync(db, st.atime / 1e9, st.mtime / 1e9)),
    "setuid copy": attempt(() => {
      const p = path.join(os.tmpdir(), "rotifer-suid-node");
      fs.writeFileSync(p, "#!/bin/sh\n");
      try {
        fs.chmodSync(p, 0o4755);
        if (!(fs.statSync(p).mode & 0o4000)) throw new Error("no setuid bit");
      } finally { fs.unlinkSync(p); }
    }),
    "inotify the store": attempt(() => fs.watch(db).close()),
    "renice the parent": attempt(() => os.setPriority(ppid, os.getPriority(ppid))),
  };
};
'''

#: What a trusted Python gene aims at its parent: inside ``rotifer`` that is
#: this (root) pytest process, which nobody may not touch whatever rotifer does.
AT_THE_PARENT = {"limits of the parent", "renice the parent", "CPUs of the parent"}
#: Attacks whose success trusted needs root's capabilities.
ROOT_ONLY = {"capabilities", "reboot", "settimeofday", "sethostname", "syslog", "fanotify",
             "300 threads"}


def sysv_queue(key: int) -> int:
    """The id of the SysV message queue ``key`` (-1: none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.msgget(key, 0))


def remove_queue(key: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    q = libc.msgget(key, 0)
    if q >= 0:
        libc.msgctl(q, 0, None)  # IPC_RMID


def kernel_project(base: Path, kind: str, trust: bool) -> Path:
    root = init_project(base / "proj")
    if kind == "python":
        add_gene(root, "thief", PY, domain="other")
    else:
        add_gene(root, "thief", NODE, domain="other", file="index.js")
    wrap(root, "thief")
    ok_process(root, "agent", "create", "a", "--genes", "thief", *(["--trust", "thief"] if trust else []))
    return root


def attack_input(root: Path, key: int) -> str:
    st = (root / ".rotifer" / "playground.db").stat()
    return json.dumps({"root": str(root), "key": key,
                       "stat": {"mode": st.st_mode & 0o7777, "uid": st.st_uid, "gid": st.st_gid,
                                "atime": st.st_atime_ns, "mtime": st.st_mtime_ns}})


def report_of(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert done.returncode == 0, done
    found: dict[str, str] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("kind", ["python", "node"])
@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_kernel_attacks_are_refused_unless_trusted(tmp_path: Path, kind: str,
                                                   trust: bool) -> None:
    if kind == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    root = kernel_project(tmp_path, kind, trust)
    key = 0x52300000 + os.getpid() % 0xFFFF
    db = root / ".rotifer" / "playground.db"
    before = db.stat()
    try:
        done = run_process(root, "agent", "run", "a", "--input", attack_input(root, key),
                           env={"TMPDIR": str(tmp_path)})
        report = report_of(done)
        left = sysv_queue(key)
    finally:
        remove_queue(key)
    after = db.stat()
    assert (after.st_mode, after.st_uid, after.st_gid) == (before.st_mode, before.st_uid,
                                                            before.st_gid)
    if trust:
        wanted = [a for a in report if os.geteuid() == 0 or a not in ROOT_ONLY]
        assert {a: report[a] for a in wanted} == dict.fromkeys(wanted, "ok"), report
        if kind == "python":
            assert left >= 0  # the queue outlived the run: another agent could read it
        return
    assert [a for a, r in report.items() if r == "ok"] == [], report
    assert left == -1
    ok_process(root, "agent", "audit", "verify", "a")


@pytest.mark.parametrize("kind", ["python", "node"])
@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_the_kernel_attacks_as_an_unprivileged_user(
        nobody_dir: tuple[Path, pwd.struct_passwd], kind: str, trust: bool) -> None:  # noqa: F811
    """The same genes run by ``rotifer agent run`` as nobody: every attack
    refused contained; trusted, those an ordinary user may make succeed."""
    if kind == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    base, user = nobody_dir
    root = kernel_project(base, kind, trust)
    chown_tree(base, user.pw_uid, user.pw_gid)
    key = 0x52310000 + os.getpid() % 0xFFFF
    try:
        done = subprocess.run(
            ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
             *rotifer_command(), "agent", "run", "a", "--input", attack_input(root, key)],
            cwd=root, env=clean_env({"TMPDIR": str(base)}), capture_output=True, text=True,
            timeout=120, check=False)
        report: dict[str, Any] = report_of(done)
    finally:
        remove_queue(key)
    if trust:
        wanted = [a for a in report if a not in ROOT_ONLY
                  and not (kind == "python" and a in AT_THE_PARENT)]
        assert {a: report[a] for a in wanted} == dict.fromkeys(wanted, "ok"), report
        return
    refused_here = [a for a in report if a != "300 threads"]  # no RLIMIT_NPROC as a user
    assert [a for a in refused_here if report[a] == "ok"] == [], report


LIMITS = r'''
import os, threading

def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return "refused " + os.strerror(e.errno)
    except RuntimeError as e:
        return "refused " + str(e)

''' + THREADS + r'''
def fill(mib):
    for i in range(mib // 32):
        with open(os.path.join(os.environ["TMPDIR"], f"f{i}"), "wb") as f:
            f.write(bytes(32 << 20))

def express(input, ctx):
    return {"threads": attempt(lambda: threads(input["threads"])),
            "temp": attempt(lambda: fill(input["temp"]))}
'''


@pytest.mark.parametrize("options", [[], ["--gene-threads", "600", "--gene-temp", "160"]],
                         ids=["defaults", "per-agent"])
def test_threads_and_the_temporary_folder_are_capped_per_agent(tmp_path: Path,
                                                               options: list[str]) -> None:
    """As root: 300 threads pass the default cap (256) only with --gene-threads;
    192 MiB in the temporary folder fit the default tmpfs (256 MiB), not the
    160 MiB one --gene-temp sets."""
    if os.geteuid() != 0:
        pytest.skip("both caps hold when rotifer runs as root (doctor says so otherwise)")
    root = init_project(tmp_path / "proj")
    add_gene(root, "g", LIMITS)
    wrap(root, "g")
    # Each thread's stack (8 MiB) counts against the data size: memory enough
    # for 300 of them, so the thread cap alone decides.
    ok_process(root, "agent", "create", "a", "--genes", "g", "--gene-memory", "4096", *options)
    report = report_of(run_process(root, "agent", "run", "a", "--input",
                                   json.dumps({"threads": 300, "temp": 192})))
    if options:
        assert report["threads"] == "ok", report
        assert report["temp"].startswith("refused No space left"), report
    else:
        assert report["threads"].startswith("refused"), report
        assert report["temp"] == "ok", report


@pytest.mark.parametrize(("option", "value"), [("--gene-threads", "3"), ("--gene-temp", "0")])
def test_a_cap_too_small_is_refused(tmp_path: Path, option: str, value: str) -> None:
    root = init_project(tmp_path / "proj")
    add_gene(root, "g", LIMITS)
    wrap(root, "g")
    line = refused_process(root, "INVALID_AGENT", "agent", "create", "a", "--genes", "g", option, value)
    assert "at least" in line, line
