"""The agent's audit log (``.rotifer/audit.jsonl``) and the local telemetry file.

The audit log is write-ahead: the store appends the lines for a change *before*
it commits the change, and aborts the change if the lines cannot be written.
Each call appends all of its lines with one ``write(2)`` on a file opened with
``O_APPEND``, so lines from several processes never interleave.  The file is
opened for each append: a log made read-only, moved or deleted is noticed at
the next change, never written around.

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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import storage

DEPLOYER = "deployer"


def telemetry_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Off when ``ROTIFER_TELEMETRY=0`` or ``DO_NOT_TRACK`` is set non-empty."""
    env = os.environ if environ is None else environ
    return env.get("ROTIFER_TELEMETRY") != "0" and not env.get("DO_NOT_TRACK")


def _encode(lines: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(
        json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        for line in lines
    )


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


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
