"""How the Python fork server (:mod:`.zygote`) is started: the command line it
is ``exec``'d with, its environment, and its start at the console script's
first line.

The server is always a fresh ``exec`` of the interpreter (``python -S -E -B``)
with :func:`base_env` as its whole environment, ``/`` as its working folder,
``/dev/null`` as stdin, stdout and stderr, a session of its own, and no
descriptor but its control socket: whatever the rotifer process holds (its
environment's database URL or password, its arguments, its memory, its open
store) is gone at the ``exec``.  Two ways lead there:

- :class:`.forkserver.ForkServer` starts it with :class:`subprocess.Popen`
  (a library user's first contained Python gene, or a restart);
- the ``rotifer`` console script starts it with :func:`start_early` before it
  imports anything else (:mod:`rotifer.cli.entry`): ``os.fork`` of the console
  script as it is then (the interpreter, ``os``, ``sys``) and, in that fork, at
  once and nothing else first, what ``Popen`` does before its ``exec`` -- a
  session of its own, ``/`` as working folder, ``/dev/null`` on 0-2, every
  other descriptor closed but the control socket, ``SIGPIPE`` and ``SIGXFSZ``
  back to their defaults -- then ``os.execve`` with :func:`base_env`.  The
  process that runs the server is therefore the same as ``Popen``'s (the
  ``exec`` replaces the fork's memory whole: nothing of it is inherited); if
  the ``exec`` fails the fork exits 127, and the first gene's run finds the
  server gone and starts one with ``Popen``, which reports why.

Speed: ``Popen`` needs ``subprocess`` (with ``threading``, ``selectors``,
``signal``, ...) and :mod:`.forkserver` its own imports (``socket``,
``json``): about 80 M instructions of the console script before the server's
interpreter even starts, and 60 M more for the sandbox module that held
:func:`base_env`.  Started here the server's interpreter starts about 40 ms
sooner on this machine, beside the command's own imports instead of after a
good part of them (docs/benchmarks.md, "Start-up").
"""

from __future__ import annotations

import os
import sys

#: The server :func:`start_early` started, not yet taken over by
#: :class:`.forkserver.ForkServer`: (its pid, this end of its control socket).
_early: tuple[int, int] | None = None


def base_env() -> dict[str, str]:
    """The environment every contained process gets: ``PATH`` and the locale
    (the Python fork server is ``exec``'d with exactly this)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    for name in ("LANG", "LC_ALL", "LC_CTYPE", "TZ"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def boot(control_fd: int) -> list[str]:
    """The server's command line: this interpreter, isolated from the
    environment and ``site``, importing rotifer from where this process does."""
    import sysconfig  # speed: after the server's start, not before (see .forkserver.prestart)

    up = os.path.dirname
    paths = [up(up(up(up(os.path.realpath(__file__)))))]  # where rotifer is imported from
    found = sysconfig.get_paths()
    paths += [found["purelib"], found["platlib"]]
    # Speed: no garbage collection while the server imports the runtime (its
    # objects are frozen for good after: zygote.main), ~10 M instructions.
    code = (f"import gc; gc.disable(); import sys; sys.path[:0] = {paths!r}; "
            f"from rotifer.genes.contain.zygote import main; main({control_fd})")
    return [sys.executable, "-S", "-E", "-B", "-c", code]


def _become_server(control_fd: int, env: dict[str, str], mask: object) -> None:
    """In the fork: what ``Popen(boot(fd), stdin/stdout/stderr=DEVNULL, cwd="/",
    env=base_env(), pass_fds=(fd,), start_new_session=True)`` does in its child
    before the ``exec``, then the ``exec``; never returns.  ``mask``: the signal
    mask to restore once out of the terminal's process group (a Ctrl-C that
    reached the fork before is then raised here, and ends it)."""
    import _signal  # type: ignore[import-not-found,unused-ignore]  # preloaded

    try:
        os.setsid()  # first: no Ctrl-C of the terminal's group reaches this fork
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
        for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ"):  # Popen's restore_signals
            if hasattr(_signal, name):
                _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
        os.chdir("/")
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # dup2 makes them inheritable
        os.set_inheritable(control_fd, True)
        os.closerange(3, control_fd)
        os.closerange(control_fd + 1, 1 << 20)
        argv = boot(control_fd)
        os.execve(argv[0], argv, env)
    finally:
        os._exit(127)


def start_early() -> None:
    """Start the fork server now, by a fork of this process that ``exec``'s it
    at once (see the module's docstring); :func:`take` hands it to the fork
    server's owner.  A server that cannot start is left for the first gene's
    run to start and report; one nobody takes is killed and reaped at exit."""
    global _early
    if _early is not None:
        return
    import _signal  # type: ignore[import-not-found,unused-ignore]  # preloaded
    import _socket  # speed: not socket (its enums)
    import atexit

    env = base_env()
    try:
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    except OSError:
        return
    # Ctrl-C is held across the fork: the fork must never run the console
    # script's own handling of it (its INTERRUPTED line, its exit), only exit.
    mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, [_signal.SIGINT])
    try:
        pid = os.fork()
    except OSError:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
        ours.close()
        theirs.close()
        return
    if pid == 0:  # pragma: no cover - the fork, replaced by the exec
        try:
            _become_server(theirs.fileno(), env, mask)
        finally:
            os._exit(127)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
    theirs.close()
    _early = (pid, ours.detach())
    atexit.register(_untaken)


def take() -> tuple[int, int] | None:
    """The server :func:`start_early` started (its pid, the control socket's
    descriptor), once: the caller owns it from then on (reaps it, closes it)."""
    global _early
    early, _early = _early, None
    return early


def _untaken() -> None:
    """At exit: a server started early that no gene asked for is killed and reaped."""
    early = take()
    if early is None:
        return
    pid, control = early
    os.close(control)
    try:
        os.kill(pid, 9)  # SIGKILL: it holds no child, and may still be importing
        os.waitpid(pid, 0)
    except OSError:
        pass
