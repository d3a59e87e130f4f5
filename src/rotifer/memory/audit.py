"""The agent's audit log (``.rotifer/audit.jsonl``) and the local telemetry file.

The audit log is write-ahead: the store appends the lines for a change *before*
it commits the change, and aborts the change if the lines cannot be written.
How lines reach the file -- one locked ``O_APPEND`` write per change, a file
kept open but checked at every append to still be the log (so a log made
read-only, moved or deleted is noticed at the next change, never written
around), torn lines cut off -- is :mod:`rotifer.memory.audit_file`.  Every
complete line is one JSON object, and a line can be missing its end only at
the very end of the file, until the next append.

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
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .audit_file import LogFile, append_plain, archives, last_line
from .audit_text import ENCODER, line_hash, rolled_back_line
from .errors import storage

__all__ = ["DEPLOYER", "AuditLog", "archives", "encode_lines", "line_hash", "rolled_back_line",
           "telemetry_enabled"]

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


def encode_lines(lines: Iterable[Mapping[str, Any]]) -> list[str]:
    """Each line as compact JSON (no ``prev`` yet: that is added when appended)."""
    encode = ENCODER.encode
    return [encode(line) for line in lines]


def _encode(lines: Iterable[Mapping[str, Any]]) -> bytes:
    encode = ENCODER.encode
    return b"".join(encode(line).encode() + b"\n" for line in lines)


class AuditLog:
    """Appends audit lines and telemetry events for one project."""

    def __init__(self, path: Path | None, telemetry_path: Path | None = None,
                 max_bytes: int | None = None) -> None:
        self.path = path
        self.telemetry_path = telemetry_path
        self.max_bytes = max_bytes_from_env() if max_bytes is None else max_bytes
        self._file = None if path is None else LogFile(path, self.max_bytes)

    def close(self) -> None:
        """Close the log file if it is kept open (the next append opens it again)."""
        if self._file is not None:
            self._file.close()

    def write(self, lines: list[dict[str, Any]], encoded: list[str] | None = None) -> str:
        """Append ``lines`` (``encoded``: the same, already JSON), chained; raise
        MEMORY_STORAGE_ERROR if they cannot be written.  Returns the hash of the
        last line written (``""`` when nothing is kept): the change's anchor."""
        if not lines or self._file is None:
            return ""
        bodies = [text.encode() for text in (encoded or encode_lines(lines))]
        try:
            return self._file.append(bodies, lines)
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
            append_plain(self.telemetry_path, _encode([event]))
