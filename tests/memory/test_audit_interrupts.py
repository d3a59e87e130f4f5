"""A stop signal at any moment of an audit append leaves the log's lock free.

The defect: SIGINT landing between the ``flock`` and the ``try`` that releases
it (or in the ``finally`` before the unlock) left the lock taken on a
descriptor that stays open, and the next append through another descriptor --
another process, or this one after the next store open -- waited for ever
(tests/reliability/test_audit_truth.py hung that way); a trusted gene's
deadline (SIGALRM) could do the same.  Here a signal "lands" at every point of
an append where CPython runs pending signal handlers, one append each: a trace
function calls the signal's current handler there, as Python does when a real
signal arrives, so a deferral that swapped the handler takes it as a real one.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory.audit import AuditLog
from rotifer.memory.audit.verify import read_chained
from rotifer.memory.signals import signals_deferred
from tests.interrupts import interrupt_at


def _line(n: int) -> dict[str, Any]:
    return {"ts": f"2026-01-01T00:00:00.{n:06d}Z", "agent": "a", "action": "write",
            "key": f"k{n}", "category": "CACHE", "actor": "g", "bytes": n, "entryId": None,
            "seq": n}


def _deadline(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # as a trusted gene's deadline raises (rotifer.genes.python)


def _lock_is_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.fixture
def alarm_raises() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _deadline)
    yield
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.usefixtures("alarm_raises")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGALRM], ids=["SIGINT", "SIGALRM"])
@pytest.mark.parametrize("kept", [True, False], ids=["kept-descriptor", "first-open"])
def test_a_signal_at_every_point_of_an_append_leaves_the_lock_free(
        tmp_path: Path, kept: bool, sig: int) -> None:
    path = tmp_path / "audit.jsonl"
    handlers = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)]
    AuditLog(path).write([_line(0)])
    total, _ = interrupt_at(0, lambda: AuditLog(path).write([_line(0)]))
    n = 1
    interrupted = 0
    for step in range(1, total + 50):
        log = AuditLog(path)
        if kept:
            n += 1
            log.write([_line(n)])  # opened and kept: the next append reuses it
        n += 1
        seen, raised = interrupt_at(step, lambda: log.write([_line(n)]), sig)  # noqa: B023
        interrupted += raised
        assert _lock_is_free(path), f"the lock stayed taken after a signal at point {step}"
        assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)] \
            == handlers, f"a handler was left swapped after a signal at point {step}"
        if seen < step:
            break
        log.close()  # as the store does at the end of a run
    assert interrupted > 50  # the signal did land (the deferral re-raises it after the append)
    lines, legacy = read_chained(path)  # every line chained to the one before
    assert legacy == 0 and len(lines) >= 3


def test_no_signal_is_lost_and_one_held_back_comes_out_after_the_append(
        tmp_path: Path) -> None:
    """At every point, the append either did not happen or happened whole, and
    the KeyboardInterrupt comes out either way: deferred, never dropped."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1)])
    total, _ = interrupt_at(0, lambda: log.write([_line(2)]))
    written, n = 2, 2
    after = 0
    for step in range(1, total + 1):
        n += 1
        _, raised = interrupt_at(step, lambda: log.write([_line(n)]))  # noqa: B023
        assert raised, f"the signal at point {step} was lost"
        seqs = [x.line["seq"] for x in read_chained(path)[0]]
        if seqs[-1] == n:
            written += 1
            after += 1
        assert len(seqs) == written
    assert after > 10  # held back until the append was whole, then raised


def test_ctrl_c_ends_a_wait_for_a_lock_another_process_holds(tmp_path: Path) -> None:
    """The deferral does not make a process deaf while another one holds the lock
    (one stopped with Ctrl-Z, say): the wait ends, and nothing is left locked."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # else: a hang
    path = tmp_path / "audit.jsonl"
    AuditLog(path).write([_line(1)])
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR);"
         " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)",
         str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        log = AuditLog(path)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            log.write([_line(2)])
        assert time.monotonic() - started < 60
        timer.join()
    finally:
        holder.kill()
        holder.wait()
    assert _lock_is_free(path)
    log.write([_line(3)])  # and the same log goes on
    assert [x.line["seq"] for x in read_chained(path)[0]] == [1, 3]


def test_handlers_come_back_even_if_one_raises_as_it_is_restored() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        with pytest.raises(KeyboardInterrupt), signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        assert signal.getsignal(signal.SIGTERM) is on_term
        assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT]
    finally:
        signal.signal(signal.SIGTERM, before[signal.SIGTERM])
