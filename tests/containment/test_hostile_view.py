"""The hostile-gene suite, what a gene can learn without opening a file (issue
30, finding 13): ``stat`` of the store and of a file outside its paths, the
host's TCP and UNIX sockets in ``/proc/self/net/*``, the host's mount table in
``/proc/self/mountinfo``.  Each attack runs through a real ``rotifer agent
run`` as a Python and a Node gene, as root and as ``nobody``: refused
contained (a root of the gene's own, an empty network: contain/view.py), and
succeeding with ``--trust``, so the test bites.

A Python gene may not open ``/proc`` at all (Landlock); a Node gene needs
``/proc/self`` and reads it, but there it sees its own network namespace and
its own mounts.  A gene granted TCP ports keeps the host's network (it must
reach it), so its ``/proc/self/net`` is the host's: that is tested too.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import (
    add_gene,
    clean_env,
    init_project,
    ok_process,
    rotifer_command,
    run_process,
    wrap,
)
from tests.containment.test_hostile_kernel import report_of
from tests.containment.test_hostile_unprivileged import chown_tree, nobody_dir  # noqa: F401

PY = r'''
import os

def attempt(f):
    try:
        return "ok" if f() else "refused: not seen"
    except OSError as e:
        return "refused " + os.strerror(e.errno)

def text(path):
    with open(path) as f:
        return f.read()

def tcp(port):
    wanted = ":%04X " % port
    return any(wanted in line for name in ("tcp", "tcp6")
               for line in text("/proc/self/net/" + name).splitlines()[1:])

def mounts(points):
    seen = {line.split()[4] for line in text("/proc/self/mountinfo").splitlines()}
    return bool(seen & set(points))

def express(input, ctx):
    return {
        "stat the store": attempt(lambda: os.stat(input["db"])),
        "stat outside": attempt(lambda: os.stat("/etc/passwd")),
        "host tcp sockets": attempt(lambda: tcp(input["port"])),
        "host unix sockets": attempt(lambda: input["unix"] in text("/proc/self/net/unix")),
        "host mounts": attempt(lambda: mounts(input["mounts"])),
    }
'''

NODE = r'''
const fs = require("fs");
function attempt(f) {
  try { return f() ? "ok" : "refused: not seen"; } catch (e) { return "refused " + e.code; }
}
const text = (p) => fs.readFileSync(p, "utf8");
exports.express = (input) => {
  const hex = ":" + input.port.toString(16).toUpperCase().padStart(4, "0") + " ";
  return {
    "stat the store": attempt(() => fs.statSync(input.db)),
    "stat outside": attempt(() => fs.statSync("/etc/passwd")),
    "host tcp sockets": attempt(() => ["tcp", "tcp6"].some(
      (n) => text("/proc/self/net/" + n).split("\n").slice(1).some((l) => l.includes(hex)))),
    "host unix sockets": attempt(() => text("/proc/self/net/unix").includes(input.unix)),
    "host mounts": attempt(() => text("/proc/self/mountinfo").split("\n").some(
      (l) => l && input.mounts.includes(l.split(" ")[4]))),
  };
};
'''

#: What a gene's view has at the same place as the host: the paths it reads.
SHARED = ("/", "/proc", "/sys/fs/cgroup", "/usr", "/lib", "/lib64", "/lib32", "/etc")


def host_only_mounts() -> list[str]:
    """Mount points of this machine that no contained gene may see."""
    repo = str(Path(__file__).resolve().parents[2])
    shared = (*SHARED[1:], sys.prefix, sys.base_prefix, repo)
    with open("/proc/self/mountinfo") as f:
        points = {line.split()[4] for line in f} - {"/"}
    return sorted(p for p in points if not any(p == s or p.startswith(s + "/") for s in shared))


@pytest.fixture
def listeners(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A listening TCP socket on loopback and a listening UNIX socket."""
    tcp = socket.create_server(("127.0.0.1", 0))
    path = str(tmp_path / f"rotifer-secret-{os.getpid()}.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    unix.listen()
    try:
        yield tcp.getsockname()[1], path
    finally:
        tcp.close()
        unix.close()


def view_project(base: Path, kind: str, options: list[str]) -> Path:
    root = init_project(base / "proj")
    if kind == "python":
        add_gene(root, "spy", PY, domain="other")
    else:
        add_gene(root, "spy", NODE, domain="other", file="index.js")
    wrap(root, "spy")
    ok_process(root, "agent", "create", "a", "--genes", "spy", *options)
    return root


def attack_input(root: Path, listeners: tuple[int, str]) -> str:
    mounts = host_only_mounts()
    assert mounts, "this machine has no mount a gene's view leaves out"
    return json.dumps({"db": str(root / ".rotifer" / "playground.db"), "port": listeners[0],
                       "unix": listeners[1], "mounts": mounts})


def skip_without_node(kind: str) -> None:
    if kind == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")


def judge(report: dict[str, str], kind: str, trust: bool) -> None:
    if trust:
        assert report == dict.fromkeys(report, "ok"), report
        return
    assert [a for a, r in report.items() if r == "ok"] == [], report
    if kind == "node":  # it reads /proc/self: its own network and mounts, not refused
        for attack in ("host tcp sockets", "host unix sockets", "host mounts"):
            assert report[attack] == "refused: not seen", report


@pytest.mark.parametrize("kind", ["python", "node"])
@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_what_a_gene_sees_of_the_machine(tmp_path: Path, listeners: tuple[int, str],
                                         kind: str, trust: bool) -> None:
    skip_without_node(kind)
    root = view_project(tmp_path, kind, ["--trust", "spy"] if trust else [])
    done = run_process(root, "agent", "run", "a", "--input", attack_input(root, listeners),
                       env={"TMPDIR": str(tmp_path)})
    judge(report_of(done), kind, trust)


@pytest.mark.parametrize("kind", ["python", "node"])
@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_what_a_gene_sees_as_an_unprivileged_user(
        nobody_dir: tuple[Path, pwd.struct_passwd], listeners: tuple[int, str],  # noqa: F811
        kind: str, trust: bool) -> None:
    """As nobody: the view is built in a user namespace of the gene's own."""
    skip_without_node(kind)
    base, user = nobody_dir
    root = view_project(base, kind, ["--trust", "spy"] if trust else [])
    chown_tree(base, user.pw_uid, user.pw_gid)
    done = subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
         *rotifer_command(), "agent", "run", "a", "--input", attack_input(root, listeners)],
        cwd=root, env=clean_env({"TMPDIR": str(base)}), capture_output=True, text=True,
        timeout=120, check=False)
    judge(report_of(done), kind, trust)


