"""Which thread a deferral holds signals back in.

Only the main thread runs Python's signal handlers, so a deferral elsewhere
swaps nothing (``signal.signal`` would refuse there).  The main thread is
known by its id, kept by a fork hook rather than asked of ``threading`` per
deferral: a child forked from another thread has that thread as its main
thread, and its deferrals must hold signals back there.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from rotifer.memory.signals import signals_deferred


def test_another_thread_swaps_no_handler() -> None:
    before = signal.getsignal(signal.SIGINT)
    seen: list[object] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with signals_deferred():
                seen.append(signal.getsignal(signal.SIGINT))
        except BaseException as exc:  # signal.signal refuses outside the main thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert errors == [] and seen == [before]


def test_a_child_forked_from_a_thread_defers_in_its_new_main_thread() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    children: list[int] = []

    def fork() -> None:
        pid = os.fork()
        if pid == 0:  # the child: this thread is its main thread now
            code = 1
            try:
                try:
                    with signals_deferred():
                        os.kill(os.getpid(), signal.SIGINT)
                        time.sleep(0.05)  # the handler would run here, were it not held
                        code = 2  # the span ran to its end
                except KeyboardInterrupt:
                    code += 10  # and the signal came out after it
            finally:
                os._exit(code)
        children.append(pid)

    thread = threading.Thread(target=fork)
    thread.start()
    thread.join()
    _, status = os.waitpid(children[0], 0)
    assert os.waitstatus_to_exitcode(status) == 12  # 11: raised inside the span
