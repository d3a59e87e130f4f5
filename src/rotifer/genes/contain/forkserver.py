"""The rotifer process's end of the Python fork server (:mod:`.zygote`): start
it at the first contained Python run of the process, restart it when it has
died, ask it for one confined child per run, shut it down at exit.

Why a fork server and not a fork of this process: a fork of rotifer would
carry a copy of its memory -- the store's page cache, values other genes read,
the environment's database URL -- and its open store, audit and PostgreSQL
descriptors into the gene's reach.  The server is a fresh ``exec`` that holds
none of these; forking it costs a few milliseconds where an interpreter start
and the runtime's imports cost hundreds (bench/containment.py).  Why it is
started lazily and not at import: only a process that runs a contained Python
gene should pay for it (the CLI runs one command and exits).

The parent keeps control of each child as it did of a child it started
itself: the server reports the child's pid and does not reap it while the
run's socket is open, so the pid -- the child's process group -- stays the
child's; the parent opens a pidfd on it, waits on that for the child's end,
kills its group at the deadline and at the end of the run, and learns its exit
status from the server.  A server that dies takes none of that away: the pidfd
still waits and kills, only the status is then unknown.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found,unused-ignore]  # speed: not signal's enums
import _socket
import array
import atexit
import contextlib
import json
import os
import select
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from rotifer.genes.errors import GeneUnavailable

from . import launch

if TYPE_CHECKING:
    import subprocess

#: How long, once the child has ended, the parent waits for the server to say
#: its status (the message is already sent, or is about to be).
STATUS_WAIT_S = 5.0


def _socketpair() -> tuple[_socket.socket, _socket.socket]:
    """A pair of connected ``SOCK_SEQPACKET`` sockets.  Speed: ``_socket``'s, not
    :mod:`socket`'s (its enums cost ~14 M instructions of a contained run)."""
    return _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)


def _readable(fd: int, timeout: float | None) -> bool:
    """Wait until ``fd`` is readable (a pidfd: its process has ended)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if end is None else max(0.0, end - time.monotonic())
        if poller.poll(None if left is None else left * 1000):
            return True
        if left is not None and left <= 0:
            return False


class ServedChild:
    """A gene's process the server forked: what :class:`.channel.Channel` needs of
    a child (``pid``, ``wait``, ``kill``, ``release``)."""

    def __init__(self, sock: _socket.socket, name: str, timeout: float) -> None:
        self._sock = sock
        self.returncode: int | None = None
        self._ended = False
        reply = self._message(timeout)
        if reply is None or "pid" not in reply:
            why = reply.get("error") if reply else None
            raise GeneUnavailable(
                f"gene '{name}': the Python fork server could not start its process"
                + (f": {why}" if why else " (it stopped; the next run starts a new one)"))
        self.pid = int(reply["pid"])
        try:
            # Safe: the server does not reap the child while this run's socket is open.
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # only if the server died (and its children with it) meanwhile
            raise GeneUnavailable(f"gene '{name}': the Python fork server stopped as it "
                                  "started the gene's process (the next run starts a new "
                                  "one)") from None

    def _message(self, timeout: float | None) -> dict[str, Any] | None:
        """The server's next message on this run's socket (None: it closed, or
        nothing came within ``timeout``)."""
        if self._sock.fileno() < 0 or not _readable(self._sock.fileno(), timeout):
            return None
        try:
            data = self._sock.recv(4096)
        except OSError:
            data = b""
        if not data:
            self._sock.close()
            return None
        doc = json.loads(data)
        return doc if isinstance(doc, dict) else None

    def wait(self, timeout: float | None = None, status: bool = True) -> int | None:
        """The child's exit status once it has ended (negative: the signal that
        killed it; None: the server is gone and cannot say, or not ``status``:
        only its end matters, and the server's message is not waited for);
        raises ``subprocess.TimeoutExpired`` if it has not ended within ``timeout``."""
        if not self._ended:
            if not _readable(self._pidfd, timeout):
                import subprocess  # speed: subprocess only where it is used (~10 M)

                raise subprocess.TimeoutExpired("python gene", timeout or 0.0)
            self._ended = True
        while status and self.returncode is None and self._sock.fileno() >= 0:
            message = self._message(STATUS_WAIT_S)
            if message is None:
                break
            if "status" in message:
                self.returncode = message["status"]
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the child's process group (the server holds its pid while this
        run's socket is open) and, through its pidfd, the child itself."""
        if self._sock.fileno() >= 0:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, _signal.SIGKILL)
        with contextlib.suppress(OSError):
            _signal.pidfd_send_signal(self._pidfd, _signal.SIGKILL)

    def release(self) -> None:
        """The run is over: the server may reap the child (it kills its group first)."""
        self._sock.close()
        with contextlib.suppress(OSError):
            os.close(self._pidfd)


def _wait(proc: subprocess.Popen[bytes] | _Early, timeout: float) -> None:
    """Wait for ``proc``'s end and reap it; ``subprocess.TimeoutExpired`` after
    ``timeout``.  Speed: through a pidfd, woken the moment it ends, where
    ``Popen.wait(timeout)`` polls with sleeps of up to 50 ms (the console
    script waits for its server at exit)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError:  # reaped already, or no pidfd here
        proc.wait(timeout=timeout)
        return
    try:
        if not _readable(pidfd, timeout):
            import subprocess

            raise subprocess.TimeoutExpired("python fork server", timeout)
    finally:
        os.close(pidfd)
    proc.wait(timeout=timeout)


class _Early:
    """The server :func:`.launch.start_early` started, as much of a ``Popen`` as
    :class:`ForkServer` uses: ``pid``, ``returncode``, ``poll``, ``wait``, ``kill``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def _reap(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere: its status is lost
                self.returncode = -1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> int | None:
        if timeout is not None and self.returncode is None:
            try:
                pidfd = os.pidfd_open(self.pid)
            except OSError:
                return self._reap(0)
            try:
                if not _readable(pidfd, timeout):
                    import subprocess

                    raise subprocess.TimeoutExpired("python fork server", timeout)
            finally:
                os.close(pidfd)
        return self._reap(0)

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, _signal.SIGKILL)


