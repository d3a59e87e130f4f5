"""``rotifer doctor``: what this machine can enforce on a Python or Node gene.

Each promise is answered by a real probe where one can be made: a child
confined exactly as a gene would be (:func:`.sandbox.sandbox`, the same
:meth:`~.kernel.Plan.apply`) reports who it is (uid, gid, its capability sets,
securebits), its limits, and tries what it must not do -- open a socket, read
``/etc/passwd``, start a process, ``chmod`` a file, change its parent's
limits, map shared anonymous memory, make a SysV message queue, watch files
with fanotify and inotify -- each of which must fail.  A Node child is started
confined too.  What cannot be probed (Landlock's TCP and signal scoping) is
answered from the kernel's Landlock ABI.

:func:`report` gives everything the command prints; other checks (the store's
permissions, ...) add :class:`Promise` rows to :attr:`Report.promises`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import kernel, privileges
from .sandbox import CONTAINED, DEFAULT_TASKS, DEFAULT_TEMP_MIB, missing, python_read_paths, sandbox

_PROBE = r"""
import ctypes, errno, json, mmap, os, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
def refused(f, also=()):
    try:
        r = f()
    except OSError as e:
        return e.errno in (errno.EPERM, errno.EACCES, *also)
    return r is not None and r < 0 and ctypes.get_errno() in (errno.EPERM, errno.EACCES)
def caps():
    data = ctypes.create_string_buffer(24)
    libc.capget(struct.pack("=Ii", 0x20080522, 0), data)
    words = struct.unpack("=6I", data.raw)
    bounding = sum(1 for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1)
    ambient = sum(1 for c in range(64) if libc.prctl(47, 1, c, 0, 0) == 1)
    return {"effective": words[0] | words[3] << 32, "permitted": words[1] | words[4] << 32,
            "inheritable": words[2] | words[5] << 32, "bounding": bounding, "ambient": ambient,
            "securebits": libc.prctl(27, 0, 0, 0, 0)}
import resource
def limit(r):
    return resource.getrlimit(r)[0]
tmp = os.statvfs(os.environ["TMPDIR"])
def hidden(path):
    try:
        os.stat(path)
    except OSError as e:
        return e.errno == errno.ENOENT
    return False
def netns():
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None
print(json.dumps({
    "stat hidden": hidden("/etc/passwd"), "netns": netns(),
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "caps": caps(),
    "socket": refused(lambda: socket.socket(socket.AF_UNIX)),
    "files": refused(lambda: open("/etc/passwd").close(), (errno.ENOENT,)),
    "fork": refused(os.fork),
    "chmod": refused(lambda: os.chmod(os.environ["TMPDIR"], 0o700)),
    "parent limits": refused(lambda: libc.prlimit(os.getppid(), 4, None, None)),
    "shared memory": refused(lambda: mmap.mmap(-1, 4096)),
    "sysv ipc": refused(lambda: libc.msgget(0, 0o1600)),
    "fanotify": refused(lambda: libc.fanotify_init(0, 0)),
    "inotify": refused(lambda: libc.inotify_init1(0)),
    "limits": {"data": limit(resource.RLIMIT_DATA), "nproc": limit(resource.RLIMIT_NPROC),
               "fsize": limit(resource.RLIMIT_FSIZE), "nofile": limit(resource.RLIMIT_NOFILE),
               "temp": tmp.f_blocks * tmp.f_frsize},
}))
"""


#: Where a gene's view has the host's mounts (the paths it reads).
_SHARED_MOUNTS = ("/proc", "/sys/fs/cgroup", "/usr", "/lib", "/etc")


@dataclass(frozen=True)
class Promise:
    what: str
    enforced: bool
    why: str


@dataclass
class Report:
    """What ``rotifer doctor`` prints: the Landlock ABI, the user genes run as,
    what a probe child held, each promise, and what stops genes from running
    contained here (``blocking``: the command then exits non-zero)."""

    abi: int
    user: str
    held: str
    promises: list[Promise] = field(default_factory=list)
    blocking: list[str] = field(default_factory=list)


def _confined(argv: list[str], read: list[str]) -> subprocess.CompletedProcess[str] | str:
    try:
        with sandbox("doctor", read, CONTAINED) as box:
            return subprocess.run(argv, env=box.env, cwd="/", capture_output=True, text=True,
                                  timeout=60, preexec_fn=box.plan.apply, check=False)
    except Exception as exc:  # doctor reports whatever went wrong
        return str(exc)


def _probe() -> dict[str, Any] | str:
    """What a confined Python child saw, or why it could not run."""
    done = _confined([sys.executable, "-S", "-E", "-c", _PROBE], python_read_paths())
    if isinstance(done, str):
        return done
    return _report(done, f"the confined probe failed: {done.stderr.strip()[-300:]}",
                   "the confined probe said nothing")


def _report(done: subprocess.CompletedProcess[str], broken: str, other: str
            ) -> dict[str, Any] | str:
    """A probe's JSON report; ``broken`` when its output is not JSON, ``other``
    when it is JSON but no object."""
    try:
        found = json.loads(done.stdout)
    except ValueError:
        return broken
    return found if isinstance(found, dict) else other


#: What a confined Node child sees of the machine through ``/proc/self``.
_NODE_PROBE = r"""
const fs = require("fs");
const mounts = fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n")
  .filter((l) => l).map((l) => l.split(" ")[4]);
