"""The store on disk is private: ``.rotifer/`` 0700, every file in it 0600.

Why: with the usual umask (022) a folder is made 0755 and a file 0644, so
any local user could read every agent's memory from ``playground.db``, the
audit log and the agents' specs without running a gene at all.  rotifer makes
what it creates private whatever the umask (folders with :func:`private_dir`,
files with :func:`create_private` or ``mkstemp``, which makes them 0600; SQLite
gives ``-wal`` and ``-shm`` the database file's mode), and opening a store
that others can reach tightens it (:func:`secure`), saying so once on
stderr.  ``rotifer doctor`` reports it (:func:`describe`).

A 0700 folder alone keeps other users out of all it holds; files are 0600 too
so that a folder opened up by hand, or a file copied out of it, stays private.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
#: Group and other bits: any of them set means others may reach it.
_OPEN = 0o077
_said: set[str] = set()


def private_dir(path: Path) -> None:
    """``mkdir -p path`` with ``path`` itself 0700 if it makes it.

    The parents it makes get the umask's mode, as ``mkdir -p`` gives them: a
    project's own folder must stay reachable by the user contained genes run as
    (``nobody`` when rotifer runs as root), which needs its genes' folders;
    only what lies inside ``.rotifer/`` is private."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, DIR_MODE)
        os.chmod(path, DIR_MODE)  # the umask may have taken bits off: exactly 0700


def create_private(path: Path) -> None:
    """Make ``path`` an empty 0600 file if it does not exist (then a library that
    opens it by name, as SQLite does, keeps that mode)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def _is_open(mode: int) -> bool:
    return bool(mode & _OPEN)


def exposed(dot: Path) -> list[Path]:
    """What in ``dot`` (itself included) others may read or enter."""
    found: list[Path] = []
    try:
        if _is_open(os.lstat(dot).st_mode):
            found.append(dot)
    except OSError:
        return found
    for folder, dirs, files in os.walk(dot):
        for name in (*dirs, *files):
            path = Path(folder) / name
            with contextlib.suppress(OSError):
                info = os.lstat(path)
                if not stat.S_ISLNK(info.st_mode) and _is_open(info.st_mode):
                    found.append(path)
    return found


def secure(dot: Path) -> None:
    """Make an existing ``.rotifer/`` private if others can reach it: folders
    0700, files 0600 (says so once on stderr).  One ``stat`` when it is
    private already; what cannot be changed (another user's file) is left."""
    try:
        if not _is_open(os.stat(dot).st_mode):
            return
    except OSError:
        return
    changed = 0
    for path in exposed(dot):
        with contextlib.suppress(OSError):
            os.chmod(path, DIR_MODE if path.is_dir() else FILE_MODE)
            changed += 1
    key = str(Path(dot).resolve())
    if changed and key not in _said:
        _said.add(key)
        print(f"note: {dot} was readable by other users; made it private "
              f"(folders 0700, files 0600: {changed} changed)", file=sys.stderr)


def describe(dot: Path | None) -> str:
    """The store's permissions as ``rotifer doctor`` shows them."""
    if dot is None:
        return "store permissions: no project here (a store rotifer makes is 0700, files 0600)"
    open_ = exposed(dot)
    if not open_:
        return f"store permissions: {dot} is private (0700, files 0600)"
    return (f"store permissions: {dot} is readable by others ({len(open_)} paths, e.g. "
            f"{open_[0]}); the next rotifer command that opens it makes it private")
