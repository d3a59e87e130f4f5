"""What the Linux kernel offers to confine a gene's process, called through ctypes.

- Landlock (syscalls 444-446, unprivileged): which files a process may read or
  write, which TCP ports it may bind or connect, and (ABI 6) whether it may
  signal or reach abstract UNIX sockets of processes outside its domain.
- seccomp (a classic-BPF filter built by :mod:`.seccomp`, no libseccomp): an
  allowlist of the system calls CPython and Node need (:mod:`.syscalls`, per
  architecture), some only with certain arguments; every other call EPERM.
- no privileges (:mod:`.privileges`): as root, the genes' own unprivileged
  user; no capability, locked securebits; death with the parent.
- a root, mount, IPC and network namespace of the child's own (:mod:`.view`;
  as an ordinary user inside a user namespace, where the kernel allows one),
  with a tmpfs of a fixed size as its temporary folder.
- ``no_new_privs`` and rlimits (data size, file size, open files, core dumps;
  as root also RLIMIT_NPROC of the genes' user).

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

from . import privileges, seccomp, view

ENV_PRETEND_NO_LANDLOCK = "ROTIFER_PRETEND_NO_LANDLOCK"
#: ``ROTIFER_PRETEND_NO_USERNS=1``: an ordinary user's child does not try a user
#: namespace, as on a kernel that refuses one (the tests of that path use it).
ENV_PRETEND_NO_USERNS = "ROTIFER_PRETEND_NO_USERNS"

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


def seccomp_arch() -> str | None:
    """The machine name when rotifer knows its system call numbers (:mod:`.syscalls`)."""
    return seccomp.machine()


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
    """What the child is confined to, prepared in the parent; :meth:`apply` in the child.

    ``user``: the (uid, gid) the child becomes (rotifer is root; None: it
    keeps rotifer's user); ``tasks``: its RLIMIT_NPROC (threads and processes
    of that user, enforced when the user is the genes' own); ``temp_bytes``:
    the size of the tmpfs mounted on the temporary folder (root only: a mount
    namespace of the child's own); ``parent``: the process whose death kills
    the child (the one forking it)."""

    read: list[str]
    write: list[str]
    devices: list[str] = field(default_factory=lambda: ["/dev/null"])
    tcp_ports: list[int] = field(default_factory=list)
    memory_bytes: int = 1 << 30
    open_files: int = 256
    file_bytes: int = 64 << 20
    temp_bytes: int = 256 << 20
    tasks: int = 256
    user: tuple[int, int] | None = None
    user_ns: bool = True
    parent: int = 0
    top_cap: int = 40
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
        for temp in self.write:  # its view's tmpfs would be bound inside itself (view.py)
            inside = [p for p in self.read if view.under(temp, p)]
            if inside:
                raise ConfineError(errno.EINVAL, f"the temporary folder {temp} lies under "
                                   f"{inside[0]}, which genes read: set TMPDIR elsewhere")
        self._filter = seccomp.build(allow_tcp=bool(self.tcp_ports))
        self.parent = os.getpid()
        self.top_cap = privileges.last_cap()  # read here: the child only makes system calls
        self.user_ns = not os.environ.get(ENV_PRETEND_NO_USERNS)
        return self

    def to_message(self) -> dict[str, object]:
        """The prepared plan as JSON, for the fork server (:mod:`.zygote`)."""
        return {"rules": self._rules, "tcpPorts": self.tcp_ports, "abi": self.abi,
                "memoryBytes": self.memory_bytes, "openFiles": self.open_files,
                "fileBytes": self.file_bytes, "tempBytes": self.temp_bytes,
                "tasks": self.tasks, "user": self.user, "write": self.write,
                "topCap": self.top_cap, "userNs": self.user_ns,
                "filter": base64.b64encode(self._filter).decode("ascii")}

    @classmethod
    def from_message(cls, doc: dict[str, Any], parent: int) -> Plan:
        """The plan :meth:`to_message` sent, ready to :meth:`apply` in a child of ``parent``."""
        user = doc["user"]
        plan = cls(read=[], write=[str(p) for p in doc["write"]],
                   tcp_ports=[int(p) for p in doc["tcpPorts"]],
                   memory_bytes=int(doc["memoryBytes"]), open_files=int(doc["openFiles"]),
                   file_bytes=int(doc["fileBytes"]), temp_bytes=int(doc["tempBytes"]),
                   tasks=int(doc["tasks"]),
                   user=None if user is None else (int(user[0]), int(user[1])),
                   parent=parent, top_cap=int(doc["topCap"]), abi=int(doc["abi"]),
                   user_ns=bool(doc["userNs"]))
        plan._rules = [(str(path), int(rights)) for path, rights in doc["rules"]]
        plan._filter = base64.b64decode(doc["filter"])
        return plan

    def apply(self) -> None:
        """In the child, before any of its own code: rlimits; as root a mount
        and IPC namespace of its own with a tmpfs on the temporary folder; the
        Landlock rules (their paths opened while the child still may); no
        privileges (:func:`.privileges.drop`), death with its parent;
        no_new_privs, Landlock, seccomp (last: it forbids what the steps
        before use)."""
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_DATA, (self.memory_bytes, self.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_bytes, self.file_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))
        if self.user is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (self.tasks, self.tasks))
        owns_ns = self._private_view()
        ruleset = self._ruleset()
        try:
            privileges.drop(self.user, self.top_cap, owns_ns)
            privileges.die_with(self.parent)
            _check(_prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
            _check(_syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_long(ruleset),
                            ctypes.c_long(0)), "landlock_restrict_self")
        finally:
            os.close(ruleset)
        prog = ctypes.create_string_buffer(self._filter, len(self._filter))
        fprog = ctypes.create_string_buffer(
            struct.pack("=HxxxxxxQ", len(self._filter) // 8, ctypes.addressof(prog)), 16)
        _check(_prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0),
               "seccomp")

    def _private_view(self) -> bool:
        """A root, mount, IPC and (with ``/proc`` in the view, without TCP ports)
        network namespace of the child's own (:mod:`.view`): as root directly, as an ordinary user in a
        user namespace of its own.  True when the child holds capabilities in
        it (so :func:`.privileges.drop` can empty the bounding set and lock the
        securebits); False when the kernel allows no user namespace to an
        ordinary user -- the gene then sees the machine's paths and ``/proc``
        (``rotifer doctor`` says so)."""
        write = set(self.write)
        read = [p for p, rights in self._rules if p not in write and not rights & FS_WRITE_FILE]
        devices = [p for p, rights in self._rules if p not in write and rights & FS_WRITE_FILE]
        # A network namespace only where /proc is in the view (a Node gene's
        # /proc/self/net): a Python gene has no /proc and may open no socket,
        # and a new one costs ~5 ms a run.  Granted ports: the host's network.
        shows_net = "/proc/self" in read and not self.tcp_ports
        flags = view.CLONE_NEWNS | view.CLONE_NEWIPC | (view.CLONE_NEWNET if shows_net else 0)
        uid, gid = self.user if self.user is not None else (os.getuid(), os.getgid())
        if self.user is None:
            if not self.user_ns or not view.unshare(flags | view.CLONE_NEWUSER):
                return False
            view.map_self(uid, gid)
        else:
            view.unshare(flags)
        view.enter(read, devices, self.write[0],
                   f"size={self.temp_bytes},mode=0700,uid={uid},gid={gid}")
        return True

    def _ruleset(self) -> int:
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
        except BaseException:
            os.close(ruleset)
            raise
        return ruleset
