"""The seccomp filter of a contained child, built from :mod:`.syscalls` as a
classic BPF program (``struct sock_filter[]``) with no libseccomp.

Its shape: the architecture is checked first (another one's call -- the x86
32-bit ABI, or x32 -- kills the process, as Chromium's and Docker's do); then
each allowed call is one comparison followed by ``RET ALLOW`` (the calls a
gene makes most come first); each call with argument rules jumps (``JA``, whose
32-bit offset reaches anywhere, where a conditional jump reaches 255 ahead)
to a small block of its own that checks them; whatever is left gets
``EPERM``.  Arguments are compared on their low 32 bits: every one checked
here is an ``int`` to the kernel (a pid, flags, a family).
"""

from __future__ import annotations

import errno
import os
from functools import lru_cache
from struct import pack

from . import syscalls

RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS, RET_LOG = 0x7FFF0000, 0x00050000, 0x80000000, 0x7FFC0000
_LD_W_ABS, _JA, _JEQ_K, _JGE_K, _JSET_K, _AND_K, _RET_K = 0x20, 0x05, 0x15, 0x35, 0x45, 0x54, 0x06

_CLONE_THREAD = 0x00010000
#: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME.
CLONE_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000 | 0x00000080
_MAP_TYPE, _MAP_SHARED, _MAP_SHARED_VALIDATE, _MAP_ANONYMOUS = 0x0F, 0x01, 0x03, 0x20
_MSG_FASTOPEN = 0x20000000
_AF_INET, _AF_INET6, _SOCK_STREAM, _IPPROTO_TCP = 2, 10, 1, 6
#: prctl options a gene may use: naming its threads and memory, reading its own state.
PRCTL_OPTIONS = {
    "PR_GET_PDEATHSIG": 2, "PR_GET_DUMPABLE": 3, "PR_GET_KEEPCAPS": 7, "PR_SET_NAME": 15,
    "PR_GET_NAME": 16, "PR_GET_SECCOMP": 21, "PR_CAPBSET_READ": 23, "PR_GET_SECUREBITS": 27,
    "PR_GET_TIMERSLACK": 30, "PR_GET_NO_NEW_PRIVS": 39, "PR_GET_THP_DISABLE": 42,
    "PR_SVE_GET_VL": 51, "PR_GET_TAGGED_ADDR_CTRL": 56, "PR_SET_VMA": 0x53564D41,
}
#: The calls made most often, tested first (the rest follow in table order).
_HOT = ("read", "write", "futex", "epoll_wait", "epoll_pwait", "close", "munmap",
        "mprotect", "madvise", "openat", "newfstatat", "fstat", "statx", "lseek",
        "rt_sigprocmask", "clock_gettime", "getpid", "brk", "ioctl", "fcntl", "poll")
#: Development aid: make refused calls logged and allowed (``dmesg``) to find
#: what a runtime needs; never set in a commit.
_DEBUG_LOG = False

Ins = tuple[int, int | str, int | str, int]


def _arg(index: int) -> int:
    """The offset of argument ``index``'s low 32 bits in ``struct seccomp_data``."""
    return 16 + 8 * index


def _only_zero(index: int) -> list[Ins]:
    return [(_LD_W_ABS, 0, 0, _arg(index)), (_JEQ_K, "allow", "eperm", 0)]


