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

Hash chain and sequence numbers.  Every line ends with ``"prev"``: the hex
SHA-256 of the exact bytes of the line before it in the log (without its
newline), or ``null`` for the very first line of a project's log.  The chain
is per file set, not per agent: the log is shared by all agents of a project
(and holds lines of no agent, such as refusals of ``rotifer run``), and one
chain over every line is what makes a removed, edited or reordered line of
*any* kind show.  It continues across rotation (the first line of a new file
names the last line of the file before it).  Every line of a change made in
an agent's transaction also carries ``"seq"``: the agent's change sequence
number (see :mod:`rotifer.memory.changes`), the same on all lines of one
change, one more for each committed change of the agent.  Lines without
``seq`` (``export``, and refusals made before any transaction) change nothing.

A change whose lines were appended but which did not commit is followed by a
``rolled_back`` line naming its ``seq`` (written by the process itself when it
survives; after a crash by the next change of that agent when the phantom
lines are the last lines of the log, else by ``rotifer agent audit verify``).
A later change reusing a ``seq`` also proves the earlier one was never
committed: committed changes of an agent number 1, 2, 3, ... without gaps.

Rotation.  When an append would take ``audit.jsonl`` past ``max_bytes``
(``ROTIFER_AUDIT_MAX_BYTES``, default 64 MiB), the file is kept as
``audit.jsonl.N`` (N = 1, 2, ...: higher is newer) and a new ``audit.jsonl``
starts, its first line chained to the last line of the kept one.  Nothing is
deleted: removing old files is the deployer's decision (``verify`` then
reports that the log starts mid-chain).

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
``import_agent``   an agent was created by ``rotifer agent import``/``move``
``import``         an entry was written by ``rotifer agent import``/``move``
``export``         an agent's memory was copied to a file (changes nothing)
``move``           an agent's memory left for another store (``move_out``:
                   an entry carried, ``move_drop``: an entry left behind)
``rolled_back``    the change numbered ``seq`` was logged but not committed
=================  =========================================================
"""

from __future__ import annotations

import contextlib
import hashlib
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
#: The size at which ``audit.jsonl`` rolls over, unless ROTIFER_AUDIT_MAX_BYTES says.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_BYTES_ENV = "ROTIFER_AUDIT_MAX_BYTES"


def telemetry_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Off when ``ROTIFER_TELEMETRY=0`` or ``DO_NOT_TRACK`` is set non-empty."""
    env = os.environ if environ is None else environ
    return env.get("ROTIFER_TELEMETRY") != "0" and not env.get("DO_NOT_TRACK")


def max_bytes_from_env(environ: Mapping[str, str] | None = None) -> int:
    """``ROTIFER_AUDIT_MAX_BYTES`` (a positive number of bytes), else 64 MiB."""
    text = (os.environ if environ is None else environ).get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise storage(f"{MAX_BYTES_ENV} must be a positive number of bytes, not {text!r}")
    return value


# One encoder for every line: json.dumps with non-default options builds a
# new JSONEncoder on each call, which costs more than encoding a line.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode_lines(lines: Iterable[Mapping[str, Any]]) -> list[str]:
    """Each line as compact JSON (no ``prev`` yet: that is added when appended)."""
    encode = _ENCODER.encode
    return [encode(line) for line in lines]


def _encode(lines: Iterable[Mapping[str, Any]]) -> bytes:
    encode = _ENCODER.encode
    return b"".join(encode(line).encode() + b"\n" for line in lines)


def line_hash(line: bytes) -> str:
    """The chain link: hex SHA-256 of a line's bytes, without its newline."""
    return hashlib.sha256(line).hexdigest()


def _chain(bodies: list[bytes], prev: str | None) -> bytes:
    """Each encoded line (``{...}``, no newline) with ``"prev"`` spliced in as its
    last field, linked to the line before it."""
    out = []
    for body in bodies:
        link = b"null" if prev is None else b'"' + prev.encode() + b'"'
        line = body[:-1] + b',"prev":' + link + b"}"
        out.append(line)
        prev = line_hash(line)
    return b"\n".join(out) + b"\n"


#: How far back an append looks for the start of a torn last line.
TAIL_SCAN_BYTES = 1 << 16
#: The first read of the log's tail (most lines are far shorter).
TAIL_READ = 4096


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


def _phantom_before(last: bytes | None, first: Mapping[str, Any]) -> dict[str, Any] | None:
    """A ``rolled_back`` line when the log's last line is a change of the same
    agent numbered like the one being appended: that change was logged and
    never committed (its writer died; the caller holds the agent, so nobody
    else is between appending and committing)."""
    seq = first.get("seq")
    if last is None or seq is None or first.get("agent") is None \
            or first.get("action") == "rolled_back":  # it says so itself already
        return None
    marker = b'"seq":' + str(seq).encode() + b","
    if marker not in last:
        return None
    try:
        before = json.loads(last)
    except ValueError:
        return None
    if not isinstance(before, dict) or before.get("agent") != first["agent"] \
            or before.get("seq") != seq or before.get("action") == "rolled_back":
        return None
    return rolled_back_line(first["ts"], first["agent"], seq,
                            "found at the next change: its process ended before the commit")


