"""A gene's output streams (WASI stdout and stderr), as the host receives them.

Each write comes from a WASI host function on the thread running the gene.
A stream may keep what it receives (a command gene's stdout: its output,
up to a cap), pass it on line by line to the gene's log, and remember its
last bytes (stderr: quoted when the run fails).
"""

from __future__ import annotations

from collections.abc import Callable

Emit = Callable[[int, str], None]
"""``emit(level, line)``: a line for the gene's log."""


class OutputStream:
    """One of a gene's output streams: optionally kept (up to ``cap`` bytes),
    its lines passed on to the log, its tail remembered."""

    def __init__(self, *, keep: bool, cap: int, emit: Emit | None, tail: int = 0) -> None:
        self.keep = keep
        self.cap = cap
        self.emit = emit
        self.tail_cap = tail
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflowed = False
        self.tail = b""
        self._pending = b""

    def write(self, data: bytes) -> bool:
        """Take ``data``; False (and nothing taken) once a kept stream would
        pass its cap -- from then on every write is refused."""
        if self.keep:
            if self.overflowed or self.size + len(data) > self.cap:
                self.overflowed = True
                return False
            self.chunks.append(data)
            self.size += len(data)
        if self.tail_cap:
            self.tail = (self.tail + data)[-self.tail_cap:]
        if self.emit is not None:
            self._lines(data)
        return True

    def _lines(self, data: bytes) -> None:
        # At most one log line's worth is held back waiting for its newline.
        pending = (self._pending + data)[-64 * 1024:]
        *lines, self._pending = pending.split(b"\n")
        for line in lines:
            self.emit_line(line)

    def emit_line(self, line: bytes) -> None:
        if self.emit is not None and line.strip():
            self.emit(1, line.rstrip(b"\r").decode("utf-8", errors="replace"))

    def flush(self) -> None:
        """Pass on a last line without a newline."""
        if self._pending:
            self.emit_line(self._pending)
            self._pending = b""

    def detach(self) -> None:
        """Stop passing lines on (the run is over); keeps what was collected."""
        self.emit = None

    def data(self) -> bytes:
        return b"".join(self.chunks)

    def tail_text(self) -> str:
        """The end of the stream on one line (for an error message)."""
        text = self.tail.decode("utf-8", errors="replace").strip()
        return " | ".join(line.strip() for line in text.splitlines() if line.strip())