def _blocks(allow_tcp: bool) -> dict[str, list[Ins]]:
    """Each filtered call's checks; jumps name ``allow``, ``eperm`` or ``enosys``."""
    blocks: dict[str, list[Ins]] = {
        "mmap": [(_LD_W_ABS, 0, 0, _arg(3)), (_AND_K, 0, 0, _MAP_TYPE),
                 (_JEQ_K, 1, 0, _MAP_SHARED), (_JEQ_K, 0, "allow", _MAP_SHARED_VALIDATE),
                 (_LD_W_ABS, 0, 0, _arg(3)), (_JSET_K, "eperm", "allow", _MAP_ANONYMOUS)],
        "clone": [(_LD_W_ABS, 0, 0, _arg(0)), (_JSET_K, "eperm", 0, CLONE_NEW_NAMESPACES),
                  (_JSET_K, "allow", "eperm", _CLONE_THREAD)],
        "clone3": [(_RET_K, 0, 0, RET_ERRNO | errno.ENOSYS)],
        "sendto": [(_LD_W_ABS, 0, 0, _arg(3)), (_JSET_K, "eperm", "allow", _MSG_FASTOPEN)],
        "sendmsg": [(_LD_W_ABS, 0, 0, _arg(2)), (_JSET_K, "eperm", "allow", _MSG_FASTOPEN)],
        "setpriority": [(_LD_W_ABS, 0, 0, _arg(0)), (_JEQ_K, 0, "eperm", 0),
                        *_only_zero(1)],
        "prctl": [(_LD_W_ABS, 0, 0, _arg(0)),
                  *[(_JEQ_K, "allow", 0, v) for v in PRCTL_OPTIONS.values()],
                  (_JA, "eperm", 0, 0)],
        "socket": [(_JA, "eperm", 0, 0)],
    }
    if allow_tcp:
        blocks["socket"] = [
            (_LD_W_ABS, 0, 0, _arg(0)), (_JEQ_K, 1, 0, _AF_INET), (_JEQ_K, 0, "eperm", _AF_INET6),
            (_LD_W_ABS, 0, 0, _arg(1)), (_AND_K, 0, 0, 0xF), (_JEQ_K, 0, "eperm", _SOCK_STREAM),
            (_LD_W_ABS, 0, 0, _arg(2)), (_JEQ_K, "allow", 0, 0),
            (_JEQ_K, "allow", "eperm", _IPPROTO_TCP)]
    for name in ("prlimit64", "sched_setaffinity", "sched_getparam",
                 "sched_getscheduler", "sched_getattr"):
        blocks[name] = _only_zero(0)
    return blocks


def _resolve(block: list[Ins], refused: int) -> list[tuple[int, int, int, int]]:
    """A block with its own three returns appended, labels turned into offsets."""
    if block[0][0] == _RET_K:  # a fixed answer (clone3's ENOSYS)
        return [(_RET_K, 0, 0, block[0][3])]
    body = list(block)
    ends = {"allow": len(body), "eperm": len(body) + 1}
    out: list[tuple[int, int, int, int]] = []
    for i, (code, jt, jf, k) in enumerate(body):
        jt_n = ends[jt] - i - 1 if isinstance(jt, str) else jt
        jf_n = ends[jf] - i - 1 if isinstance(jf, str) else jf
        if code == _JA:
            k, jt_n, jf_n = jt_n, 0, 0
        out.append((code, jt_n, jf_n, k))
    return [*out, (_RET_K, 0, 0, RET_ALLOW), (_RET_K, 0, 0, refused)]


def machine() -> str | None:
    """This machine's name when :mod:`.syscalls` has its numbers."""
    name = os.uname().machine
    return name if name in syscalls.ARCHES else None


@lru_cache(maxsize=4)
def build(allow_tcp: bool = False, arch: str | None = None) -> bytes:
    """The program for ``arch`` (default: this machine's); ``allow_tcp``: a
    gene granted TCP ports may create a TCP socket (Landlock decides the ports)."""
    arch = arch or machine()
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp table for {os.uname().machine}")
    refused = RET_LOG if _DEBUG_LOG else RET_ERRNO | errno.EPERM
    plain = syscalls.allowed(arch)
    numbers = syscalls.filtered(arch)
    order = [n for n in _HOT if n in plain] + [n for n in plain if n not in _HOT]
    head: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, syscalls.ARCHES[arch]),
        (_RET_K, 0, 0, RET_KILL_PROCESS), (_LD_W_ABS, 0, 0, 0)]
    if arch == "x86_64":  # x32 calls: the same numbers with bit 30 set
        head += [(_JGE_K, 0, 1, 0x40000000), (_RET_K, 0, 0, refused)]
    for name in order:
        head += [(_JEQ_K, 0, 1, plain[name]), (_RET_K, 0, 0, RET_ALLOW)]
    blocks = _blocks(allow_tcp)
    jumps: list[tuple[int, str]] = []
    for name, number in numbers.items():
        head.append((_JEQ_K, 0, 1, number))
        jumps.append((len(head), name))
        head.append((_JA, 0, 0, 0))  # offset filled in below
    head.append((_RET_K, 0, 0, refused))
    body: list[tuple[int, int, int, int]] = []
    starts: dict[str, int] = {}
    for name in numbers:
        starts[name] = len(head) + len(body)
        body += _resolve(blocks[name], refused)
    for at, name in jumps:
        head[at] = (_JA, 0, 0, starts[name] - at - 1)
    return b"".join(pack("=HBBI", *ins) for ins in head + body)
