"""What a contained gene's child may touch, and whether this machine can enforce it.

A contained child (Python or Node) gets, before any code of its own runs:

- Landlock: read (and execute) only the runtime's files -- the system's
  ``/usr``, ``/lib``, ``/lib64``, ``/etc/ld.so.cache``, the interpreter's
  prefix and installed packages (Python), node's own folder and the pinned
  ``node_modules`` (Node), the rotifer package -- and the gene's own folder;
  write nowhere but a private temporary folder (``$TMPDIR``, removed after the
  run) and ``/dev/null``; no TCP bind or connect except the ports granted at
  ``agent create --allow-tcp``; no signal to and no abstract UNIX socket of a
  process outside its own Landlock domain.
- seccomp: an allowlist (:mod:`rotifer.genes.contain.syscalls`): no new
  socket of any family (but TCP when ports are granted, never MPTCP, never
  ``listen``), no new process (threads only), no metadata change (chmod,
  chown, utime, xattrs), no fanotify/inotify, SysV IPC, shared anonymous
  memory, ptrace, bpf, io_uring, mount, namespaces, keyctl, clock, hostname,
  reboot, ...; ``prlimit64``, ``setpriority``, ``sched_setaffinity`` on the
  child itself only.
- no privileges (:mod:`rotifer.genes.contain.privileges`): when rotifer runs as
  root, the child becomes ``nobody`` (or ``$ROTIFER_GENE_USER``), which must be
  able to reach the gene's folder and the runtime (else GENE_UNAVAILABLE
  naming the closed folder); no capability in any set, securebits locked;
  SIGKILL when its parent dies.
- a root of its own (:mod:`rotifer.genes.contain.view`): only the paths it may
  read are there (``stat`` of anything else: ENOENT); where it sees ``/proc``
  (Node) an empty network (but with granted TCP ports) and its own mounts in
  ``/proc/self/mountinfo``.
- ``no_new_privs``; rlimits: data size (:data:`DEFAULT_MEMORY_MIB`, or the
  agent's ``--gene-memory``), 256 open files, 64 MiB per file written, no core
  dumps; as root also :data:`DEFAULT_TASKS` threads and processes of the genes'
  user; a private tmpfs of :data:`DEFAULT_TEMP_MIB` as the temporary folder
  (its total size; as an ordinary user without user namespaces only the
  per-file cap holds).
- an environment of its own: ``PATH``, ``LANG``, ``HOME`` and ``TMPDIR`` (both
  the temporary folder): no ``ROTIFER_MEMORY_URL``, no credentials.  A Python
  gene's process is forked from the fork server (:mod:`.zygote`), itself
  ``exec``'d with :func:`base_env` only, so the environment block the kernel
  keeps (``/proc/PID/environ``) holds no more than that either.
- no descriptor but its pipes (and stdin/stdout/stderr: ``/dev/null`` and its
  output pipe): a Node gene's process is a fresh ``exec`` started with every
  other descriptor closed; a Python gene's, forked from the fork server, closes
  every other one (the server's own) before any of its code runs.
- its own process group, killed at the end of the run.

Where the kernel cannot (no Landlock ABI :data:`~rotifer.genes.contain.kernel.NEEDED_ABI`,
no seccomp table for the machine), a Python or Node gene is refused
(GENE_UNAVAILABLE) unless the deployer trusts it (``--trust``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from rotifer.genes.errors import GeneUnavailable
from rotifer.memory.signals import signals_deferred

from .launch import base_env

if TYPE_CHECKING:
    from . import kernel

#: The default data-size limit of a contained gene (MiB); ``agent create --gene-memory``.
DEFAULT_MEMORY_MIB = 1024
#: Threads and processes of the genes' user (RLIMIT_NPROC), when rotifer is
#: root and genes run as a user of their own; Node starts about a dozen
#: (``agent create --gene-threads``).
DEFAULT_TASKS = 256
#: The total size of the private temporary folder (a tmpfs, when rotifer is
#: root; ``agent create --gene-temp``).
DEFAULT_TEMP_MIB = 256
#: What the parent passes on of a child's own stdout/stderr, its ``print``,
#: ``ctx.log`` and ``console.log`` together, a run (a flood is cut there;
#: ``agent create --gene-output``).  Here, not in :mod:`.channel`, so that what
#: only reads an agent's spec (``agent list``) does not import the channel.
MAX_OUTPUT_BYTES = 1 << 20
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/localtime")


class Grant:
    """What the deployer allows one gene: ``trusted`` runs it uncontained (in
    this process for Python, a plain child for Node); ``tcp_ports`` it may
    connect to; ``memory_mib`` its data-size limit; ``tasks`` its threads and
    processes and ``temp_mib`` its temporary folder's total size (both enforced
    when rotifer runs as root).

    Frozen, compared and hashed by its fields, as the dataclass it was; a
    plain class for speed (a dataclass costs ~3.5 M instructions to create,
    and every command that reads an agent's grants imports this module)."""

    __slots__ = ("memory_mib", "tasks", "tcp_ports", "temp_mib", "trusted")
    trusted: bool
    tcp_ports: tuple[int, ...]
    memory_mib: int
    tasks: int
    temp_mib: int

    def __init__(self, trusted: bool = False, tcp_ports: tuple[int, ...] = (),
                 memory_mib: int = DEFAULT_MEMORY_MIB, tasks: int = DEFAULT_TASKS,
                 temp_mib: int = DEFAULT_TEMP_MIB) -> None:
        for name, value in (("trusted", trusted), ("tcp_ports", tcp_ports),
                            ("memory_mib", memory_mib), ("tasks", tasks),
                            ("temp_mib", temp_mib)):
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[object, ...]:
        return (self.trusted, self.tcp_ports, self.memory_mib, self.tasks, self.temp_mib)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: a Grant is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: a Grant is frozen")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Grant)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"Grant(trusted={self.trusted!r}, tcp_ports={self.tcp_ports!r}, "
                f"memory_mib={self.memory_mib!r}, tasks={self.tasks!r}, "
                f"temp_mib={self.temp_mib!r})")


CONTAINED = Grant()


def missing() -> list[str]:
    """What this machine lacks to contain a gene (empty: it can)."""
    from . import kernel  # speed: ctypes and the kernel's tables only where genes run

    problems: list[str] = []
    abi = kernel.landlock_abi()
    if abi == 0:
        problems.append("the kernel offers no Landlock (Linux 5.13+ with landlock in the "
                        "lsm= list)")
    elif abi < kernel.NEEDED_ABI:
        problems.append(f"the kernel's Landlock ABI is {abi}; {kernel.NEEDED_ABI} is needed "
                        "(TCP rules need 4, signal and abstract-socket scoping 6)")
    if kernel.seccomp_arch() is None:
        problems.append(f"rotifer has no seccomp filter for this machine ({os.uname().machine})")
    return problems


def require_containment(name: str) -> None:
    """GENE_UNAVAILABLE when a gene cannot be contained here, saying what is missing
    and how to opt out."""
    problems = missing()
    if problems:
        raise GeneUnavailable(
            f"gene '{name}' cannot be contained on this machine: {'; '.join(problems)} "
            f"(see `rotifer doctor`); to run it uncontained, trust it: "
            f"`rotifer agent create ... --trust {name}`, or `--trust` on `rotifer run` and "
            "`rotifer test`")


@lru_cache(maxsize=1)
def _python_read_paths() -> tuple[str, ...]:
    import sysconfig  # speed: only where a Python gene runs contained

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(sys.executable).resolve().parent)}
    for scheme_vars in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        found = sysconfig.get_paths(vars=scheme_vars or None)
        paths.update(found[k] for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    paths.add(str(Path(__file__).resolve().parents[3]))  # where rotifer is imported from
    return tuple(sorted(paths))


def python_read_paths() -> list[str]:
    """The interpreter's files: its prefixes, standard library and installed
    packages, and the rotifer package itself (an editable install's source).
    Worked out once a process (``sysconfig`` is slow for a per-run cost)."""
    return list(_python_read_paths())


def child_env(temp: str) -> dict[str, str]:
    """The whole environment of a contained child: :func:`base_env` and
    ``HOME`` and ``TMPDIR``, both its temporary folder."""
    return {**base_env(), "HOME": temp, "TMPDIR": temp}


class Sandbox:
    """One contained run: its private temporary folder and its prepared plan.
    (Speed: a plain class, not a dataclass: this module is imported by every
    command that reads an agent's grants.)"""

    __slots__ = ("env", "plan", "temp")

    def __init__(self, temp: str, plan: kernel.Plan, env: dict[str, str]) -> None:
        self.temp, self.plan, self.env = temp, plan, env


def _private_folder(prefix: str) -> str:
    """``tempfile.mkdtemp(prefix=prefix)``: a new folder only this user may
    enter (0700, made exclusively), in the first of ``tempfile``'s candidate
    folders (``$TMPDIR``, ``$TEMP``, ``$TMP``, ``/tmp``, ``/var/tmp``,
    ``/usr/tmp``, the working folder) where one can be made.  Speed:
    ``tempfile`` imports ``shutil`` (with zlib, bz2, lzma) and ``random``, ~11 M
    instructions of a contained run before its gene starts.  Where ``tempfile``
    is loaded already (a library user's process, which may have set
    ``tempfile.tempdir``), or no candidate will do, ``tempfile`` decides."""
    if "tempfile" not in sys.modules:
        folders = [os.environ[n] for n in ("TMPDIR", "TEMP", "TMP") if os.environ.get(n)]
        folders += ["/tmp", "/var/tmp", "/usr/tmp"]
        try:
            folders.append(os.getcwd())
        except OSError:
            folders.append(os.curdir)
        for folder in folders:
            for _ in range(100):
                path = os.path.join(os.path.abspath(folder), prefix + os.urandom(6).hex())
                try:
                    os.mkdir(path, 0o700)
                    return path
                except FileExistsError:
                    continue
                except OSError:
                    break
    import tempfile

    return tempfile.mkdtemp(prefix=prefix)


def _remove(temp: str) -> None:
    """Remove the run's temporary folder, whatever the gene left in it.  Speed:
    an empty one (a gene that wrote nothing, or, as root, wrote in the tmpfs of
    its own mount namespace) with ``os.rmdir``; ``shutil.rmtree`` otherwise."""
    try:
        os.rmdir(temp)
    except OSError:
        import shutil

        shutil.rmtree(temp, ignore_errors=True)


@contextmanager
def sandbox(name: str, read: list[str], grant: Grant) -> Iterator[Sandbox]:
    """A private temporary folder and the plan confining a child to ``read`` and
    that folder; the folder is removed afterwards, whatever the gene left in it."""
    from . import kernel, privileges  # speed: these only where a gene runs contained

    require_containment(name)
    user = privileges.gene_user()
    if user is not None:
        for path in read:
            blocked = privileges.unreachable(path, user)
            if blocked is not None:
                raise GeneUnavailable(
                    f"gene '{name}' cannot be contained: {blocked} is closed to "
                    f"{privileges.describe(user)}, the user genes run as when rotifer runs "
                    f"as root, and the gene needs {path}: let others pass (chmod o+x) and "
                    f"read it, or set {privileges.ENV_GENE_USER} to a user that may")
    temp = _private_folder("rotifer-gene-")
    try:
        if user is not None:
            os.chown(temp, *user)
        plan = kernel.Plan(read=[*SYSTEM_READ, *read], write=[temp],
                           tcp_ports=list(grant.tcp_ports),
                           memory_bytes=grant.memory_mib << 20, tasks=grant.tasks,
                           temp_bytes=grant.temp_mib << 20, user=user)
        try:
            plan.prepare()
        except OSError as exc:
            raise GeneUnavailable(f"gene '{name}' cannot be contained: {exc}") from None
        yield Sandbox(temp, plan, child_env(temp))
    finally:
        with signals_deferred():  # rmtree cut by a signal closes a descriptor twice
            _remove(temp)
