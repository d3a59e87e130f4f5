"""The seccomp allowlist (genes/contain/syscalls.py) walked in a real confined
child: every system call number outside it fails with EPERM, each call with
argument rules is allowed only with those arguments, and the child holds no
privilege.

The child is confined exactly as a gene's process (:func:`sandbox`, the same
:meth:`~rotifer.genes.contain.kernel.Plan.apply`) and calls ``syscall(nr, 0,
...)`` through ctypes.  A refused call never reaches the kernel's handler, so
walking ``reboot`` or ``kexec_load`` is harmless -- and the walk is never made
outside the filter.  What makes the walk bite: the same loop must see the
allowed calls it tries (``getpid``, ``getppid``) answer, not EPERM.

Not walked: x86_64's ``uretprobe`` (335) and ``uprobe`` (336), which the
kernel passes through every seccomp filter by design (6.11+, 6.16+): called
from anywhere but a probe's trampoline they end the caller with SIGILL, which
is all they can do.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from rotifer.genes.contain import seccomp, syscalls
from rotifer.genes.contain.sandbox import CONTAINED, Grant, python_read_paths, sandbox

pytestmark = pytest.mark.skipif(seccomp.machine() is None, reason="no seccomp table here")

WALK = r"""
import ctypes, errno, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
skip, top = set(json.loads(sys.argv[1])), int(sys.argv[2])
wrong = {}
for nr in [*range(top), *(n | 0x40000000 for n in (0, 1, 39))]:
    if nr in skip:
        continue
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(0)] * 6)
    if r != -1 or ctypes.get_errno() != errno.EPERM:
        wrong[nr] = [r, ctypes.get_errno()]
