"""The Python fork server (the "zygote"): a process that forks one confined
child per contained Python gene run, so a run pays a ``fork`` instead of an
interpreter start and the import of the runtime.

What it is: a fresh ``python -S -E -B`` ``exec``'d by the rotifer process
(:mod:`rotifer.genes.contain.forkserver`) with the scrubbed environment
(:func:`~rotifer.genes.contain.sandbox.base_env`), ``/`` as its working folder,
``/dev/null`` as stdin, stdout and stderr, in a session of its own (no
terminal, no Ctrl-C), and no descriptor but its control socket.  It imports
what a gene's process needs (:mod:`.pychild`: ``rotifer.memory``'s entry and
error types, ``rotifer.genes.python``, json, base64), freezes those objects
for the garbage collector (so a child's collections do not copy the pages
they sit on), and then only waits.  So what a child inherits from it is the
runtime's code and nothing of the store: no page of it, no database URL, no
open database, audit log or PostgreSQL descriptor.

The protocol: the control socket (``SOCK_SEQPACKET``: one request a message,
sent whole or not at all, so threads of the parent share it without a lock
and a signal cannot leave half a request behind) carries ``spawn`` requests,
each a JSON object (``cwd``, ``env``, ``plan``: :meth:`kernel.Plan.to_message`)
with four descriptors: the run's own socket and the three pipes of the gene's
process (the parent's messages, the child's messages, its output).  The
server forks, answers ``{"pid": N}`` on the run's socket (``{"error": ...}``
if it could not fork), and ``{"status": S}`` (Popen's convention: negative
for a signal) once the child has ended.  It reaps the child only when the
parent has closed the run's socket, killing the child's process group first:
until then the pid, which is also the group's id, cannot be given to another
process, so the parent's ``killpg`` always reaches this run's child.  When the
control socket closes (the parent exited, or shut it down) the server kills
every child's group, reaps them and exits.

What the child does before any gene code (:func:`_become_gene`): its own
process group; descriptors 0 (``/dev/null``), 1 and 2 (its output pipe), 3 and 4
(the pipes to the parent) and no other -- the control socket, other runs'
sockets and the server's epoll and pidfd descriptors are closed; the gene's
folder as working folder; the run's environment (``HOME`` and ``TMPDIR`` its
private temporary folder); then the plan (:meth:`kernel.Plan.apply`): rlimits,
as root a tmpfs of its own on the temporary folder, the unprivileged user and
no capability, death with the server (``PR_SET_PDEATHSIG``: the server is the
child's parent, and the server itself ends when rotifer's end of the control
socket closes, however rotifer died), ``no_new_privs``, Landlock, seccomp.
The server is outside the child's Landlock domain, so the child cannot signal
it; seccomp refuses ``ptrace`` and lets ``prlimit64``, ``setpriority`` and
``sched_setaffinity`` reach only the child itself; Landlock refuses ``/proc``.
"""

from __future__ import annotations

import _socket
import array
import contextlib
import fcntl
import gc
import json
import os
import resource
import selectors
import signal
import sys
from typing import Any

from . import kernel, pychild

#: Descriptors of a gene's process: its parent's messages in, its own out.
CHILD_IN, CHILD_OUT = 3, 4
#: A spawn request's descriptors: the run's socket and the three pipes.
SPAWN_FDS = 4
MAX_REQUEST = 1 << 20


class _Run:
    """One run: the child's pid, the run's socket (None once the parent closed
    it), its pidfd, whether it ended and how.  (A plain class: a dataclass
    costs this server ~3.5 M instructions to create.)"""

    __slots__ = ("ended", "pid", "pidfd", "sock", "status")

    def __init__(self, pid: int, sock: _socket.socket | None, pidfd: int) -> None:
        self.pid, self.sock, self.pidfd = pid, sock, pidfd
        self.ended = False
        self.status: int | None = None