def rolled_back_line(ts: str, agent: str, seq: int, reason: str,
                     actor: str | None = None) -> dict[str, Any]:
    return {"ts": ts, "agent": agent, "action": "rolled_back", "key": None, "category": None,
            "actor": actor, "bytes": 0, "entryId": None, "seq": seq, "reason": reason}


def _open_current(path: str) -> tuple[int, os.stat_result]:
    """The log file, opened and locked, and its ``fstat``; reopened if it rolled
    over while we waited for the lock."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if fcntl is not None:
                with contextlib.suppress(OSError):  # no locks on this filesystem: append anyway
                    fcntl.flock(fd, fcntl.LOCK_EX)
            info = os.fstat(fd)
            if fcntl is None or not stat.S_ISREG(info.st_mode):
                return fd, info
            now = os.stat(path)
        except FileNotFoundError:  # moved away while we waited
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if (now.st_ino, now.st_dev) == (info.st_ino, info.st_dev):
            return fd, info
        os.close(fd)  # rolled over while we waited: append to the new file


def _write_all(fd: int, data: bytes, start: int) -> None:
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


def _roll_over(path: Path, data: bytes) -> None:
    """Keep the full log as ``path.N`` and start ``path`` with ``data`` (called
    under the old file's lock; the new file appears whole, by rename)."""
    kept = archives(path)
    number = int(kept[-1].name.rsplit(".", 1)[1]) + 1 if kept else 1
    os.link(path, path.with_name(f"{path.name}.{number}"))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        _write_all(fd, data, 0)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _append_chained(path: Path, bodies: list[bytes], first: Mapping[str, Any],
                    max_bytes: int) -> None:
    fd, info = _open_current(str(path))
    try:
        start = info.st_size
        regular = stat.S_ISREG(info.st_mode)
        tail = os.pread(fd, min(start, TAIL_READ), start - min(start, TAIL_READ)) \
            if regular and start else b""
        torn = _torn_tail(fd, start, tail) if regular else None
        prefix = b""
        if torn is not None:
            try:
                if torn < 0:
                    raise OSError("the torn line starts too far back")
                os.ftruncate(fd, torn)
                start = torn
                tail = os.pread(fd, min(start, TAIL_READ), start - min(start, TAIL_READ))
            except OSError:  # e.g. an append-only file: keep the fragment on a line of its own
                prefix = b"\n"
                tail = b""
        last = last_line(fd, start, tail) if regular and not prefix else None
        prev = line_hash(last) if last is not None else (
            _archived_last_hash(path) if regular and start == 0 else None)
        phantom = _phantom_before(last, first)
        if phantom is not None:
            bodies = [_ENCODER.encode(phantom).encode(), *bodies]
        data = prefix + _chain(bodies, prev)
        if regular and start and start + len(data) > max_bytes and not prefix:
            _roll_over(path, data)
            return
        _write_all(fd, data, start)
    finally:
        os.close(fd)  # also releases the lock


def _append(path: Path, data: bytes) -> None:
    """A plain locked append, for the telemetry file (no chain)."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if fcntl is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX)
        _write_all(fd, data, os.fstat(fd).st_size)
    finally:
        os.close(fd)


class AuditLog:
    """Appends audit lines and telemetry events for one project."""

    def __init__(self, path: Path | None, telemetry_path: Path | None = None,
                 max_bytes: int | None = None) -> None:
        self.path = path
        self.telemetry_path = telemetry_path
        self.max_bytes = max_bytes_from_env() if max_bytes is None else max_bytes

    def write(self, lines: list[dict[str, Any]], encoded: list[str] | None = None) -> None:
        """Append ``lines`` (``encoded``: the same, already JSON), chained; raise
        MEMORY_STORAGE_ERROR if they cannot be written."""
        if not lines or self.path is None:
            return
        bodies = [text.encode() for text in (encoded or encode_lines(lines))]
        try:
            _append_chained(self.path, bodies, lines[0], self.max_bytes)
        except OSError as exc:
            raise storage(f"cannot write the audit log {self.path}: {exc.strerror or exc}") from exc

    def ends_with(self, agent: str, seq: int, ts: str) -> bool:
        """Is the log's last line one of change ``seq`` of ``agent`` at ``ts``?  For a
        change interrupted inside :meth:`write`: were its lines appended?"""
        if self.path is None:
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            size = os.fstat(fd).st_size
            last = last_line(fd, size) if size and os.pread(fd, 1, size - 1) == b"\n" else None
        except OSError:
            return False
        finally:
            os.close(fd)
        try:
            line = json.loads(last) if last is not None else None
        except ValueError:
            return False
        return isinstance(line, dict) and (line.get("agent"), line.get("seq"), line.get("ts")) \
            == (agent, seq, ts) and line.get("action") != "rolled_back"

    def telemetry(self, event: dict[str, Any]) -> None:
        """Record a local telemetry event; never fails the caller."""
        if self.telemetry_path is None or not telemetry_enabled():
            return
        with contextlib.suppress(OSError):  # best effort; the audit line is what counts
            _append(self.telemetry_path, _encode([event]))
