"""Appending to the audit log: :class:`AuditLog`, its size limit and the telemetry file
(what the lines mean: :mod:`rotifer.memory.audit`)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import storage
from .actions import ROLLED_BACK
from .file import LogFile, append_plain, last_line
from .places import Placed, Places
from .text import ENCODER

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

    def write(self, lines: list[dict[str, Any]], encoded: list[str] | None = None,
              placed: Placed | Places | None = None, continues: bool = False) -> str:
        """Append ``lines`` (``encoded``: the same, already JSON), chained; raise
        MEMORY_STORAGE_ERROR if they cannot be written.  Returns the hash of the
        last line written (``""`` when nothing is kept): the change's anchor.
        ``placed`` gets where each line went (see :func:`.file.current_number`).
        ``continues``: the next batch of lines this log's last write began (one
        long change): no ``rolled_back`` line for an earlier change goes first."""
        if not lines or self._file is None:
            return ""
        texts = encoded or encode_lines(lines)
        # speed: one line (most changes') without a list comprehension's frame
        bodies = [texts[0].encode()] if len(texts) == 1 else [text.encode() for text in texts]
        try:
            return self._file.append(bodies, lines, placed, continues)
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
            == (agent, seq, ts) and line.get("action") != ROLLED_BACK

    def telemetry(self, event: dict[str, Any]) -> None:
        """Record a local telemetry event; never fails the caller."""
        if self.telemetry_path is None or not telemetry_enabled():
            return
        with contextlib.suppress(OSError):  # best effort; the audit line is what counts
            append_plain(self.telemetry_path, _encode([event]))