def _status(pid: int) -> int | None:
    """The ended child's status without reaping it (so its pid stays its own)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


class Server:
    """The loop: spawn requests on the control socket, the end of each run's
    socket, the end of each child (its pidfd)."""

    def __init__(self, control: _socket.socket) -> None:
        self.control = control
        self.selector = selectors.DefaultSelector()
        self.selector.register(control, selectors.EVENT_READ)
        self.runs: dict[int, _Run] = {}  # by pid

    def serve(self) -> None:
        """Events are dispatched on the run they belong to, not on a descriptor
        number: one batch may end a run (its socket's end, then its pidfd's)
        whose numbers a request later in the batch gets again."""
        while True:
            for key, _ in self.selector.select():
                if key.fileobj is self.control:
                    if not self._request():
                        return
                elif isinstance(key.data, _Run) and key.fd == key.data.pidfd:
                    self._ended(key.data)
                elif isinstance(key.data, _Run):
                    self._closed(key.data)

    def _request(self) -> bool:
        """One spawn request; False when the control socket closed."""
        try:
            data, fds = _recv_fds(self.control)
        except OSError:
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False
        if len(fds) != SPAWN_FDS:
            for fd in fds:
                os.close(fd)
            return True
        sock = _socket.socket(fileno=fds[0])
        try:
            request = json.loads(data)
            server = os.getpid()
            pid = os.fork()
        except Exception as exc:  # told to the parent, which raises it
            with contextlib.suppress(OSError):
                sock.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            sock.close()
            for fd in fds[1:]:
                os.close(fd)
            return True
        if pid == 0:
            try:
                sock.detach()
                self._forget()
                _become_gene(request, fds[1:], server)
            finally:
                os._exit(70)  # the child never returns into the server's loop
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # the child does it too: whichever comes first
        for fd in fds[1:]:
            os.close(fd)
        run = _Run(pid, sock, os.pidfd_open(pid))
        self.runs[pid] = run
        self.selector.register(run.pidfd, selectors.EVENT_READ, run)
        self.selector.register(sock, selectors.EVENT_READ, run)
        with contextlib.suppress(OSError):
            sock.send(json.dumps({"pid": pid}).encode())
        return True

    def _ended(self, run: _Run) -> None:
        if run.ended:
            return  # seen already, earlier in the same batch
        self.selector.unregister(run.pidfd)
        run.ended = True
        run.status = _status(run.pid)
        if run.sock is None:
            self._reap(run)
        else:
            with contextlib.suppress(OSError):
                run.sock.send(json.dumps({"status": run.status}).encode())

    def _closed(self, run: _Run) -> None:
        """The parent is done with the run (or a message it should not send):
        kill the child's group; reap it once it has ended."""
        if run.sock is None:
            return
        self.selector.unregister(run.sock)
        run.sock.close()
        run.sock = None
        with contextlib.suppress(OSError):
            os.killpg(run.pid, signal.SIGKILL)
        if not run.ended and _status(run.pid) is not None:
            self.selector.unregister(run.pidfd)  # ended, its pidfd not yet seen
            run.ended = True
        if run.ended:
            self._reap(run)

    def _reap(self, run: _Run) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(run.pid, 0)
        os.close(run.pidfd)
        del self.runs[run.pid]

    def _forget(self) -> None:
        """In a forked child: drop the server's objects without touching what
        their descriptor numbers will be (:func:`_own_descriptors` closes the
        descriptors): no finalizer of theirs may close one of the gene's."""
        self.control.detach()
        for run in self.runs.values():
            if run.sock is not None:
                run.sock.detach()
        self.selector.close()
        self.runs.clear()

    def stop(self) -> None:
        """Kill every child's group and reap them all."""
        for run in list(self.runs.values()):
            with contextlib.suppress(OSError):
                os.killpg(run.pid, signal.SIGKILL)
        for run in list(self.runs.values()):
            self._reap(run)


def _become_gene(request: dict[str, Any], fds: list[int], server: int) -> None:
    """In the forked child: confine this process, then run the gene; never returns."""
    code = 0
    try:
        os.setpgid(0, 0)
        _own_descriptors(*fds)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["-c", str(CHILD_IN), str(CHILD_OUT)]
        kernel.Plan.from_message(request["plan"], parent=server).apply()
    except BaseException as exc:  # the parent reports it
        with contextlib.suppress(BaseException):
            os.write(CHILD_OUT, (json.dumps({"type": "error", "kind": "unconfined",
                                             "message": str(exc)}) + "\n").encode())
        os._exit(70)
    try:
        pychild.main(CHILD_IN, CHILD_OUT)
    except SystemExit as exc:  # the parent closed its pipe: nothing left to do
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:  # the parent sees the pipe close
        code = 1
    os._exit(code)


def _own_descriptors(to_child: int, from_child: int, output: int) -> None:
    """Descriptors 0-4 as :func:`_become_gene` says, and none other."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child, output)]
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(high[2], 1)
    os.dup2(high[2], 2)
    os.dup2(high[0], CHILD_IN)
    os.dup2(high[1], CHILD_OUT)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    os.closerange(CHILD_OUT + 1, limit if 0 < limit < 1 << 31 else 1 << 31)


def _recv_fds(sock: _socket.socket) -> tuple[bytes, list[int]]:
    """One request and the descriptors that came with it (``socket.recv_fds``,
    without importing :mod:`socket`: its enums cost the server ~5% of its start)."""
    item = array.array("i").itemsize
    data, ancdata, _, _ = sock.recvmsg(MAX_REQUEST, _socket.CMSG_LEN(SPAWN_FDS * item))
    fds = array.array("i")
    for level, kind, payload in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % item])
    return data, list(fds)


def main(control_fd: int) -> None:
    """The server's process: serve until the control socket closes."""
    control = _socket.socket(fileno=control_fd)
    gc.freeze()  # what is imported now stays put in every child
    gc.enable()  # off while the runtime was imported (launch.boot); on for the gene
    server = Server(control)
    try:
        server.serve()
    finally:
        server.stop()
    # Speed: rotifer waits for this process at its exit; the interpreter's
    # teardown (modules, objects) would only add to that wait.  Nothing is
    # left to flush: stdout and stderr are /dev/null.
    os._exit(0)
