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
import select
import time
from collections.abc import Callable, Sequence
from typing import Any

from rotifer.genes.errors import GeneFailed, rejection_of
from rotifer.memory.signals import signals_deferred

from .child import Child as Child  # the handle python_host types its children with
from .child import Spawn, popen
from .jsonline import decode
from .protocol import LOG, MAX_NESTING, RESULT, Shape, described, too_deep, well_formed_error
from .sandbox import MAX_OUTPUT_BYTES as MAX_OUTPUT_BYTES  # where the limits are
from .spin import Spinner

#: A gene's output, logs and memory traffic beyond this many bytes a message is refused.
MAX_MESSAGE_BYTES = 64 << 20
#: A line of that output longer than this is passed on in pieces.
MAX_LINE_BYTES = 8192

OutputSink = Callable[[str], None]
#: ``json.dumps(message, allow_nan=False)`` without building an encoder per
#: message (``dumps`` does, for any non-default argument): ~6 us a message.
_ENCODE = json.JSONEncoder(allow_nan=False).encode
#: A message's text to its object: ``json.loads`` of the bytes first guesses
#: their encoding (the child writes UTF-8): 4.5 -> 3.0 us a message; the C
#: scanner called at once (contain/jsonline.py) cuts more.
_DECODE = decode


class Channel:
    """A child (leader of its own process group) and the pipes to it.

    The child is started by ``spawn`` (given the descriptors it reads the
    parent's messages from, writes its own to, and writes its stdout and
    stderr to), or from ``argv`` by :func:`popen`, which appends the first two
    numbers to it.  ``on_output`` gets each line the child writes to its
    stdout or stderr (both go to one pipe; None: stdout is discarded and only
    the tail of stderr is kept, for the message when the child dies).

    What a message costs the parent: usually one ``read`` to receive (tried at
    once, then retried briefly: :class:`~rotifer.genes.contain.spin.Spinner`;
    only past that a ``poll``, with the child's pipe registered once), and one
    ``write`` to send (a ``poll`` only when the pipe is full).
    """

    def __init__(self, argv: Sequence[str] = (), *, name: str, what: str, deadline_s: float,
                 cwd: str = "", env: dict[str, str] | None = None,
                 preexec: Callable[[], None] | None = None,
                 on_output: OutputSink | None = None, timeout_message: str | None = None,
                 max_message: int = MAX_MESSAGE_BYTES, max_output: int = MAX_OUTPUT_BYTES,
                 spawn: Spawn | None = None) -> None:
        self.name = name
        self.what = what
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s
        self.timeout_message = timeout_message or (
            f"gene '{name}' timed out after {deadline_s:g} s (the {what} process was killed)")
        self.on_output = on_output
        self.max_message = max_message
        self.max_output = max_output
        self._forwarded = 0
        self._dropped = 0
        self._log: Callable[[str], None] | None = None
        self._line = b""
        if spawn is None:
            spawn = popen(argv, name=name, what=what, cwd=cwd, env=env, preexec=preexec,
                          keep_stdout=on_output is not None)
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            self.proc = spawn(to_child_r, from_child_w, err_w)
        except BaseException:
            for fd in (err_r, self._to_child, self._from_child):
                os.close(fd)
            raise
        finally:
            for fd in (to_child_r, from_child_w, err_w):
                os.close(fd)
        os.set_blocking(self._to_child, False)
        os.set_blocking(self._from_child, False)
        os.set_blocking(err_r, False)
        self._err: int | None = err_r
        self._err_tail = b""
        self._buffer = bytearray()
        self._spinner = Spinner()
        self._poll = select.poll()
        self._poll.register(err_r, select.POLLIN)
        self._poll.register(self._from_child, select.POLLIN)

    def restart_deadline(self, deadline_s: float) -> None:
        """The gene's own time starts now (the child's start-up is not counted)."""
        self.deadline = time.monotonic() + deadline_s

    def _wait_for(self, fd: int) -> None:
        """Block until ``fd`` is ready (the child's message pipe to read, or with
        :meth:`_writable` the parent's to write), draining the output; past the
        deadline kill the child and fail the run."""
        while True:
            remaining = self.deadline - time.monotonic()
            ready = self._poll.poll(remaining * 1000) if remaining > 0 else []
            if not ready:
                if remaining > 0:
                    continue  # woken a little early (poll rounds to milliseconds)
                self._kill()
                raise GeneFailed(self.timeout_message)
            if any(ready_fd == fd for ready_fd, _ in ready):
                return
            self._drain_output()

    def _read_now(self) -> bytes | None:
        """What the child has sent (``b""``: its end), None if nothing yet."""
        try:
            return os.read(self._from_child, 1 << 16)
        except BlockingIOError:
            return None

    def _read_waiting(self) -> bytes:
        while True:
            self._wait_for(self._from_child)
            chunk = self._read_now()
            if chunk is not None:
                return chunk

    def _writable(self) -> None:
        # The child's own messages wait meanwhile: a child that writes without
        # reading must not turn this wait into a spin.
        self._poll.unregister(self._from_child)
        self._poll.register(self._to_child, select.POLLOUT)
        try:
            self._wait_for(self._to_child)
        finally:
            self._poll.unregister(self._to_child)
            self._poll.register(self._from_child, select.POLLIN)

    def _drain_output(self) -> None:
        if self._err is None:
            return
        while True:
            try:
                chunk = os.read(self._err, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:  # the child (and all it started) closed its output
                fd, self._err = self._err, None  # forgotten first: never closed twice
                self._poll.unregister(fd)
                os.close(fd)
                self._flush_line()
                return
            self._err_tail = (self._err_tail + chunk)[-4096:]
            if self.on_output is not None:
                self._forward(chunk)

    def _forward(self, chunk: bytes) -> None:
        """Pass whole lines on (the run's output budget: :meth:`_emit`)."""
        if self._forwarded >= self.max_output:
            self._dropped += len(chunk)
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
        if self._spend(len(line) + 1):
            self.on_output(line.decode("utf-8", "replace"))

    def _spend(self, size: int) -> bool:
        """Whether ``size`` more bytes of output fit the run's budget (one for
        the raw output, ``print`` and ``ctx.log`` together); once one does not,
        none after it does, and what is dropped is counted for :meth:`close`."""
        if self._forwarded + size > self.max_output:
            self._forwarded = self.max_output
            self._dropped += size
            return False
        self._forwarded += size
        return True

    def count_output(self, line: str, log: Callable[[str], None] | None) -> None:
        """A log line (``ctx.log``, ``print``, ``console.log``) within the budget."""
        if log is not None:
            self._log = log
            if self._spend(len(line.encode("utf-8", "surrogatepass")) + 1):
                log(line)

    def _flush_line(self) -> None:
        if self.on_output is not None and self._line:
            line, self._line = self._line, b""
            self._emit(line)

    def _report_dropped(self) -> None:
        """The one line saying how much output the budget dropped, if any."""
        sink = self.on_output or self._log
        if self._dropped and sink is not None:
            dropped, self._dropped = self._dropped, 0
            sink(f"... {dropped} bytes of output dropped (a gene's output, print, log and "
                 f"raw writes together, is capped at {self.max_output} bytes a run)")

    def send(self, message: dict[str, Any]) -> None:
        # ASCII JSON: a reply may quote a lone surrogate a gene sent (an error
        # message naming its key), which UTF-8 cannot carry; as an escape it can.
        self.send_line((_ENCODE(message) + "\n").encode("ascii"))

    def send_line(self, data: bytes) -> None:
        """Send one message already encoded (ASCII JSON and its newline)."""
        view = memoryview(data)
        while True:
            try:
                view = view[os.write(self._to_child, view):]
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise self._died() from None
            if not view:
                return
            self._writable()  # the pipe is full: wait (bounded by the deadline)

    def receive(self) -> dict[str, Any]:
        # Each chunk is appended to a bytearray and searched once: searching
        # and copying all that was held at every 64 KiB read made one 32 MiB
        # message cost 6.2 s of the run's deadline (0.07 s so).
        end = self._buffer.find(b"\n")
        while end < 0:
            # Checked here too: a child whose messages never stop coming is
            # read without a wait, where the deadline is otherwise checked.
            if time.monotonic() >= self.deadline:
                self._kill()
                raise GeneFailed(self.timeout_message)
            chunk = self._spinner.wait(self._read_now, self._read_waiting)
            if not chunk:
                raise self._died()
            found = chunk.find(b"\n")
            if found >= 0:
                end = len(self._buffer) + found
            self._buffer += chunk
            if len(self._buffer) > self.max_message:
                self._kill()
                raise GeneFailed(f"gene '{self.name}' sent a message over "
                                 f"{self.max_message >> 20} MiB (the {self.what} process was "
                                 "killed)")
        line = self._buffer[:end]
        del self._buffer[:end + 1]
        try:
            message = _DECODE(line.decode())
        except (ValueError, RecursionError):  # UnicodeDecodeError too
            raise self.violation("a message that is not JSON") from None
        if not isinstance(message, dict):
            raise self.violation("a message that is not a JSON object")
        # Nesting: a line this short cannot hold that many brackets; counting
        # them is one C pass each and bounds the depth, so only a message with
        # many of them is walked (see too_deep).
        if len(line) > MAX_NESTING and line.count(b"[") + line.count(b"{") > MAX_NESTING \
                and too_deep(message):
            raise self.violation(f"a message nested more than {MAX_NESTING} deep")
        return message

    def violation(self, what: str) -> GeneFailed:
        """The child broke the bridge's protocol: it is killed, and the run
        fails as the gene's failure (never as rotifer's error)."""
        self._kill()
        return GeneFailed(f"gene '{self.name}' broke the bridge protocol: the {self.what} "
                          f"process sent {what} (it was killed)")

    def converse(self, reply: Callable[[dict[str, Any]], dict[str, Any] | bytes],
                 error: Callable[[dict[str, Any]], BaseException],
                 log: Callable[[str], None] | None = None, *,
                 calls: Shape, errors: frozenset[str]) -> Any:
        """Serve the child's messages until it sends its result, and return that.

        The same exchange for a Python and a Node gene, and only these messages
        (an allowlist of shapes: anything else, or a field of the wrong type,
        is a protocol violation, :meth:`violation`): a ``call`` (its fields
        ``calls``) is answered with ``reply(message)`` (an object, or a line
        already encoded); a ``log`` line goes to ``log``; a ``result`` ends the
        run (a lone ``__rotifer_error`` is raised as the gene's rejection); an
        ``error`` of a kind in ``errors`` becomes the exception ``error``
        makes.  None of them can say the run was interrupted: only rotifer's
        own signal handling decides that."""
        while True:
            message = self.receive()
            kind = message.get("type")
            try:
                # The op's type first: a list or an object is unhashable, and
                # asking a set whether it holds one raises TypeError.
                if kind == "call" and message.keys() <= calls.fields \
                        and type(op := message.get("op")) is str and op in calls.ops:
                    answer = reply(message)  # bytes: a line built already
                    if isinstance(answer, bytes):
                        self.send_line(answer)
                    else:
                        self.send(answer)
                    continue
            except RecursionError:
                raise self.violation("a call nested too deeply") from None
            if kind == "log" and message.keys() == LOG and type(message["line"]) is str:
                self.count_output(message["line"], log)
            elif kind == "result" and message.keys() == RESULT:
                output = message["output"]
                rejected = rejection_of(output)
                if rejected is not None:
                    raise rejected
                return output
            elif kind == "error" and well_formed_error(message, errors):
                raise error(message)
            else:
                raise self.violation(described(message))

    def _kill(self) -> None:
        """SIGKILL the child's process group: the child and whatever it started."""
        self.proc.kill()

    def _died(self) -> GeneFailed:
        import subprocess  # speed: here, where the child has died, not at every run

        try:
            status = self.proc.wait(timeout=max(0.1, min(5.0, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            self._kill()
            status = self.proc.wait()
        self._drain_output()
        tail = self._err_tail[-2000:].decode("utf-8", "replace").strip()
        how = ("ended" if status is None else f"was killed by signal {-status}" if status < 0
               else f"exited with status {status}")
        return GeneFailed(f"gene '{self.name}': the {self.what} process {how} before it "
                          "returned an output" + (f": {tail}" if tail else ""))

    def close(self) -> None:
        """Kill what is left of the run (the child, anything it started) and
        reap it; a stop signal meanwhile is handled once that is done."""
        with signals_deferred():
            self._kill()
            try:
                self.proc.wait(status=False)  # gone is enough: no wake-up for its status
            finally:
                self.proc.release()
            self._drain_output()
            for fd in (self._to_child, self._from_child, self._err):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._err = None
            self._flush_line()
            self._report_dropped()
