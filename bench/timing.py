"""Interleaved timing: the compared operations take turns, round after round.

On a noisy, shared machine an absolute figure drifts by tens of percent
between runs; the *ratio* of two operations measured in the same rounds does
not, as long as both see the same noise.  So :func:`compare` runs every
operation ``iters`` times per round, rotates the order each round, and
reports each operation's median time per call over the rounds.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Op = Callable[[], object]


@dataclass(frozen=True)
class Settings:
    """How much to measure: ``rounds`` of ``iters`` calls per operation."""

    rounds: int = 31
    iters: int = 40
    #: Rounds of the subprocess comparisons (one command per round each).
    cli_rounds: int = 15
    #: Entry counts of the agents the store is measured at.
    scales: tuple[int, ...] = (100, 10_000, 100_000)
    #: Entry counts compared with an agent of 100 by the scaling suite.
    scaling: tuple[int, ...] = (10_000, 1_000_000)
    #: Value sizes in bytes.
    sizes: tuple[int, ...] = (100, 10 * 1024)
    #: Worker process counts of the latency suite (all on one agent).
    procs: tuple[int, ...] = (1, 4, 16)
    #: Loops of the four calls each latency worker times.
    loops: int = 400

    @property
    def calls(self) -> int:
        return self.rounds * self.iters


FULL = Settings()
QUICK = Settings(rounds=7, iters=10, cli_rounds=5, scales=(100, 10_000), loops=100,
                 scaling=(10_000, 100_000))
#: For tests of the harness itself: a handful of calls, tiny agents.
TINY = Settings(rounds=3, iters=2, cli_rounds=2, scales=(100, 200), sizes=(100,),
                procs=(1, 2), loops=4, scaling=(300,))


def _samples(ops: Mapping[str, Op], *, rounds: int, iters: int, warmup: int,
             clock: Callable[[], float]) -> dict[str, list[float]]:
    """Seconds per call of each operation in each round: the operations take
    turns, each round starting one further along (so none is always first), with
    the garbage collector run before and paused during each batch."""
    names = list(ops)
    for name in names:
        for _ in range(warmup):
            ops[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            op = ops[name]
            gc.collect()
            gc.disable()
            try:
                start = clock()
                for _ in range(iters):
                    op()
                elapsed = clock() - start
            finally:
                gc.enable()
            samples[name].append(elapsed / iters)
    return samples


def compare(ops: Mapping[str, Op], *, rounds: int, iters: int, warmup: int = 1,
            cpu: bool = False, clock: Callable[[], float] | None = None
            ) -> dict[str, float]:
    """Median seconds per call of each operation, measured in interleaved rounds.

    ``cpu``: this thread's CPU time (``time.thread_time``) instead of the wall
    clock: time spent waiting for a core on a loaded machine is left out, so
    the ratios move less with the load (system calls still count; time the
    PostgreSQL server spends does not).  ``clock``: any other clock (e.g.
    ``time.process_time``, this process's CPU time)."""
    if clock is None:
        clock = time.thread_time if cpu else time.perf_counter
    samples = _samples(ops, rounds=rounds, iters=iters, warmup=warmup, clock=clock)
    return {name: statistics.median(values) for name, values in samples.items()}


def compare_paired(ops: Mapping[str, Op], base: str, *, rounds: int, iters: int,
                   warmup: int = 1, cpu: bool = True) -> tuple[dict[str, float],
                                                              dict[str, float]]:
    """Like :func:`compare` (CPU time by default), and each operation's paired
    ratio to ``base``: the median over the rounds of (its time / ``base``'s time
    in the same round), which the load of a round moves less than a ratio of
    medians.  Returns (medians, paired ratios)."""
    clock = time.thread_time if cpu else time.perf_counter
    samples = _samples(ops, rounds=rounds, iters=iters, warmup=warmup, clock=clock)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ratios = {name: statistics.median(a / b for a, b in zip(values, samples[base], strict=True)
                                      if b > 0)
              for name, values in samples.items() if name != base}
    return medians, ratios
