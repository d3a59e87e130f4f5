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


class _Redirect:
    """The process-wide switch: fd 1 to stderr and ``sys.stdout`` to a
    :class:`LineWriter`, and back.

    Undoing is idempotent and is tried again if an interrupt (a Ctrl-C,
    SIGTERM or deadline signal raised by a Python handler) lands inside it, so
    a process that goes on after an interrupted gene gets its stdout back.  If
    a redirect was left in place all the same (an interrupt between two
    bytecodes of the undo loop), the next redirect undoes it first.
    """

    #: A redirect not yet undone, if any (main thread only).
    active: _Redirect | None = None

    def __init__(self, writer: LineWriter) -> None:
        self.writer = writer
        self.previous = sys.stdout
        self.saved: int | None = None
        self.undone = False

    def do(self) -> None:
        if _Redirect.active is not None:
            _Redirect.active.undo()
        self.previous = sys.stdout  # after that undo: the caller's real stdout
        _Redirect.active = self
        with contextlib.suppress(Exception):
            sys.stdout.flush()  # what the caller printed before stays before
        try:
            self.saved = os.dup(1)
            os.dup2(2, 1)
        except OSError:  # no fd 1 or 2 (closed by the caller): nothing to protect
            self._close_saved()
        sys.stdout = self.writer

    def _close_saved(self) -> None:
        saved, self.saved = self.saved, None
        if saved is not None:
            os.close(saved)

    def _undo_once(self) -> None:
        if self.saved is not None:
            os.dup2(self.saved, 1)  # first: stdout is what matters most
            self._close_saved()
        if sys.stdout is self.writer:
            sys.stdout = self.previous
        if _Redirect.active is self:
            _Redirect.active = None

    def undo(self) -> None:
        interrupt: BaseException | None = None
        for _ in range(5):
            try:
                self._undo_once()
                break
            except BaseException as exc:  # an interrupt landed in the undo: do it again
                interrupt = interrupt or exc
        if not self.undone:
            self.undone = True
            try:
                self.writer.finish()
            except BaseException as exc:
                interrupt = interrupt or exc
        if interrupt is not None:
            raise interrupt


@contextlib.contextmanager
def prints_to_log(name: str, sink: Sink | None) -> Iterator[None]:
    """While the block runs (in the main thread), stdout output goes to ``sink``
    (``[name] line`` on stderr when None) and fd 1 to stderr."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    redirect = _Redirect(LineWriter(name, sink or _stderr_sink))
    try:
        redirect.do()  # inside the try: an interrupt half-way is undone too
        yield
    finally:
        redirect.undo()
