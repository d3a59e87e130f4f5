"""Appending to the audit log file: locked, chained, never torn, kept open.

:mod:`rotifer.memory.audit` says what the lines mean; this module puts them
in the file.  Each call appends all of its lines with one ``write(2)`` on a
file opened with ``O_APPEND``, under an exclusive ``flock``, so lines from
several processes never interleave.

The log is kept open.  Opening and closing it for every change costs more
than the append itself (more still on a slow filesystem); instead the descriptor stays open, and every append,
holding the lock, checks with one ``stat`` of the path that the path still
names the open file with the same permissions: the device, inode and mode
the file had when it was opened.  An inode number cannot be given to another
file while our descriptor holds it open, so the same (device, inode) is the
same file, and that ``stat`` is then the open file's own: its size tells
whether anyone appended since (no ``fstat`` needed).  If not -- the log was moved,
deleted, replaced (rolled over by another process) or made read-only -- the
path is opened again, exactly as if it were opened each time: a read-only
log refuses the open, a removed folder fails it, a new file is appended to.
So a changed log is still noticed at the next change, never written around.

The end of the file as this process left it is remembered too: its size,
and the last line's hash and mark (agent, seq, action).  When the file still has exactly
that size nobody appended since, so the chain link and the check for a
phantom change need no read of the file's tail (which costs a read, a
search for the line's start and a SHA-256 per change otherwise).

Torn lines.  A write can stop part-way: the disk fills up after some of the
bytes went out (the next ``write(2)`` fails with ``ENOSPC``/``EFBIG``), or
the process is killed in a write longer than a page.  The file would then
end in half a line, and the next append would be glued to it.  Therefore an
append that fails after writing part of its bytes cuts them off again
(``ftruncate`` to where it started), and an append that finds the file not
ending in a newline (a writer died mid-line) first cuts that torn last line
off.  A torn line always belongs to a change that was never made: its writer
had not committed yet.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..signals import signals_deferred
from .pending import Known, Mark, earlier_line, line_mark, parsed_mark, phantom_line
from .places import Placed, Places, place
from .text import ENCODER, chain, line_hash

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

#: How far back an append looks for the start of a torn last line.
TAIL_SCAN_BYTES = 1 << 16
#: The first read of the log's tail (most lines are far shorter).
TAIL_READ = 4096
_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC


def _torn_tail(fd: int, size: int, tail: bytes) -> int | None:
    """Where the file's torn last line starts, or ``None`` if it ends in a newline.

    ``tail`` is the file's last bytes as already read.  ``-1`` means there is
    a torn line but its start is further back than :data:`TAIL_SCAN_BYTES`
    (the caller then starts a new line after it).
    """
    if size == 0 or tail.endswith(b"\n"):
        return None
    back = min(size, TAIL_SCAN_BYTES)
    cut = os.pread(fd, back, size - back).rfind(b"\n")
    if cut >= 0:
        return size - back + cut + 1
    return 0 if back == size else -1


def last_line(fd: int, size: int, tail: bytes | None = None) -> bytes | None:
    """The last complete line of the open file (``size`` bytes ending in a newline)."""
    if size == 0:
        return None
    want = TAIL_READ
    data = tail if tail is not None and len(tail) == min(size, want) else b""
    while True:
        if not data:
            data = os.pread(fd, min(size, want), size - min(size, want))
        start = data.rfind(b"\n", 0, len(data) - 1)
        if start >= 0:
            return data[start + 1:-1]
        if len(data) >= size:
            return data[:-1]
        want *= 4
        data = b""


def archives(path: Path) -> list[Path]:
    """The rolled-over files of the log ``path`` (``path.1``, ``path.2``, ...), oldest first."""
    found: list[tuple[int, Path]] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            rest = entry.name[len(path.name) + 1:]
            if entry.name.startswith(path.name + ".") and rest.isdigit() and rest[0] != "0":
                found.append((int(rest), Path(entry.path)))
    return [p for _, p in sorted(found)]


def current_number(path: Path) -> int:
    """The number ``path`` (the live file) will have once it rolls over: one more
    than its newest archive's.  Stable while the live file's lock is held (only
    a holder of that lock rolls it over), so ``(number, offset)`` names a line's
    place for good: the history index (:mod:`.index`) records lines by it."""
    kept = archives(path)
    return int(kept[-1].name.rsplit(".", 1)[1]) + 1 if kept else 1


def _archived_last_hash(path: Path) -> str | None:
    """The chain link to the newest rolled-over file, for a log that starts empty."""
    kept = archives(path)
    if not kept:
        return None
    try:
        fd = os.open(kept[-1], os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        last = last_line(fd, size) if size else None
    finally:
        os.close(fd)
    return None if last is None else line_hash(last)


def write_all(fd: int, data: bytes, start: int) -> None:
    """Write all of ``data``; if that fails part-way, cut off what was written."""
    written = 0
    try:
        while written < len(data):  # one write(2), as a regular file takes an append
            written += os.write(fd, data[written:] if written else data)
    except OSError:
        if written:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
        raise


def _roll_over(path: Path, data: bytes) -> int:
    """Keep the full log as ``path.N`` and start ``path`` with ``data`` (called
    under the old file's lock; the new file appears whole, by rename)."""
    kept = archives(path)
    number = int(kept[-1].name.rsplit(".", 1)[1]) + 1 if kept else 1
    os.link(path, path.with_name(f"{path.name}.{number}"))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, data, 0)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return number


