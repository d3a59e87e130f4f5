"""Subprocess side of the interruption tests: an agent run over and over while
something interrupts it, in a process that survives every interruption.

Run as ``python interrupt.py MODE PROJECT SECONDS SEED``; prints ``ready``, then
runs agent ``bot`` (gene ``churner``: a burst of writes, updates, deletes and
evicting writes) for SECONDS, and prints one JSON object ``{"runs": n,
"interrupted": n, "completed": n}``.  Modes:

``signals``
    The parent sends SIGINT and SIGTERM at random moments.  SIGINT is Python's
    KeyboardInterrupt; SIGTERM is raised the way the ``rotifer`` command raises
    it (``Terminated``).  Either is caught here and the loop goes on -- only
    while a run is under way (between runs the signals are ignored, so the
    bookkeeping of this script is never what gets interrupted).
``deadline``
    No signals from outside: each run gets a random deadline of 1-60 ms, which
    interrupts the Python gene wherever it is (SIGALRM, see genes/python.py).
"""

from __future__ import annotations

import faulthandler
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

from rotifer.agents.project import Project
from rotifer.agents.run import run_agent
from rotifer.cli.main import Terminated
from rotifer.genes.errors import GeneFailed, GeneUnavailable
from rotifer.memory import AgentMemoryError

CHURNER = '''
def express(input, ctx):
    m = ctx.memory
    n = input["n"]
    for i in range(n):
        key = "k/%02d" % ((input["start"] + i * 7) % 40)
        if i % 6 == 5:
            try:
                m.delete_memory(key)
            except Exception:
                pass
        else:
            cat = ("CACHE", "CONTEXT", "PATTERN")[i % 3]
            m.write_memory(key, b"x" * (1 + (i * 13) % 90), cat)
    return {"done": n}
'''

armed = False
#: Runs the deadline mode wants cut off, and how long past ``seconds`` it may take.
MIN_CUT, EXTRA_S = 8, 60.0


def on_signal(signum: int, frame: object) -> None:
    if armed:
        raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def main(mode: str, root: Path, seconds: float, seed: int) -> dict[str, int]:
    global armed
    rng = random.Random(seed)
    project = Project.find(root)
    # One run before the signals start, so every module is imported: an interrupt
    # inside an import (psycopg's, say) breaks the module for the rest of the
    # process -- Python's doing, not the store's.
    run_agent(project, "bot", {"n": 1, "start": 0})
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    os.write(1, b"ready\n")
    runs = interrupted = completed = 0
    end = time.monotonic() + seconds
    # With deadlines, how many runs are cut off depends on the machine's speed (a
    # contained gene's deadline starts once its process is ready): go on past
    # ``seconds`` until MIN_CUT runs were, for at most EXTRA_S more.
    last = end + (EXTRA_S if mode == "deadline" else 0.0)
    while time.monotonic() < end or (interrupted < MIN_CUT and time.monotonic() < last):
        runs += 1
        deadline = rng.uniform(0.001, 0.06) if mode == "deadline" else 30.0
        value = {"n": rng.randrange(5, 40), "start": rng.randrange(40)}
        try:
            armed = True
            try:
                run_agent(project, "bot", value, deadline_s=deadline)
            finally:
                armed = False
            completed += 1
        except (KeyboardInterrupt, GeneFailed, GeneUnavailable, AgentMemoryError):
            # GeneUnavailable: a signal that lands while the contained gene's process
            # is forked runs this process's handler in the child too, which fails
            # the start (no change was made; see docs/reliability.md).
            interrupted += 1
    return {"runs": runs, "interrupted": interrupted, "completed": completed}


if __name__ == "__main__":
    # A hang (the audit lock once stayed taken: rotifer/memory/signals.py) ends
    # with every thread's stack on stderr, which the test shows, rather than
    # as a bare timeout of the test's wait.
    faulthandler.dump_traceback_later(float(sys.argv[3]) + EXTRA_S + 30, exit=True)
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]),
                          int(sys.argv[4]))))
