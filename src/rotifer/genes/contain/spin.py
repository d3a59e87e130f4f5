"""A short, bounded spin before a bridge's read sleeps.

Why: a memory call is a round trip between two processes, and on this kind of
machine (a VM) much of a round trip is the sleep and wake-up of the side that
waits -- an idle core of the VM takes tens of microseconds to come back (a
bare one-byte round trip over two pipes is twenty times slower sleeping in
``poll`` than spinning), and a process that slept finds its caches cold.  A side
that keeps trying a non-blocking read for a little while finds the answer
there when the other side answers quickly, and neither side pays the sleep or
the wake-up: a contained gene's writes take about half the time they took
without it (docs/benchmarks.md, "Containment", has the figures); the cost is
the CPU the waiting side burns meanwhile.

Why it is safe on a busy machine: the spin is bounded (:data:`SPIN_S`), a
try that took long (:data:`BUSY_S`: another process had the core meanwhile)
ends it -- there a sleeper woken by the answer gets the core sooner than a
spinner -- and it backs off: after a spin that found nothing the reader
sleeps at once on its next wait, after two in a row on its next two, then
four, up to :data:`MOST_SKIPPED` -- where the waits are longer than a spin (a
gene that computes between its calls, a slow query) that is one spin in 64
waits; a spin that finds its answer resets it.  (An average of the waits does
not work as the rule: while neither side spins each also waits for the
other's wake-up, the waits look long, and neither ever starts.)  The core is
not given up between tries: ``sched_yield`` hands it to any runnable process
for its whole time slice, and beside CPU-bound processes that made the writes
twice as slow as no spin at all (this one costs little there).  Past the
spin the caller sleeps in ``poll`` as before, bounded by its deadline; a
signal meanwhile is handled as anywhere in Python code.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

#: The longest spin: a little over the parent's time to serve a write (on a
#: quiet machine) and the gene's process's to make its next call, so both
#: sides of a round trip can stay awake.
SPIN_S = 400e-6
#: After spins that found nothing, at most this many reads in a row sleep at once.
MOST_SKIPPED = 64
#: A try that took longer than this lost the core to another process for a
#: while: the machine is busy, and the spin ends there.
BUSY_S = 50e-6

_clock = time.perf_counter
_T = TypeVar("_T")


class Spinner:
    """Waits of one reader, each retried for a while before it sleeps,
    unless the last spins found nothing (see the module's docstring)."""

    __slots__ = ("backoff", "skip")

    def __init__(self) -> None:
        self.backoff = 0  # waits the last spin that found nothing skipped (0: it found)
        self.skip = 0  # waits left that sleep at once

    def wait(self, ready: Callable[[], _T | None], sleep: Callable[[], _T]) -> _T:
        """What ``ready`` (a non-blocking try: None when there is nothing yet)
        returns, tried again and again for up to :data:`SPIN_S`; else what
        ``sleep`` returns (a wait in ``poll``, bounded by the caller)."""
        got = ready()
        if got is not None:
            return got
        if self.skip:
            self.skip -= 1
            return sleep()
        now = _clock()
        end = now + SPIN_S
        while now < end:
            got = ready()
            if got is not None:
                self.backoff = 0
                return got
            then, now = now, _clock()
            if now - then > BUSY_S:  # another process had the core meanwhile
                break
        self.backoff = min(MOST_SKIPPED, 2 * self.backoff or 1)
        self.skip = self.backoff
        return sleep()
