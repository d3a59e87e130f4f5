"""The agent's audit log (``.rotifer/audit.jsonl``) and the local telemetry file.

The audit log is write-ahead: the store appends the lines for a change *before*
it commits the change, and aborts the change if the lines cannot be written.
Each call appends all of its lines with one ``write(2)`` on a file opened with
``O_APPEND``, under an exclusive ``flock`` on the file, so lines from several
processes never interleave.  The file is opened for each append: a log made
read-only, moved or deleted is noticed at the next change, never written
around.

Torn lines.  A write can stop part-way: the disk fills up after some of the
bytes went out (the next ``write(2)`` fails with ``ENOSPC``/``EFBIG``), or
the process is killed in a write longer than a page.  The file would then end
in half a line, and the next append would be glued to it -- so the next
change, which *is* made, would have no readable audit line.  Therefore:

- an append that fails after writing part of its bytes cuts them off again
  (``ftruncate`` to where it started), then reports the failure; and
- an append that finds the file not ending in a newline (a writer died
  mid-line) first cuts that torn last line off.  A torn line always belongs
  to a change that was never made: its writer had not committed yet.

So every complete line is one JSON object, and a line can be missing its end
only at the very end of the file, until the next append.

Action names (the ``action`` field):

=================  =========================================================
``write``          a new entry was created
``update``         an existing entry was replaced
``delete``         a gene deleted an entry
``evict``          an entry was removed to make room for a write
``expire``         an expired entry was removed
``quota_exceeded`` a write was refused for lack of space (nothing written)
``access_denied``  a read, write, query or delete was refused
``deployer_delete`` the deployer deleted an entry (``actor`` is ``deployer``)
``drop_agent``     an agent's whole memory was removed
``import``         an entry was written by ``rotifer agent import``/``move``
=================  =========================================================
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import storage

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

DEPLOYER = "deployer"


def telemetry_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Off when ``ROTIFER_TELEMETRY=0`` or ``DO_NOT_TRACK`` is set non-empty."""
    env = os.environ if environ is None else environ
    return env.get("ROTIFER_TELEMETRY") != "0" and not env.get("DO_NOT_TRACK")


# One encoder for every line: json.dumps with non-default options builds a
# new JSONEncoder on each call, which costs more than encoding a line.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _encode(lines: Iterable[Mapping[str, Any]]) -> bytes:
    encode = _ENCODER.encode
    return b"".join(encode(line).encode() + b"\n" for line in lines)


#: How far back an append looks for the start of a torn last line.
TAIL_SCAN_BYTES = 1 << 16


def _torn_tail(fd: int, size: int) -> int | None:
    """Where the file's torn last line starts, or ``None`` if it ends in a newline.

    ``-1`` means there is a torn line but its start is further back than
    :data:`TAIL_SCAN_BYTES` (the caller then starts a new line after it).
    """
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return None
    back = min(size, TAIL_SCAN_BYTES)
    cut = os.pread(fd, back, size - back).rfind(b"\n")
    if cut >= 0:
        return size - back + cut + 1
    return 0 if back == size else -1


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if fcntl is not None:
            with contextlib.suppress(OSError):  # no locks on this filesystem: append anyway
                fcntl.flock(fd, fcntl.LOCK_EX)
        info = os.fstat(fd)
        start = info.st_size
        torn = _torn_tail(fd, start) if stat.S_ISREG(info.st_mode) else None
        if torn is not None:
            try:
                if torn < 0:
                    raise OSError("the torn line starts too far back")
                os.ftruncate(fd, torn)
                start = torn
            except OSError:  # e.g. an append-only file: keep the fragment on a line of its own
                data = b"\n" + data
        written = 0
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                written += n
                view = view[n:]
        except OSError:
            if written:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
            raise
    finally:
        os.close(fd)  # also releases the lock


class AuditLog:
    """Appends audit lines and telemetry events for one project."""

    def __init__(self, path: Path | None, telemetry_path: Path | None = None) -> None:
        self.path = path
        self.telemetry_path = telemetry_path

    def write(self, lines: list[dict[str, Any]]) -> None:
        """Append ``lines``; raise MEMORY_STORAGE_ERROR if they cannot be written."""
        if not lines or self.path is None:
            return
        try:
            _append(self.path, _encode(lines))
        except OSError as exc:
            raise storage(f"cannot write the audit log {self.path}: {exc.strerror or exc}") from exc

    def telemetry(self, event: dict[str, Any]) -> None:
        """Record a local telemetry event; never fails the caller."""
        if self.telemetry_path is None or not telemetry_enabled():
            return
        with contextlib.suppress(OSError):  # best effort; the audit line is what counts
            _append(self.telemetry_path, _encode([event]))