process.stdout.write(JSON.stringify({netns: fs.readlinkSync("/proc/self/ns/net"), mounts}));
"""


def _node() -> dict[str, Any] | str | None:
    """What a confined Node child saw (None: there is no node); a text: why it did not run."""
    node = shutil.which("node")
    if node is None:
        return None
    prefix = str(Path(node).resolve().parent.parent)
    done = _confined([node, "-e", _NODE_PROBE],
                     [prefix, "/proc/self", "/sys/fs/cgroup", "/etc/ssl"])  # as the bridge
    if isinstance(done, str):
        return done
    return _report(done, f"node failed confined: {done.stderr[-300:]}",
                   f"node failed confined: {done.stdout[-300:]}")


def _held(probe: dict[str, Any]) -> str:
    caps = probe["caps"]
    return (f"uid {probe['uid']}, gid {probe['gid']}, groups {probe['groups'] or 'none'}; "
            f"capabilities effective {caps['effective']:#x}, permitted {caps['permitted']:#x}, "
            f"inheritable {caps['inheritable']:#x}, ambient {caps['ambient']}, bounding set "
            f"{caps['bounding']} of {privileges.last_cap() + 1}; securebits "
            f"{caps['securebits']:#x}")


def report() -> Report:
    """Probe this machine (a confined Python and Node child) and answer every promise."""
    abi = kernel.landlock_abi()
    blocking = missing()
    user = privileges.gene_user()
    probe: dict[str, Any] | str = _probe() if not blocking else "containment is not available"
    if isinstance(probe, str) and not blocking:
        blocking.append(f"a confined Python child does not run: {probe}")
    node = _node() if not blocking else None
    if isinstance(node, str):
        blocking.append(f"a confined Node child does not run: {node}")
    got = probe if isinstance(probe, dict) else {}
    reason = "" if got else f" ({probe})"
    caps = got.get("caps", {})
    limits = got.get("limits", {})
    out = Report(abi, privileges.describe(user), _held(got) if got else "not probed" + reason,
                 blocking=blocking)

    def need(level: int) -> tuple[bool, str]:
        return abi >= level, f"Landlock ABI {level}+ (this kernel: {abi})"

    def probed(key: str, by: str) -> tuple[bool, str]:
        return bool(got.get(key)), f"{by}, probed{reason}"

    seen = node if isinstance(node, dict) else {}
    with open("/proc/self/mountinfo") as f:
        host_only = {line.split()[4] for line in f
                     if not line.split()[4].startswith(_SHARED_MOUNTS)} - {"/"}
    own_proc = bool(got.get("stat hidden")) and (not seen or (
        seen["netns"] != os.readlink("/proc/self/ns/net") and not host_only & set(seen["mounts"])))
    view_why = ("a mount and network namespace and a root of its own (pivot_root)"
                if user is not None else
                "in a user namespace of its own" if got.get("stat hidden") else
                "not here: an ordinary user needs an unprivileged user namespace, which this "
                "kernel refuses (user.max_user_namespaces, an LSM such as AppArmor's "
                "restriction, or a container's seccomp profile)")
    no_caps = bool(got) and not any(caps[k] for k in ("effective", "permitted",
                                                       "inheritable", "ambient"))
    rows = [
        ("read only the runtime and the gene's folder", *need(1)),
        ("write only a private temporary folder", *need(1)),
        ("no TCP bind or connect (but granted ports)", *need(4)),
        ("no signal to processes outside the gene", *need(6)),
        ("no abstract UNIX socket outside the gene", *need(6)),
        ("files outside refused in a confined child",
         *probed("files", "Landlock (and the gene's own root)")),
        ("only allowed system calls (seccomp allowlist): no socket", *probed("socket", "seccomp")),
        ("no new process (threads only)", *probed("fork", "seccomp")),
        ("no chmod/chown/utime/xattr", *probed("chmod", "seccomp")),
        ("no change to rotifer's or the server's limits, priority, CPUs",
         *probed("parent limits", "seccomp (pid 0 only)")),
        ("no shared anonymous memory (no rlimit counts it)",
         *probed("shared memory", "seccomp")),
        ("no SysV IPC, fanotify, inotify",
         got.get("sysv ipc", False) and got.get("fanotify", False) and got.get("inotify", False),
         f"seccomp, probed{reason}"),
        ("no stat of paths outside the gene's own (the store, /etc/passwd)",
         bool(got.get("stat hidden")), f"{view_why}, probed{reason}"),
        ("/proc shows the gene's own network and mounts, not the host's", own_proc,
         f"{view_why} (a gene granted TCP ports keeps the host's network), probed{reason}"),
        ("no capability (effective, permitted, inheritable, ambient)", no_caps,
         f"capset, probed{reason}"),
        ("bounding set empty, securebits locked",
         bool(got) and caps["bounding"] == 0 and caps["securebits"] == privileges.SECUREBITS,
         "as root, or in the gene's own user namespace; harmless otherwise under "
         "no_new_privs"),
        ("genes never run as root", bool(got) and got["uid"] != 0 and got["gid"] != 0,
         f"as {out.user}, probed{reason}"),
        (f"threads and processes capped ({DEFAULT_TASKS})",
         user is not None and limits.get("nproc") == DEFAULT_TASKS,
         "RLIMIT_NPROC of the genes' own user: rotifer runs as root" if user is not None
         else "not as an ordinary user: RLIMIT_NPROC would count every process of the user"),
        (f"temporary folder capped in total ({DEFAULT_TEMP_MIB} MiB)",
         limits.get("temp") == DEFAULT_TEMP_MIB << 20,
         "a tmpfs in the child's mount namespace" if got.get("stat hidden")
         else "not without a mount namespace of the child's own: 64 MiB per file only"),
        ("data size, file size, open files limited (rlimits)",
         bool(limits) and limits["data"] > 0 and limits["fsize"] > 0, "rlimits, probed"),
        ("dies with rotifer (parent-death signal), no_new_privs, scrubbed environment", True,
         "always (Linux 3.5+)"),
    ]
    out.promises = [Promise(w, bool(e), y) for w, e, y in rows]
    return out


def promises() -> tuple[int, list[Promise], list[str]]:
    """(Landlock ABI, each promise, what is missing to contain genes)."""
    found = report()
    return found.abi, found.promises, found.blocking
