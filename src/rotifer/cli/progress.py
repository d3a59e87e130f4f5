"""A progress bar on stderr for long commands (``agent move``, ``export``, ``import``).

Drawn only when stderr is a terminal and ``--quiet`` was not given: a bar,
the entries done (of how many, when known) and the bytes done, redrawn at
most ten times a second on one line, and ended with a newline.  Nothing is
written anywhere else, so scripts that read stdout or stderr see no change.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 24
EVERY_S = 0.1


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


class ProgressBar:
    """Implements :class:`rotifer.memory.transfer.Progress` on a terminal."""

    def __init__(self, label: str, stream: TextIO) -> None:
        self.label = label
        self.stream = stream
        self.entries = 0
        self.nbytes = 0
        self.total_entries: int | None = None
        self.total_bytes: int | None = None
        self._drawn = 0.0
        self._started = False

    def start(self, entries: int | None, nbytes: int | None) -> None:
        self.total_entries, self.total_bytes = entries, nbytes
        self._started = True
        self._draw(force=True)

    def advance(self, entries: int, nbytes: int) -> None:
        self.entries += entries
        self.nbytes += nbytes
        self._draw()

    def finish(self) -> None:
        if self._started:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self._started = False

    def line(self) -> str:
        """The current state as one line of text (without the carriage return)."""
        done, total = (self.nbytes, self.total_bytes) if self.total_bytes else \
            (self.entries, self.total_entries)
        fraction = min(1.0, done / total) if total else 0.0
        filled = int(fraction * WIDTH)
        entries = f"{self.entries:,}" + (f"/{self.total_entries:,}" if self.total_entries
                                         is not None else "")
        nbytes = _size(self.nbytes) + (f"/{_size(self.total_bytes)}" if self.total_bytes
                                       is not None else "")
        return (f"{self.label} [{'#' * filled}{'-' * (WIDTH - filled)}] {fraction:4.0%} "
                f"{entries} entries, {nbytes}")

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._drawn < EVERY_S:
            return
        self._drawn = now
        self.stream.write("\r" + self.line() + "\x1b[K")
        self.stream.flush()


def progress_bar(label: str, *, quiet: bool, stream: TextIO | None = None) -> ProgressBar | None:
    """A bar on ``stream`` (stderr), or None when quiet or not on a terminal."""
    out = stream or sys.stderr
    if quiet or not out.isatty():
        return None
    return ProgressBar(label, out)
