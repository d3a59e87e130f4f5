"""What the Linux kernel offers to confine a gene's process, called through ctypes.

- Landlock (syscalls 444-446, unprivileged): which files a process may read or
  write, which TCP ports it may bind or connect, and (ABI 6) whether it may
  signal or reach abstract UNIX sockets of processes outside its domain.
- seccomp (a small classic-BPF filter built here, no libseccomp): which system
  calls it may make at all -- here no new socket of any family, no ptrace,
  process_vm_*, bpf, io_uring, mount, unshare, setns, keyctl, and no new
  process (only threads).
- ``no_new_privs`` and rlimits.

Everything here only *builds* data (:class:`Plan`) in the parent and applies it
with plain system calls in the child (:meth:`Plan.apply`): between ``fork``
and ``exec`` for a Node gene -- no import, no lock, nothing that a forked copy
of a threaded process could deadlock on; both Landlock and seccomp survive
``exec`` -- and in the child the Python fork server forked for a Python gene,
which gets the plan as a message (:meth:`Plan.to_message`).

``ROTIFER_PRETEND_NO_LANDLOCK=1`` makes :func:`landlock_abi` answer 0 (the tests
of the "kernel cannot confine" path use it; the real detection is tested too).
"""

from __future__ import annotations

import base64
import ctypes
import errno
import os
import resource
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

ENV_PRETEND_NO_LANDLOCK = "ROTIFER_PRETEND_NO_LANDLOCK"

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2

# Landlock file-system rights (uapi/linux/landlock.h) and the ABI that brought them.
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1 = (1 << 13) - 1          # EXECUTE .. MAKE_SYM
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1

#: The ABI each promise needs: files (1), truncation (3), TCP (4), signals and
#: abstract UNIX sockets scoped (6).
NEEDED_ABI = 6

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_prctl = _libc.prctl
_prctl.restype = ctypes.c_int
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class ConfineError(OSError):
    """A confinement step the kernel refused (raised in the child, before exec)."""


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise ConfineError(err, f"{what}: {os.strerror(err)}")
    return result