def _lock(fd: int, deferral: signals_deferred) -> None:
    """Take the log's lock; a stop signal while another process holds it ends
    the wait (:meth:`signals_deferred.waiting`), with the lock not kept."""
    if fcntl is None:
        return
    try:
        with deferral.waiting():
            try:  # noqa: SIM105 - a suppress() per append: ~3.7k instructions more
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # no locks on this filesystem: append anyway
                pass
    except BaseException:  # the handler raised: perhaps just after the lock was taken
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        raise


@dataclass
class _Open:
    """The log file this process keeps open, and its end as this process left it."""

    fd: int
    pid: int
    #: The open file's device and inode: the path must still name them.
    dev: int
    ino: int
    #: The path's ``st_mode`` when opened: a change (made read-only) reopens it.
    mode: int
    #: The file's number (:func:`current_number`), read when it was opened.
    number: int = 0
    #: The file's size after our last append (-1: unknown), and its last line's
    #: hash and mark (``None``: not known yet).
    end: int = -1
    last_hash: str | None = None
    last_mark: Mark | None = None
    #: What it knows of the agents' last lines without reading (see .pending).
    known: Known = field(default_factory=Known)


class LogFile:
    """One chained log file, appended to by many processes and threads."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        # Threads of this process share the one descriptor, and a flock does
        # not exclude holders of the same descriptor from each other.
        self._guard = threading.Lock()
        self._open: _Open | None = None

    def close(self) -> None:
        with self._guard:
            self._forget()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._forget()

    def _forget(self) -> None:
        kept, self._open = self._open, None
        if kept is not None and kept.pid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(kept.fd)

    def _locked(self, deferral: signals_deferred) -> tuple[int, os.stat_result]:
        """The log file, locked, and its status: the kept one if the path still
        names it with the same mode, else the path opened again (and kept, if it
        is a regular file).  Reopens if the file rolled over while we waited."""
        kept = self._open
        if kept is not None and kept.pid != os.getpid():
            self._open = kept = None  # inherited over fork: that descriptor is the parent's
        path = str(self.path)
        while True:
            if kept is not None:
                fd = kept.fd
                try:
                    _lock(fd, deferral)
                    # The single-stat check: one ``stat`` of the path against
                    # the device, inode and mode remembered at the open, instead
                    # of ``fstat`` + ``stat`` (a third of an append's time).
                    # Our descriptor keeps the inode alive, so no other file can
                    # have this (device, inode): a match is our file, and the
                    # ``stat`` is its own (its size then tells whether anyone
                    # appended since: ``_append_locked``).
                    now: os.stat_result | None = os.stat(path)
                except FileNotFoundError:  # moved away
                    now = None
                except BaseException:
                    self._release(fd)
                    raise
                if now is not None and now.st_ino == kept.ino and now.st_dev == kept.dev \
                        and now.st_mode == kept.mode:
                    return fd, now
                self._forget()  # not the log any more (or read-only): open the path again
                kept = None
                continue
            fd = os.open(path, _FLAGS, 0o600)
            try:
                _lock(fd, deferral)
                info = os.fstat(fd)
                if fcntl is None or not stat.S_ISREG(info.st_mode):
                    return fd, info
                now = os.stat(path)
            except FileNotFoundError:  # moved away
                now = None
            except BaseException:
                os.close(fd)
                raise
            if now is not None and (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
                self._open = _Open(fd, os.getpid(), info.st_dev, info.st_ino, now.st_mode,
                                   current_number(self.path))
                return fd, info
            os.close(fd)  # rolled over while we waited: append to the new file

    def _release(self, fd: int) -> None:
        kept = self._open
        if kept is not None and kept.fd == fd:
            if fcntl is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
        else:
            os.close(fd)  # also releases the lock

    def append(self, bodies: list[bytes], lines: Sequence[Mapping[str, Any]],
               placed: Placed | Places | None = None, continues: bool = False) -> str:
        """Append the encoded ``bodies`` (of ``lines``), chained, with a
        ``rolled_back`` line first if the log ends in a phantom of this change;
        return the hash of the last line written (the change's anchor).
        ``placed`` gets where each line written went (for the history index).
        ``continues``: the lines go on from this process's last append (the next
        batch of one long change): no phantom of it can be before them."""
        # The stop signals wait until the lock is released: one handled in
        # between would leave it taken, and every appender waiting (see .signals).
        with signals_deferred() as deferral, self._guard:
            fd, info = self._locked(deferral)
            try:
                return self._append_locked(fd, info, bodies, lines, placed, continues)
            finally:
                self._release(fd)

    def _append_locked(self, fd: int, info: os.stat_result, bodies: list[bytes],
                       lines: Sequence[Mapping[str, Any]], placed: Placed | Places | None,
                       continues: bool = False) -> str:
        kept = self._open if self._open is not None and self._open.fd == fd else None
        start = info.st_size
        prefix = b""
        prev: str | None
        if kept is not None and kept.end == start and kept.last_hash is not None:
            # Nobody appended since our last line: the chain needs no read.
            prev, mark = kept.last_hash, kept.last_mark
            foreign = False
        else:
            foreign = True
            regular = stat.S_ISREG(info.st_mode)
            tail = os.pread(fd, min(start, TAIL_READ), start - min(start, TAIL_READ)) \
                if regular and start else b""
            torn = _torn_tail(fd, start, tail) if regular else None
            if torn is not None:
                try:
                    if torn < 0:
                        raise OSError("the torn line starts too far back")
                    os.ftruncate(fd, torn)
                    start = torn
                    tail = os.pread(fd, min(start, TAIL_READ), start - min(start, TAIL_READ))
                except OSError:  # e.g. an append-only file: keep the fragment on its own line
                    prefix = b"\n"
                    tail = b""
            last = last_line(fd, start, tail) if regular and not prefix else None
            prev = line_hash(last) if last is not None else (
                _archived_last_hash(self.path) if regular and start == 0 else None)
            seq = lines[0].get("seq")
            mark = parsed_mark(last, seq) if last is not None and isinstance(seq, int) else None
        known = None if kept is None or prefix else kept.known
        if known is not None:
            known.appending(start, foreign)
        phantom = None if continues else phantom_line(mark, lines[0])
        agent, seq = lines[0].get("agent"), lines[0].get("seq")
        if phantom is None and not continues and not prefix and start \
                and (mark is None or mark[0] != agent) and stat.S_ISREG(info.st_mode) \
                and isinstance(agent, str) and isinstance(seq, int):  # the cheap test first
            # The log's last line is not the agent's: its last numbered line may
            # still be a killed change of this number, further back (.pending).
            earlier = earlier_line(fd, start, agent, seq, known)
            phantom = None if earlier is None else phantom_line(line_mark(earlier), lines[0])
        if phantom is not None:
            bodies = [ENCODER.encode(phantom).encode(), *bodies]
            lines = [phantom, *lines]
        # Each line's digest and length when its place is asked for.
        digests: list[bytes] | None = [] if placed is not None and kept is not None else None
        lengths: list[int] | None = None if digests is None else []
        data, final_hash = chain(bodies, prev, digests, lengths)
        data = prefix + data
        if kept is not None:
            kept.end = -1  # unknown until the write is known to be whole
            kept.known = Known()  # (and what it holds, until then)
        if start and start + len(data) > self.max_bytes and not prefix \
                and stat.S_ISREG(info.st_mode):
            number = _roll_over(self.path, data)
            if digests is not None and lengths is not None and placed is not None:
                place(placed, lines, len(data), number + 1, 0, digests, lengths)
            return final_hash  # the kept descriptor is the archive now: the next append reopens
        write_all(fd, data, start)
        if digests is not None and lengths is not None and placed is not None \
                and kept is not None:
            place(placed, lines, len(data) - len(prefix), kept.number, start + len(prefix),
                   digests, lengths)
        if kept is not None and not prefix:
            kept.end, kept.last_hash = start + len(data), final_hash
            kept.last_mark = line_mark(lines[-1])
            if known is not None:
                kept.known = known
                known.wrote(lines)
        return final_hash


def append_plain(path: Path, data: bytes) -> None:
    """A plain locked append, for the telemetry file (no chain, not kept open)."""
    with signals_deferred() as deferral:
        fd = os.open(path, _FLAGS, 0o600)
        try:
            _lock(fd, deferral)
            write_all(fd, data, os.fstat(fd).st_size)
        finally:
            os.close(fd)
