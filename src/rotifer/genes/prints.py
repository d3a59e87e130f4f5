"""Where a Python gene's ``print()`` goes: to its log, never to stdout.

stdout belongs to the command's result (``rotifer run ... | jq`` must see one
JSON document and nothing else), so while a Python gene runs, ``sys.stdout``
is a writer that hands each complete line to the log sink (``[gene] line`` on
stderr in the CLI, like ``ctx.log``), and file descriptor 1 points at stderr,
so ``os.write(1, ...)``, ``print(..., file=sys.__stdout__)`` and child
processes the gene starts cannot reach stdout either (those lines arrive
without the ``[gene]`` prefix: they never pass through Python's ``sys.stdout``).

Both are process-wide, so they are switched only in the main thread (where the
CLI runs genes); a gene run in another thread prints where the caller's
``sys.stdout`` points.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Callable, Iterator

Sink = Callable[[str, str], None]


class LineWriter(io.TextIOBase):
    """A text stream that calls ``sink(name, line)`` once per complete line
    (the last, unfinished line when :meth:`finish` is called)."""

    def __init__(self, name: str, sink: Sink) -> None:
        super().__init__()
        self._name = name
        self._sink = sink
        self._pending: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        rest = text
        while "\n" in rest:
            line, rest = rest.split("\n", 1)
            self._sink(self._name, "".join(self._pending) + line)
            self._pending.clear()
        if rest:
            self._pending.append(rest)
        return len(text)

    def finish(self) -> None:
        if self._pending:
            line = "".join(self._pending)
            self._pending.clear()
            self._sink(self._name, line)


def _stderr_sink(name: str, line: str) -> None:
    print(f"[{name}] {line}", file=sys.stderr)


@contextlib.contextmanager
def prints_to_log(name: str, sink: Sink | None) -> Iterator[None]:
    """While the block runs (in the main thread), stdout output goes to ``sink``
    (``[name] line`` on stderr when None) and fd 1 to stderr."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with contextlib.suppress(Exception):
        sys.stdout.flush()  # what the caller printed before stays before
    saved: int | None = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no fd 1 or 2 (closed by the caller): nothing to protect
        if saved is not None:
            os.close(saved)
            saved = None
    writer = LineWriter(name, sink or _stderr_sink)
    previous = sys.stdout
    sys.stdout = writer
    try:
        yield
    finally:
        sys.stdout = previous
        try:
            writer.finish()
        finally:
            if saved is not None:
                os.dup2(saved, 1)
                os.close(saved)