def real_landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none, or disabled)."""
    result = _syscall(ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_long(0),
                      ctypes.c_long(_CREATE_RULESET_VERSION))
    return max(int(result), 0)


def landlock_abi() -> int:
    """:func:`real_landlock_abi`, or 0 when ``$ROTIFER_PRETEND_NO_LANDLOCK`` is set."""
    if os.environ.get(ENV_PRETEND_NO_LANDLOCK):
        return 0
    return _cached_abi()


@lru_cache(maxsize=1)
def _cached_abi() -> int:
    return real_landlock_abi()


# -- seccomp ----------------------------------------------------------------------

#: (audit arch, syscall numbers denied with EPERM, clone, clone3, x32 bit) per machine.
_DENIED_NAMES = ("socket", "socketpair", "ptrace", "process_vm_readv", "process_vm_writev",
                 "bpf", "io_uring_setup", "io_uring_enter", "io_uring_register", "mount",
                 "umount2", "unshare", "setns", "keyctl", "add_key", "request_key",
                 "perf_event_open", "userfaultfd", "kexec_load", "init_module", "finit_module",
                 "pivot_root", "chroot", "open_by_handle_at", "fork", "vfork",
                 "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
                 "mount_setattr")
_X86_64 = {"socket": 41, "socketpair": 53, "ptrace": 101, "process_vm_readv": 310,
           "process_vm_writev": 311, "bpf": 321, "io_uring_setup": 425, "io_uring_enter": 426,
           "io_uring_register": 427, "mount": 165, "umount2": 166, "unshare": 272,
           "setns": 308, "keyctl": 250, "add_key": 248, "request_key": 249,
           "perf_event_open": 298, "userfaultfd": 323, "kexec_load": 246, "init_module": 175,
           "finit_module": 313, "pivot_root": 155, "chroot": 161, "open_by_handle_at": 304,
           "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "open_tree": 428,
           "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
           "mount_setattr": 442}
_AARCH64 = {"socket": 198, "socketpair": 199, "ptrace": 117, "process_vm_readv": 270,
            "process_vm_writev": 271, "bpf": 280, "io_uring_setup": 425, "io_uring_enter": 426,
            "io_uring_register": 427, "mount": 40, "umount2": 39, "unshare": 97, "setns": 268,
            "keyctl": 219, "add_key": 217, "request_key": 218, "perf_event_open": 241,
            "userfaultfd": 282, "kexec_load": 104, "init_module": 105, "finit_module": 273,
            "pivot_root": 41, "chroot": 51, "open_by_handle_at": 265, "clone": 220,
            "clone3": 435, "open_tree": 428, "move_mount": 429, "fsopen": 430,
            "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442}
_ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}

_CLONE_THREAD = 0x00010000
#: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME.
_CLONE_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000 | 0x00000080
_RET_ALLOW, _RET_ERRNO, _RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _AND_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06


def seccomp_arch() -> str | None:
    """The machine name when this module knows its system call numbers."""
    machine = os.uname().machine
    return machine if machine in _ARCHES else None


def seccomp_filter(allow_tcp: bool = False) -> bytes:
    """The BPF program (``struct sock_filter[]``): the denied calls fail with
    EPERM, ``clone3`` with ENOSYS (so the C library falls back to ``clone``,
    whose flags a filter can see), ``clone`` is allowed only for a thread and
    never with a new namespace, a foreign architecture or x32 call kills.
    ``allow_tcp``: ``socket(AF_INET or AF_INET6, SOCK_STREAM)`` is allowed (a
    gene granted TCP ports; Landlock then decides which ports)."""
    machine = seccomp_arch()
    if machine is None:
        raise ConfineError(errno.ENOSYS, f"no seccomp table for {os.uname().machine}")
    arch, numbers = _ARCHES[machine]
    denied = [numbers[name] for name in _DENIED_NAMES if name in numbers]
    allow, eperm, enosys = -1, -2, -3  # labels, resolved below
    ins: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, 4),                                          # arch
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, 0),                                          # nr
    ]
    if allow_tcp:
        ins += [(_JEQ_K, 0, 6, numbers["socket"]),
                (_LD_W_ABS, 0, 0, 16),                                 # domain
                (_JEQ_K, 1, 0, 2),                                     # AF_INET
                (_JEQ_K, 0, eperm, 10),                                # AF_INET6
                (_LD_W_ABS, 0, 0, 24),                                 # type
                (_AND_K, 0, 0, 0xF),
                (_JEQ_K, allow, eperm, 1)]                             # SOCK_STREAM
    if machine == "x86_64":
        ins.append((_JGE_K, eperm, 0, 0x40000000))                    # x32
    ins += [(_JEQ_K, eperm, 0, nr) for nr in denied]
    ins += [(_JEQ_K, enosys, 0, numbers["clone3"]),
            (_JEQ_K, 0, allow, numbers["clone"]),
            (_LD_W_ABS, 0, 0, 16),                                     # clone's flags
            (_JSET_K, eperm, 0, _CLONE_NEW_NAMESPACES),
            (_JSET_K, allow, eperm, _CLONE_THREAD),                    # a thread, or EPERM
            (_RET_K, 0, 0, _RET_ALLOW),
            (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
            (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    labels = {allow: len(ins) - 3, eperm: len(ins) - 2, enosys: len(ins) - 1}
    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(ins):
        jt = labels[jt] - i - 1 if jt < 0 else jt
        jf = labels[jf] - i - 1 if jf < 0 else jf
        out += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(out)


# -- the plan ---------------------------------------------------------------------

#: Rights on the private temporary folder: everything but devices.
_TEMP_RIGHTS = _FS_ABI1 & ~((1 << 6) | (1 << 11))


def _fs_handled(abi: int) -> int:
    rights = _FS_ABI1
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


@dataclass
class Plan:
    """What the child is confined to, prepared in the parent; :meth:`apply` in the child."""

    read: list[str]
    write: list[str]
    devices: list[str] = field(default_factory=lambda: ["/dev/null"])
    tcp_ports: list[int] = field(default_factory=list)
    memory_bytes: int = 1 << 30
    open_files: int = 256
    file_bytes: int = 64 << 20
    abi: int = 0
    _rules: list[tuple[str, int]] = field(default_factory=list, repr=False)
    _filter: bytes = b""

    def prepare(self) -> Plan:
        """Resolve the rules (which path gets which rights) and build the seccomp
        filter, so that :meth:`apply` only makes system calls."""
        self.abi = landlock_abi()
        if self.abi < 1:
            raise ConfineError(errno.ENOSYS, "the kernel offers no Landlock")
        handled = _fs_handled(self.abi)
        rules: list[tuple[str, int]] = []
        for paths, rights in ((self.read, FS_READ), (self.write, _TEMP_RIGHTS | FS_READ),
                              (self.devices, FS_READ_FILE | FS_WRITE_FILE)):
            for path in paths:
                try:
                    is_dir = os.path.isdir(path)
                    os.stat(path)
                except OSError:
                    continue
                mask = rights & handled
                rules.append((path, mask if is_dir else mask & _FILE_RIGHTS))
        self._rules = rules
        self._filter = seccomp_filter(allow_tcp=bool(self.tcp_ports))
        return self

    def to_message(self) -> dict[str, object]:
        """The prepared plan as JSON, for the fork server (:mod:`.zygote`)."""
        return {"rules": self._rules, "tcpPorts": self.tcp_ports, "abi": self.abi,
                "memoryBytes": self.memory_bytes, "openFiles": self.open_files,
                "fileBytes": self.file_bytes,
                "filter": base64.b64encode(self._filter).decode("ascii")}

    @classmethod
    def from_message(cls, doc: dict[str, Any]) -> Plan:
        """The plan :meth:`to_message` sent, ready to :meth:`apply`."""
        plan = cls(read=[], write=[], tcp_ports=[int(p) for p in doc["tcpPorts"]],
                   memory_bytes=int(doc["memoryBytes"]), open_files=int(doc["openFiles"]),
                   file_bytes=int(doc["fileBytes"]), abi=int(doc["abi"]))
        plan._rules = [(str(path), int(rights)) for path, rights in doc["rules"]]
        plan._filter = base64.b64decode(doc["filter"])
        return plan

    def apply(self) -> None:
        """In the child, before any of its own code: rlimits, no_new_privs,
        Landlock, seccomp (last: it forbids what the steps before use)."""
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_DATA, (self.memory_bytes, self.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_bytes, self.file_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))
        _check(_prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        handled_net = NET_BIND_TCP | NET_CONNECT_TCP if self.abi >= 4 else 0
        scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if self.abi >= 6 else 0
        attr = struct.pack("=QQQ", _fs_handled(self.abi), handled_net, scoped)
        size = 8 if self.abi < 4 else 16 if self.abi < 6 else 24
        ruleset = _check(_syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.c_char_p(attr),
                                  ctypes.c_long(size), ctypes.c_long(0)), "landlock ruleset")
        try:
            for path, rights in self._rules:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    rule = struct.pack("=Qi", rights, fd)
                    _check(_syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_long(ruleset),
                                    ctypes.c_long(_RULE_PATH_BENEATH), ctypes.c_char_p(rule),
                                    ctypes.c_long(0)), f"landlock rule for {path}")
                finally:
                    os.close(fd)
            if handled_net:
                for port in self.tcp_ports:
                    rule = struct.pack("=QQ", NET_CONNECT_TCP, port)
                    _check(_syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_long(ruleset),
                                    ctypes.c_long(_RULE_NET_PORT), ctypes.c_char_p(rule),
                                    ctypes.c_long(0)), f"landlock rule for port {port}")
            _check(_syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_long(ruleset),
                            ctypes.c_long(0)), "landlock_restrict_self")
        finally:
            os.close(ruleset)
        prog = ctypes.create_string_buffer(self._filter, len(self._filter))
        fprog = ctypes.create_string_buffer(
            struct.pack("=HxxxxxxQ", len(self._filter) // 8, ctypes.addressof(prog)), 16)
        _check(_prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0),
               "seccomp")
