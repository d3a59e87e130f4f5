"""A gene's private view of the machine: a root of its own holding only the
paths it may read, its own IPC, and an empty network where it sees ``/proc``
(a Node gene).

Landlock decides which files a process may *open*; it does not govern
``stat`` (a gene learned the store's size and times), nor what ``/proc``
tells about the machine (a Node gene, which needs ``/proc/self``, read the
host's sockets in ``/proc/self/net/*`` and its mount table in
``/proc/self/mountinfo``), and a seccomp filter cannot read a path.  So the
child, before anything else of its confinement (:meth:`.kernel.Plan.apply`),
does what bubblewrap and nsjail do:

- ``unshare`` a mount, an IPC and (where ``/proc`` is in its view -- a Node
  gene -- and no TCP port was granted) a network namespace -- as root directly; as an ordinary user inside a user namespace
  of its own that maps only its own uid and gid (``setgroups`` denied), where
  the kernel allows that;
- builds a new root on a small tmpfs: each path it may read is bind-mounted
  at the same place (``/proc`` whole when ``/proc/self`` is allowed: the
  child's ``/proc/self`` then shows its own namespaces), ``/dev/null`` as a
  file, and the temporary folder is a tmpfs of its own (its total size);
- ``pivot_root`` into it and drops the old root.

What the gene then sees: ``stat`` of any other path is ENOENT (the store,
``/etc/passwd``, the rest of the project); ``/proc/self/net`` is the empty
network's (only ``lo``, down); ``/proc/self/mountinfo`` lists the gene's own
mounts.  The paths and the mounts are the same inodes as outside, so the
Landlock rules opened afterwards hold as before.

Only system calls run here (the Python child of the fork server, or a Node
child between fork and exec).
"""

from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_unshare = _libc.unshare
_unshare.restype = ctypes.c_int
_unshare.argtypes = [ctypes.c_int]
_mount = _libc.mount
_mount.restype = ctypes.c_int
_mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                   ctypes.c_char_p]
_umount2 = _libc.umount2
_umount2.restype = ctypes.c_int
_umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWNET = (0x00020000, 0x08000000,
                                                          0x10000000, 0x40000000)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND = 1, 2, 4, 32, 4096
_MS_REC, _MS_PRIVATE = 1 << 14, 1 << 18
_MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, -1)


class ViewError(OSError):
    """A step of building the private view the kernel refused."""


def _check(result: int, what: str) -> None:
    if result < 0:
        err = ctypes.get_errno()
        raise ViewError(err, f"{what}: {os.strerror(err)}")


def under(path: str, top: str) -> bool:
    return top == "/" or path == top or path.startswith(top + "/")


def binds(read: list[str]) -> list[str]:
    """The read paths to bind, outermost first, none inside another (its tree
    is already there); ``/proc/self`` means all of ``/proc``."""
    wanted = sorted({"/proc" if p == "/proc/self" or under(p, "/proc/self") else p
                     for p in read})
    out: list[str] = []
    for path in wanted:
        if not any(under(path, top) for top in out):
            out.append(path)
    return out


def unshare(flags: int) -> bool:
    """``unshare(flags)``; False when the kernel refuses a user namespace
    (no unprivileged user namespaces here), raise otherwise."""
    if _unshare(flags) == 0:
        return True
    err = ctypes.get_errno()
    if flags & CLONE_NEWUSER:
        return False
    raise ViewError(err, f"unshare: {os.strerror(err)}")


def map_self(uid: int, gid: int) -> None:
    """In a new user namespace: only our own uid and gid exist, no setgroups."""
    for name, text in (("uid_map", f"{uid} {uid} 1\n"), ("setgroups", "deny"),
                       ("gid_map", f"{gid} {gid} 1\n")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def enter(read: list[str], devices: list[str], temp: str, temp_options: str) -> None:
    """Build the new root on ``temp`` (shadowed by a tmpfs while this runs) and
    ``pivot_root`` into it; the working folder stays what it was."""
    cwd = os.getcwd()
    _check(_mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "private mounts")
    _check(_mount(b"tmpfs", temp.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                  b"size=1m,nr_inodes=4096,mode=0755"), "the new root")
    new = temp.rstrip("/")
    tops = binds(read)
    # A device inside a bound folder is there already: a mount point made for
    # it would be made in that folder itself, outside the view.
    for path in [*tops, *(d for d in devices if not any(under(d, t) for t in tops))]:
        try:
            is_dir = os.path.isdir(path)
        except OSError:
            continue
        if not os.path.exists(path):
            continue
        target = new + path
        if is_dir:
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600))
        _check(_mount(path.encode(), target.encode(), None, _MS_BIND | _MS_REC, None),
               f"binding {path}")
    os.makedirs(new + temp, exist_ok=True)
    _check(_mount(b"tmpfs", (new + temp).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                  temp_options.encode()), f"tmpfs on {temp}")
    os.chdir(new)
    _check(_syscall(ctypes.c_long(_PIVOT_ROOT), b".", b"."), "pivot_root")
    _check(_umount2(b".", _MNT_DETACH), "dropping the old root")
    _check(_mount(b"none", b"/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID
                  | _MS_NODEV, None), "read-only root")
    os.chdir(cwd)
