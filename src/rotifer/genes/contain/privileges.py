"""Who a contained child is: no capability, and never root.

Before any gene code runs, the child (:meth:`.kernel.Plan.apply`):

- when rotifer runs as root, becomes the unprivileged user genes run as
  (:func:`gene_user`: ``nobody``/``nogroup`` unless the deployer sets
  ``ROTIFER_GENE_USER``): no supplementary group (``setgroups([])`` first),
  then ``setresgid`` and ``setresuid``, so even a call the seccomp filter
  missed meets an ordinary user's permissions -- and that user owns none of
  the store, the runtime or rotifer's processes;
- drops every capability: the bounding set (each one, while it still may:
  ``CAP_SETPCAP``), the effective, permitted and inheritable sets
  (``capset`` to zero) and the ambient set; and locks the securebits
  (``SECBIT_NOROOT``, ``NO_SETUID_FIXUP``, ``KEEP_CAPS``,
  ``NO_CAP_AMBIENT_RAISE``, each with its lock), so nothing the process
  executes later gets a capability back, not even a root-owned program;
- dies with its parent (``PR_SET_PDEATHSIG``, SIGKILL), set after the change of
  user (a change of credentials clears it) and then checked against the race
  (the parent may have died before it was set: ``getppid`` is then another
  process and the child exits at once).

As an ordinary user rotifer has no capability to give away: the child's sets
are empty already.  In the user namespace of its own (:mod:`.view`) it holds
every capability *there* until this drops them, so it empties its bounding set
and locks the securebits as root's child does (``owns_ns``); where the kernel
allows no such namespace, those two steps need ``CAP_SETPCAP`` and are skipped
(harmless under ``no_new_privs``: no ``exec`` gains a capability), and
``rotifer doctor`` shows what a probe child really holds.

Why ``nobody`` and not a range of uids per gene (as Android gives each app):
one uid is what a deployer can reason about, and genes of the same rotifer are
kept apart by Landlock (each child is its own domain: no signal, no abstract
socket across) and by the seccomp filter (no ptrace, no process_vm_*); a
deployer who shares ``nobody`` with other services sets ``ROTIFER_GENE_USER``
to a user of its own (``useradd --system rotifer-genes``).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found,unused-ignore]  # speed: not signal's enums
import ctypes
import os
import pwd
import stat
import struct
from functools import lru_cache

from rotifer.genes.errors import GeneUnavailable

ENV_GENE_USER = "ROTIFER_GENE_USER"
DEFAULT_GENE_USER = "nobody"

_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT = 1, 24, 28, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
#: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS (off), NO_CAP_AMBIENT_RAISE, and the lock of each.
SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.restype = ctypes.c_int
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_capset = _libc.capset
_capset.restype = ctypes.c_int
_capset.argtypes = [ctypes.c_char_p, ctypes.c_char_p]


class PrivilegeError(OSError):
    """A step of dropping privileges the kernel refused (in the child)."""


def _check(result: int, what: str) -> None:
    if result < 0:
        err = ctypes.get_errno()
        raise PrivilegeError(err, f"{what}: {os.strerror(err)}")


@lru_cache(maxsize=1)
def last_cap() -> int:
    """The highest capability number this kernel knows."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40


def gene_user() -> tuple[int, int] | None:
    """(uid, gid) genes run as when rotifer is root; None when it is not (genes
    then run as rotifer's own user).  ``ROTIFER_GENE_USER``: a user name, or
    ``UID:GID``; never root."""
    if os.geteuid() != 0:
        return None
    return _lookup(os.environ.get(ENV_GENE_USER) or DEFAULT_GENE_USER)


@lru_cache(maxsize=4)
def _lookup(spec: str) -> tuple[int, int]:
    try:
        if ":" in spec:
            uid_text, gid_text = spec.split(":", 1)
            uid, gid = int(uid_text), int(gid_text)
        else:
            entry = pwd.getpwnam(spec)
            uid, gid = entry.pw_uid, entry.pw_gid
    except (KeyError, ValueError):
        raise GeneUnavailable(f"{ENV_GENE_USER}={spec!r}: no such user (a user name, or "
                              "UID:GID); genes run as an unprivileged user when rotifer "
                              "runs as root") from None
    if uid == 0 or gid == 0:
        raise GeneUnavailable(f"{ENV_GENE_USER}={spec!r}: genes never run as root (uid or "
                              "gid 0)")
    return uid, gid


def describe(user: tuple[int, int] | None) -> str:
    """``nobody (uid 65534, gid 65534)``, or rotifer's own user."""
    uid, gid = user if user is not None else (os.getuid(), os.getgid())
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    return f"{name} (uid {uid}, gid {gid})"


def _may(st: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    """Would ``uid``/``gid`` (no supplementary group) get ``bits`` (r=4, x=1) by mode?"""
    if st.st_uid == uid:
        shift = 6
    elif st.st_gid == gid:
        shift = 3
    else:
        shift = 0
    return (st.st_mode >> shift) & bits == bits


def unreachable(path: str, user: tuple[int, int]) -> str | None:
    """The first folder on the way to ``path`` (or ``path`` itself) that
    ``user`` cannot pass through or read, judged by the mode bits; None: it can."""
    uid, gid = user
    real = os.path.realpath(path)
    parts = real.strip("/").split("/")
    for i in range(len(parts) + 1):
        here = "/" + "/".join(parts[:i])
        try:
            st = os.stat(here)
        except OSError:
            return None  # missing: Landlock's rule is skipped for it anyway
        last = i == len(parts)
        need = (4 | (1 if stat.S_ISDIR(st.st_mode) else 0)) if last else 1
        if not _may(st, uid, gid, need):
            return here
    return None


def drop(user: tuple[int, int] | None, top_cap: int, owns_ns: bool = False) -> None:
    """In the child: become ``user`` (when given: rotifer is root) and hold no
    capability, with the bounding set emptied and the securebits locked where
    the child may (as root, or in a user namespace of its own: ``owns_ns``)."""
    privileged = user is not None or owns_ns
    for cap in range(top_cap + 1):
        if _prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 and privileged:
            _check(-1, f"dropping capability {cap} from the bounding set")
    if privileged:
        _check(_prctl(_PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0), "locking the securebits")
    if user is not None:
        uid, gid = user
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    header = struct.pack("=Ii", _CAPABILITY_VERSION_3, 0)
    _check(_capset(header, bytes(24)), "clearing the capability sets")
    _check(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient")


def die_with(parent: int) -> None:
    """In the child: SIGKILL when ``parent`` dies; if it already has, exit now."""
    _check(_prctl(_PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0), "parent-death signal")
    if os.getppid() != parent:
        os._exit(70)
