"""Ending a contained run without a signal cutting the ending in half.

Python runs a signal's handler between two bytecodes of the main thread, and
the usual handler raises (Ctrl-C's ``KeyboardInterrupt``, the CLI's
``Terminated``).  Raised inside cleanup code, that leaves it half done:
``shutil.rmtree`` closes a descriptor twice if it lands between its
``os.close(fd)`` and the flag recording it (the second close fails with EBADF,
or closes whatever another thread opened under that number meanwhile); a
child not yet killed is left to the fork server.  It happened: SIGINT and
SIGTERM every 2-25 ms (tests/reliability/test_audit_truth.py) hit it once
contained runs became short enough for their cleanup to be a good part of
them.  So while a run is ended, the stop signals are only recorded, and
handled right after, as they would have been.
"""

from __future__ import annotations

import signal
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Signals whose Python handler may raise: SIGINT (Ctrl-C) and, where the CLI
#: turns them into an exception, SIGTERM and SIGHUP (rotifer.genes.python
#: watches the same ones while a trusted gene runs).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Record the stop signals that come meanwhile; then run their handlers.

    Only the main thread runs Python's signal handlers, so elsewhere this does
    nothing (nothing can be raised there).  A handler that was not Python's
    own (SIG_DFL, SIG_IGN: the kernel acts, no exception) is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, types.FrameType | None]] = []

    def record(signum: int, frame: types.FrameType | None) -> None:
        caught.append((signum, frame))

    previous: dict[int, Any] = {}
    for sig in STOP_SIGNALS:
        handler = signal.getsignal(sig)
        if callable(handler):
            previous[sig] = handler
            signal.signal(sig, record)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if signal.getsignal(sig) == record:  # one put there meanwhile stays
                signal.signal(sig, handler)
        for signum, frame in caught:
            handler = previous.get(signum)
            if callable(handler):
                handler(signum, frame)
