"""The matches :func:`.history.audit_history` shows, kept in bounded memory.

With a ``limit`` only the newest ``limit`` matches are kept (a bounded deque);
without one, matches are spooled to a temporary file (in memory up to
:data:`SPOOL_IN_MEMORY`) and read back from its end, a block at a time.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import deque
from collections.abc import Iterator
from typing import IO, Any

SPOOL_IN_MEMORY = 8 << 20
BLOCK = 1 << 16


class Matches:
    """The lines to show, kept in bounded memory (see the module doc)."""

    def __init__(self, limit: int | None) -> None:
        self.newest: deque[dict[str, Any]] | None = None if limit is None else deque(maxlen=limit)
        self.spool: IO[bytes] | None = None

    def add(self, line: dict[str, Any]) -> None:
        if self.newest is not None:
            self.newest.append(line)
            return
        if self.spool is None:
            self.spool = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY)  # noqa: SIM115
        self.spool.write(json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass")
                         + b"\n")

    def newest_first(self) -> Iterator[dict[str, Any]]:
        if self.newest is not None:
            kept: Iterator[dict[str, Any]] = reversed(self.newest)
            return kept
        return _backwards(self.spool)


def _backwards(spool: IO[bytes] | None) -> Iterator[dict[str, Any]]:
    """The spooled lines from the last to the first, a block at a time."""
    if spool is None:
        return
    with spool:
        end = spool.seek(0, os.SEEK_END)
        rest = b""
        while end > 0:
            start = max(0, end - BLOCK)
            spool.seek(start)
            data = spool.read(end - start) + rest
            end = start
            parts = data.split(b"\n")
            rest = parts[0] if start > 0 else b""
            for part in reversed(parts if start == 0 else parts[1:]):
                if part:
                    yield json.loads(part.decode("utf-8", "surrogatepass"))
