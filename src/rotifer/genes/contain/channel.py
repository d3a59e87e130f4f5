"""The parent's end of a gene's child process: two pipes carrying one JSON
object a line, the child's output pipe, the deadline, and the process group.

Why pipes the parent opened rather than anything the child names: the gene's
identity is the channel.  The parent knows which gene it started on which
pipe and serves every call on it as that gene; no field of a message can make
a gene act as another.  Why its own pipes and not stdin/stdout: a gene's own
writes to stdout must not be able to forge a message.

Every wait, for writing as for reading, is bounded by the run's deadline, and
the child's output (stdout and stderr) is drained meanwhile, so neither a child
that stops reading nor one that floods its output can stall the host.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from rotifer.genes.errors import GeneFailed, GeneUnavailable, rejection_of

#: A gene's output, logs and memory traffic beyond this many bytes a message is refused.
MAX_MESSAGE_BYTES = 64 << 20
#: What the parent passes on of a child's own stdout/stderr (a flood is cut there).
MAX_OUTPUT_BYTES = 1 << 20
#: A line of that output longer than this is passed on in pieces.
MAX_LINE_BYTES = 8192

OutputSink = Callable[[str], None]


class Channel:
    """A child (leader of its own process group) and the pipes to it.

    ``argv`` gets the two descriptor numbers appended: the child reads the
    parent's messages from the first and writes its own to the second.
    ``on_output`` gets each line the child writes to its stdout or stderr
    (both go to one pipe; None: stdout is discarded and only the tail of
    stderr is kept, for the message when the child dies).
    """

    def __init__(self, argv: Sequence[str], *, name: str, what: str, deadline_s: float,
                 cwd: str, env: dict[str, str] | None = None,
                 preexec: Callable[[], None] | None = None,
                 on_output: OutputSink | None = None, timeout_message: str | None = None,
                 max_message: int = MAX_MESSAGE_BYTES) -> None:
        self.name = name
        self.what = what
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s
        self.timeout_message = timeout_message or (
            f"gene '{name}' timed out after {deadline_s:g} s (the {what} process was killed)")
        self.on_output = on_output
        self.max_message = max_message
        self._forwarded = 0
        self._line = b""
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [*argv, str(to_child_r), str(from_child_w)],
                stdin=subprocess.DEVNULL,
                stdout=err_w if on_output is not None else subprocess.DEVNULL, stderr=err_w,
                pass_fds=(to_child_r, from_child_w), cwd=cwd, env=env,
                start_new_session=True, preexec_fn=preexec,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in (to_child_r, from_child_w, err_w, err_r, self._to_child,
                       self._from_child):
                os.close(fd)
            if preexec is not None and isinstance(exc, subprocess.SubprocessError):
                raise GeneUnavailable(f"gene '{name}': the {what} process could not be "
                                      "confined; run `rotifer doctor` to see what this "
                                      "machine can enforce") from None
            raise GeneUnavailable(f"cannot start {what} ({argv[0]}): {exc}") from None
        for fd in (to_child_r, from_child_w, err_w):
            os.close(fd)
        os.set_blocking(self._to_child, False)
        os.set_blocking(err_r, False)
        self._err: int | None = err_r
        self._err_tail = b""
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(err_r, selectors.EVENT_READ)

    def restart_deadline(self, deadline_s: float) -> None:
        """The gene's own time starts now (the child's start-up is not counted)."""
        self.deadline = time.monotonic() + deadline_s

    def _wait_for(self, fd: int, events: int) -> None:
        """Block until ``fd`` is ready for ``events``, draining the output; past
        the deadline kill the child and fail the run."""
        self._selector.register(fd, events)
        try:
            while True:
                remaining = self.deadline - time.monotonic()
                ready = self._selector.select(remaining) if remaining > 0 else []
                if not ready:
                    self._kill()
                    raise GeneFailed(self.timeout_message)
                if any(key.fd == fd for key, _ in ready):
                    return
                self._drain_output()
        finally:
            self._selector.unregister(fd)

    def _drain_output(self) -> None:
        if self._err is None:
            return
        while True:
            try:
                chunk = os.read(self._err, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:  # the child (and all it started) closed its output
                self._selector.unregister(self._err)
                os.close(self._err)
                self._err = None
                self._flush_line()
                return
            self._err_tail = (self._err_tail + chunk)[-4096:]
            if self.on_output is not None:
                self._forward(chunk)

    def _forward(self, chunk: bytes) -> None:
        """Pass whole lines on (at most :data:`MAX_OUTPUT_BYTES` in all)."""
        if self._forwarded >= MAX_OUTPUT_BYTES:
            return
        data = self._line + chunk
        *lines, self._line = data.split(b"\n")
        for line in lines:
            self._emit(line)
        while len(self._line) > MAX_LINE_BYTES:
            self._emit(self._line[:MAX_LINE_BYTES])
            self._line = self._line[MAX_LINE_BYTES:]

    def _emit(self, line: bytes) -> None:
        assert self.on_output is not None
        if self._forwarded >= MAX_OUTPUT_BYTES:
            return
        self._forwarded += len(line) + 1
        self.on_output(line.decode("utf-8", "replace"))
        if self._forwarded >= MAX_OUTPUT_BYTES:
            self.on_output(f"... more output dropped (over {MAX_OUTPUT_BYTES >> 20} MiB)")

    def _flush_line(self) -> None:
        if self.on_output is not None and self._line:
            line, self._line = self._line, b""
            self._emit(line)

    def send(self, message: dict[str, Any]) -> None:
        # ASCII JSON: a reply may quote a lone surrogate a gene sent (an error
        # message naming its key), which UTF-8 cannot carry; as an escape it can.
        data = (json.dumps(message, allow_nan=False) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            self._wait_for(self._to_child, selectors.EVENT_WRITE)
            try:
                view = view[os.write(self._to_child, view):]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise self._died() from None

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            self._wait_for(self._from_child, selectors.EVENT_READ)
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise self._died()
            self._buffer += chunk
            if len(self._buffer) > self.max_message:
                self._kill()
                raise GeneFailed(f"gene '{self.name}' sent a message over "
                                 f"{self.max_message >> 20} MiB (the {self.what} process was "
                                 "killed)")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self._kill()
            raise GeneFailed(f"gene '{self.name}': the {self.what} process sent a message "
                             "that is not JSON")
        return message

    def converse(self, reply: Callable[[dict[str, Any]], dict[str, Any]],
                 error: Callable[[dict[str, Any]], BaseException],
                 log: Callable[[str], None] | None = None,
                 other: Callable[[str, dict[str, Any]], bool] | None = None) -> Any:
        """Serve the child's messages until it sends its result, and return that.

        The same exchange for a Python and a Node gene: a ``call`` is answered
        with ``reply(message)``, a ``log`` line goes to ``log``, ``error``
        makes the exception to raise, a result that is a lone
        ``__rotifer_error`` is raised as the gene's rejection; ``other`` may
        take a kind of message of its own (True when it did)."""
        while True:
            message = self.receive()
            kind = message.get("type")
            if kind == "call":
                self.send(reply(message))
            elif kind == "log":
                if log is not None:
                    log(str(message.get("line", "")))
            elif kind == "result":
                output = message.get("output")
                rejected = rejection_of(output)
                if rejected is not None:
                    raise rejected
                return output
            elif kind == "error":
                raise error(message)
            elif other is None or not other(str(kind), message):
                raise GeneFailed(f"gene '{self.name}': the {self.what} process sent {kind!r}")

    def _kill(self) -> None:
        """SIGKILL the child's process group: the child and whatever it started.

        The group's id is the child's pid, which POSIX does not hand to another
        process while the group has members; once it has none, this finds
        nothing (ESRCH) and does nothing."""
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def _died(self) -> GeneFailed:
        try:
            status = self.proc.wait(timeout=max(0.1, min(5.0, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            self._kill()
            status = self.proc.wait()
        self._drain_output()
        tail = self._err_tail[-2000:].decode("utf-8", "replace").strip()
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        return GeneFailed(f"gene '{self.name}': the {self.what} process {how} before it "
                          "returned an output" + (f": {tail}" if tail else ""))

    def close(self) -> None:
        """Kill what is left of the run (the child, anything it started) and reap it."""
        self._kill()
        self.proc.wait()
        self._drain_output()
        self._selector.close()
        for fd in (self._to_child, self._from_child, self._err):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