class ForkServer:
    """One fork server per process (:func:`server`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | _Early | None = None
        self._control: _socket.socket | None = None
        self._owner = 0
        self._spawned = False  # whether this process's server was asked for a child

    @property
    def pid(self) -> int | None:
        """The server's pid (None: not running)."""
        return self._proc.pid if self._proc is not None and self._owner == os.getpid() else None

    def _start(self) -> _socket.socket:
        early = launch.take()
        if early is not None:  # started by the console script (launch.start_early)
            pid, fd = early
            return self._own(_Early(pid), _socket.socket(fileno=fd))
        import subprocess  # speed: the console script's server needs no Popen (launch.py)

        ours, theirs = _socketpair()
        try:
            proc = subprocess.Popen(launch.boot(theirs.fileno()), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    pass_fds=(theirs.fileno(),), env=launch.base_env(),
                                    cwd="/", start_new_session=True)
        except OSError as exc:
            ours.close()
            raise GeneUnavailable(f"cannot start the Python fork server ({sys.executable}): "
                                  f"{exc}") from None
        finally:
            theirs.close()
        return self._own(proc, ours)

    def _own(self, proc: subprocess.Popen[bytes] | _Early, control: _socket.socket
             ) -> _socket.socket:
        if self._owner == 0:
            atexit.register(self.shutdown)
        self._proc, self._control, self._owner = proc, control, os.getpid()
        return control

    def _connection(self, fresh: bool) -> _socket.socket:
        """The control socket of a running server: started now if there is none
        in this process, it has exited, or ``fresh``."""
        if self._owner != os.getpid():  # a fork of a process that had one: not ours
            self._proc = self._control = None
        elif fresh or (self._proc is not None and self._proc.poll() is not None):
            self._stop()
        return self._control or self._start()

    def prestart(self) -> None:
        """Start the server now if none runs, without waiting for it: its
        interpreter starts and imports the runtime while the caller goes on
        (loads genes, opens the store), so a one-shot ``rotifer agent run`` does
        not wait for it at its first gene.  A server that cannot start is left
        for that run to report."""
        with self._lock, contextlib.suppress(GeneUnavailable):
            self._connection(False)

    def spawn(self, name: str, request: dict[str, Any], fds: tuple[int, int, int],
              timeout: float) -> ServedChild:
        """A confined child running ``request`` with the pipes ``fds`` (the
        parent's messages, the child's messages, its output); once the server
        took them, the caller may close its copies."""
        data = json.dumps(request).encode()
        ours, theirs = _socketpair()
        try:
            try:
                for fresh in (False, True):
                    with self._lock:
                        control = self._connection(fresh)
                        self._spawned = True
                        try:
                            control.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                                                      array.array("i", [theirs.fileno(), *fds]))])
                            break
                        except (BrokenPipeError, ConnectionResetError):
                            if fresh:  # a server started just now is gone already
                                raise GeneUnavailable(
                                    f"gene '{name}': the Python fork server stopped as it "
                                    "started") from None
            finally:
                theirs.close()
            return ServedChild(ours, name, timeout)
        except BaseException:
            ours.close()
            raise

    def _stop(self) -> None:
        """Close the control socket (the server kills its children and exits) and reap it."""
        proc, control = self._proc, self._control
        self._proc = self._control = None
        self._spawned = False  # the next server starts unasked
        if control is not None:
            control.close()
        if proc is not None:
            try:
                _wait(proc, 10)
            except Exception as exc:
                import subprocess  # only where it was raised: see ServedChild.wait

                if not isinstance(exc, subprocess.TimeoutExpired):
                    raise
                proc.kill()
                # Never wait for ever: a killed process the kernel keeps busy
                # (seen once under load in test_audit_truth) is reaped by init
                # after rotifer's exit; its genes die with it (parent-death signal).
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)

    def shutdown(self) -> None:
        """At exit: stop this process's server (not one a forked parent started).
        A server that was never asked for a child (started ahead by
        :func:`prestart` for a command whose genes turned out not to need it) is
        killed rather than waited for: it may still be importing the runtime,
        and it holds no child.  Speed: the command exits at once instead of
        waiting for that import (tens of milliseconds)."""
        with self._lock:
            if self._owner == os.getpid():
                if not self._spawned and self._proc is not None:
                    with contextlib.suppress(OSError):
                        self._proc.kill()
                self._stop()


_SERVER = ForkServer()


def server() -> ForkServer:
    """This process's fork server."""
    return _SERVER


def prestart() -> None:
    """Start this process's fork server ahead of its first contained Python
    gene (the CLI's commands that run genes call it first thing: see
    :mod:`rotifer.cli.entry`).

    Speed: nothing is imported or checked before the server's ``exec`` but what
    starting it takes (this module imports the sandbox, ``sysconfig`` and the
    kernel's ctypes calls later or not at all), so that its interpreter starts
    while this process imports the rest.  Whether this machine can contain a
    gene is checked where a gene is contained (:func:`.sandbox.sandbox`); a
    server started here on a machine that cannot is never asked for a child
    and is killed at exit (:meth:`ForkServer.shutdown`)."""
    _SERVER.prestart()
