"""Holding a lock, or ending a run, without a signal cutting it in half.

Python runs a signal's handler between two bytecodes of the main thread, and
the usual handler raises (Ctrl-C's ``KeyboardInterrupt``, the CLI's
``Terminated``).  Raised inside code that must finish, that leaves it half done:

- the audit log's ``flock`` taken and never released, when the exception lands
  after the lock is taken and before the ``try`` that releases it (or in the
  ``finally`` before the unlock).  The descriptor stays open, so every other
  process appending to the log -- and this one, through a second descriptor --
  then waits for ever.  It happened: SIGINT and SIGTERM every 2-25 ms
  (tests/reliability/test_audit_truth.py) hung the worker, and
  tests/memory/test_audit_interrupts.py lands one at every bytecode of an append;
- ``shutil.rmtree`` closing a descriptor twice, when it lands between its
  ``os.close(fd)`` and the flag recording it; a gene's child not yet killed.

So inside :class:`signals_deferred` the stop signals (and SIGALRM, a trusted
gene's deadline) are only recorded, and their handlers run once it ends, as
they would have.  One part may take them
at once: waiting for a lock another process holds (:meth:`Deferral.waiting`),
so Ctrl-C still ends a process stuck behind a stopped one.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]
import _thread
import os
import threading
import types
from collections.abc import Callable
from typing import Any

#: Signals whose Python handler may raise: SIGINT (Ctrl-C) and, where the CLI
#: turns them into an exception, SIGTERM and SIGHUP (rotifer.genes.python
#: watches the same ones while a trusted gene runs).
#: (Numbers from signal's C half: ``import signal`` makes enums of every
#: name, ~3.5 M instructions of a command's start-up.)
STOP_SIGNALS: tuple[int, ...] = tuple(getattr(_signal, name)
                                      for name in ("SIGINT", "SIGTERM", "SIGHUP")
                                      if hasattr(_signal, name))

#: What :class:`signals_deferred` holds back: the stop signals and SIGALRM, which
#: rotifer.genes.python raises a trusted gene's deadline with.
DEFERRED_SIGNALS: tuple[int, ...] = STOP_SIGNALS + tuple(
    getattr(_signal, name) for name in ("SIGALRM",) if hasattr(_signal, name))

Handler = Callable[[int, types.FrameType | None], Any]

# signal's C half, without signal.signal's enum conversions, a tenth of its
# cost (an append swaps and restores up to three handlers).
_getsignal: Callable[[int], object] = _signal.getsignal
_setsignal: Callable[[int, object], object] = _signal.signal


# Which thread runs Python's signal handlers, as one thread id compared per
# deferral (``threading.current_thread() is threading.main_thread()`` is two
# Python calls, ~80 ns, and a PostgreSQL write enters three deferrals).  A fork
# from another thread makes that thread the child's main thread: the hook keeps
# up (tests/memory/test_signals.py forks from a thread).
_get_ident: Callable[[], int] = _thread.get_ident
_main_ident = [threading.main_thread().ident]


def _after_fork_in_child() -> None:
    _main_ident[0] = _get_ident()


os.register_at_fork(after_in_child=_after_fork_in_child)


class signals_deferred:
    """Record the signals of :data:`DEFERRED_SIGNALS` that come meanwhile; then
    run their handlers.

    Only the main thread runs Python's signal handlers, so elsewhere this does
    nothing (nothing can be raised there).  A handler that was not Python's
    own (SIG_DFL, SIG_IGN: the kernel acts, no exception) is left alone.
    Nests: an inner one records into the outer one's handler."""

    __slots__ = ("_caught", "_previous", "_recorder", "live")

    def __init__(self) -> None:
        #: While True, a stop signal runs its handler at once (see :meth:`waiting`).
        self.live = False
        self._caught: list[tuple[int, types.FrameType | None]] = []
        self._previous: dict[int, Handler] = {}
        #: The one bound method swapped in, looked for again on the way out
        #: (``is``, not a new bound method and ``==`` per signal); None outside
        #: the span, so that no cycle through it outlives the span.
        self._recorder: Handler | None = None

    def _record(self, signum: int, frame: types.FrameType | None) -> None:
        if self.live:
            self.live = False  # the caller's release after a raise must not be cut in turn
            self._previous[signum](signum, frame)
            self.live = True  # it did not raise: still waiting
        else:
            self._caught.append((signum, frame))

    def __enter__(self) -> signals_deferred:
        if _get_ident() != _main_ident[0]:
            return self
        recorder = self._recorder = self._record
        previous = self._previous
        try:
            for sig in DEFERRED_SIGNALS:
                handler = _getsignal(sig)
                if callable(handler):
                    previous[sig] = handler
                    _setsignal(sig, recorder)
        except BaseException:  # a signal whose handler was not swapped yet
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        # What were _end and _restore, in one frame: a Python call costs about
        # 1,000 instructions, and a PostgreSQL write enters three deferrals.
        self.live = False
        previous = self._previous
        try:
            if previous:  # else nothing was swapped (another thread, no handler)
                # Put each handler back (one put there meanwhile stays).  A signal
                # whose handler is back may run it at the next check (after a call
                # returns, at a loop's jump back): if that raises, the ``finally``
                # puts the rest back, so no handler is left as ``_record``.
                recorder = self._recorder
                items = list(previous.items())
                done = 0
                try:
                    for sig, handler in items:
                        if _getsignal(sig) is recorder:
                            _setsignal(sig, handler)
                        done += 1
                finally:
                    for sig, handler in items[done:]:
                        if _getsignal(sig) is recorder:
                            _setsignal(sig, handler)
        finally:
            self._recorder = None
            if self._caught:
                caught, self._caught = self._caught, []
                for signum, frame in caught:
                    previous[signum](signum, frame)

    def waiting(self) -> _Waiting:
        """``with deferral.waiting(): fcntl.flock(fd, LOCK_EX)``: a stop signal
        while it waits runs its handler at once (nothing is held yet); the
        caller releases what the wait may have taken when that raises, and the
        handler has run once by then, so later signals are recorded again."""
        return _Waiting(self)


class _Waiting:
    __slots__ = ("_deferral",)

    def __init__(self, deferral: signals_deferred) -> None:
        self._deferral = deferral

    def __enter__(self) -> None:
        self._deferral.live = True

    def __exit__(self, *exc: object) -> None:
        self._deferral.live = False