controls = {n: libc.syscall(ctypes.c_long(n)) for n in json.loads(sys.argv[3])}
print(json.dumps({"wrong": wrong, "controls": controls}))
"""


def confined(code: str, *args: str, grant: Grant = CONTAINED) -> Any:
    """Run ``code`` in a child confined as a gene's; its JSON answer."""
    with sandbox("walk", python_read_paths(), grant) as box:
        done = subprocess.run([sys.executable, "-S", "-E", "-c", code, *args], env=box.env,
                              cwd="/", capture_output=True, text=True, timeout=120,
                              preexec_fn=box.plan.apply, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_call_outside_the_allowlist_fails_with_eperm() -> None:
    machine = seccomp.machine()
    assert machine is not None
    plain, ruled = syscalls.allowed(machine), syscalls.filtered(machine)
    probes = {335, 336} if machine == "x86_64" else set()
    skip = sorted({*plain.values(), *ruled.values(), *probes})
    controls = [plain["getpid"], plain["getppid"]]
    out = confined(WALK, json.dumps(skip), "600", json.dumps(controls))
    assert out["wrong"] == {}, out["wrong"]
    assert all(int(v) > 0 for v in out["controls"].values()), out  # the walk sees answers


def test_both_tables_are_whole() -> None:
    """Each architecture's numbers are unique, and the program builds for both."""
    for machine in syscalls.ARCHES:
        numbers = [*syscalls.allowed(machine).values(), *syscalls.filtered(machine).values()]
        assert len(numbers) == len(set(numbers)), machine
        program = seccomp.build(arch=machine)
        assert len(program) % 8 == 0 and len(program) // 8 < 4096


ARGS = r"""
import ctypes, errno, json, mmap, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def attempt(f):
    try:
        r = f()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    if isinstance(r, int) and r < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    return "ok"
def sock(family, kind, proto=0):
    socket.socket(family, kind, proto).close()
parent = os.getppid()
print(json.dumps({
    "prlimit self": attempt(lambda: libc.prlimit(0, 7, None, None)),
    "prlimit parent": attempt(lambda: libc.prlimit(parent, 7, None, None)),
    "setpriority self": attempt(lambda: os.setpriority(os.PRIO_PROCESS, 0, 1)),
    "setpriority parent": attempt(lambda: os.setpriority(os.PRIO_PROCESS, parent, 1)),
    "setpriority user": attempt(lambda: os.setpriority(os.PRIO_USER, 0, 1)),
    "affinity self": attempt(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))),
    "affinity parent": attempt(lambda: os.sched_setaffinity(parent, {0})),
    "fifo scheduling": attempt(lambda: os.sched_setscheduler(0, os.SCHED_FIFO,
                                                             os.sched_param(1))),
    "private memory": attempt(lambda: mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE)),
    "shared memory": attempt(lambda: mmap.mmap(-1, 4096)),
    "memfd": attempt(lambda: os.memfd_create("x")),
    "fork": attempt(os.fork),
    "tcp": attempt(lambda: sock(socket.AF_INET, socket.SOCK_STREAM)),
    "tcp6": attempt(lambda: sock(socket.AF_INET6, socket.SOCK_STREAM, 6)),
    "mptcp": attempt(lambda: sock(socket.AF_INET, socket.SOCK_STREAM, 262)),
    "udp": attempt(lambda: sock(socket.AF_INET, socket.SOCK_DGRAM)),
    "unix": attempt(lambda: sock(socket.AF_UNIX, socket.SOCK_STREAM)),
    "listen": attempt(lambda: socket.socket().listen()),
    "uid": os.getuid(),
}))
"""


@pytest.mark.parametrize("tcp", [False, True], ids=["no-tcp", "allow-tcp"])
def test_argument_rules(tcp: bool) -> None:
    out = confined(ARGS, grant=Grant(tcp_ports=(9,) if tcp else ()))
    assert out.pop("uid") != 0
    for own in ("prlimit self", "setpriority self", "affinity self", "private memory"):
        assert out.pop(own) == "ok", own
    if tcp:
        assert out.pop("tcp") == "ok"
        assert out.pop("tcp6") == "ok"
    assert set(out.values()) == {"EPERM"}, out


def run_filter(program: bytes, arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """What the classic BPF ``program`` answers for one call (the instructions
    :mod:`rotifer.genes.contain.seccomp` emits), so the aarch64 program, which
    this machine cannot load, is checked too."""
    import struct

    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    ins = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x54:
            acc &= k
        elif code == 0x06:
            return k
        elif code == 0x05:
            pc += k
        else:
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if hit else jf
        pc += 1


@pytest.mark.parametrize("machine", sorted(syscalls.ARCHES))
def test_each_architecture_s_program_answers_as_the_table_says(machine: str) -> None:
    arch = syscalls.ARCHES[machine]
    program = seccomp.build(arch=machine)
    tcp = seccomp.build(allow_tcp=True, arch=machine)
    plain, ruled = syscalls.allowed(machine), syscalls.filtered(machine)
    eperm = seccomp.RET_ERRNO | 1
    for number in plain.values():
        assert run_filter(program, arch, number) == seccomp.RET_ALLOW, number
    for number in set(range(500)) - {*plain.values(), *ruled.values()}:
        assert run_filter(program, arch, number) == eperm, number
    assert run_filter(program, arch ^ 1, plain["read"]) == seccomp.RET_KILL_PROCESS
    mmap, clone, socket_ = ruled["mmap"], ruled["clone"], ruled["socket"]
    assert run_filter(program, arch, mmap, (0, 4096, 3, 0x22)) == seccomp.RET_ALLOW
    assert run_filter(program, arch, mmap, (0, 4096, 3, 0x21)) == eperm
    assert run_filter(program, arch, mmap, (0, 4096, 3, 0x01)) == seccomp.RET_ALLOW
    assert run_filter(program, arch, clone, (0x3D0F00,)) == seccomp.RET_ALLOW
    assert run_filter(program, arch, clone, (0x11,)) == eperm  # fork's flags
    assert run_filter(program, arch, clone, (0x3D0F00 | 0x40000000,)) == eperm
    assert run_filter(program, arch, ruled["clone3"]) == seccomp.RET_ERRNO | 38
    assert run_filter(program, arch, ruled["prlimit64"], (0,)) == seccomp.RET_ALLOW
    assert run_filter(program, arch, ruled["prlimit64"], (1234,)) == eperm
    assert run_filter(program, arch, socket_, (2, 1, 0)) == eperm
    assert run_filter(tcp, arch, socket_, (2, 0x80801, 6)) == seccomp.RET_ALLOW
    assert run_filter(tcp, arch, socket_, (10, 1, 0)) == seccomp.RET_ALLOW
    assert run_filter(tcp, arch, socket_, (2, 1, 262)) == eperm
    assert run_filter(tcp, arch, socket_, (2, 2, 0)) == eperm
    assert run_filter(tcp, arch, socket_, (1, 1, 0)) == eperm