def test_a_node_gene_granted_tcp_sees_the_hosts_sockets(
        tmp_path: Path, listeners: tuple[int, str]) -> None:
    """``--allow-tcp`` keeps the host's network (the gene must reach it): its
    ``/proc/self/net`` is the host's, while the files and mounts stay hidden."""
    skip_without_node("node")
    root = view_project(tmp_path, "node", ["--allow-tcp", f"spy:{listeners[0]}"])
    report = report_of(run_process(root, "agent", "run", "a", "--input",
                                   attack_input(root, listeners), env={"TMPDIR": str(tmp_path)}))
    assert report["host tcp sockets"] == "ok", report
    assert {a: r for a, r in report.items() if r == "ok"} == {"host tcp sockets": "ok",
                                                               "host unix sockets": "ok"}


@pytest.mark.parametrize("kind", ["python", "node"])
def test_without_a_user_namespace_an_ordinary_users_gene_sees_the_machine(
        nobody_dir: tuple[Path, pwd.struct_passwd], listeners: tuple[int, str],  # noqa: F811
        kind: str) -> None:
    """Where the kernel refuses an ordinary user a user namespace (pretended
    here), the view is switched off: the same contained gene reaches what it
    did before (Landlock still refuses opening the store), and ``doctor`` says
    both promises do not hold, and why."""
    skip_without_node(kind)
    base, user = nobody_dir
    root = view_project(base, kind, [])
    chown_tree(base, user.pw_uid, user.pw_gid)
    as_nobody = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                 "--clear-groups", *rotifer_command()]
    env = clean_env({"TMPDIR": str(base), "ROTIFER_PRETEND_NO_USERNS": "1"})
    done = subprocess.run([*as_nobody, "agent", "run", "a", "--input",
                           attack_input(root, listeners)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    report = report_of(done)
    assert report["stat the store"] == "ok" and report["stat outside"] == "ok", report
    if kind == "node":
        assert report["host mounts"] == report["host tcp sockets"] == "ok", report
    if kind == "python":
        doctor = subprocess.run([*as_nobody, "doctor"], cwd=root, env=env,
                                capture_output=True, text=True, timeout=120, check=False)
        for row in ("no stat of paths outside", "/proc shows the gene's own network"):
            line = next(x for x in doctor.stdout.splitlines() if x.startswith(row))
            assert "  no  " in line and "user namespace" in line, doctor.stdout


def test_the_view_binds_each_tree_once() -> None:
    """A path inside another bound one is there already (a mount point made for
    it would be made inside that folder, on the real file system); ``/proc/self``
    is all of ``/proc`` (the child's own pid directory is not known to a bind)."""
    from rotifer.genes.contain.view import binds

    assert binds(["/usr/lib/python3", "/usr", "/proc/self", "/lib", "/usr2", "/etc/ssl",
                  "/etc/ld.so.cache"]) == ["/etc/ld.so.cache", "/etc/ssl", "/lib", "/proc",
                                           "/usr", "/usr2"]
