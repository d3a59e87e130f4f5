"""Time and truth (issue 15): times taken under the agent's lock, a change
sequence number on every line, no line claiming a change that was not made,
and a log that can be checked against the store."""

from __future__ import annotations

import itertools
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from rotifer.memory import AgentMemoryError, ManualClock, MemoryStore
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.clock import parse_time
from rotifer.memory.engine.changes import Change, settle

from .conftest import StoreFactory
from .helpers import audit_lines, gene_id

A = gene_id("a")


@pytest.fixture
def agent_quota() -> int:
    return 100_000


def test_times_strictly_increase_when_the_clock_steps_back_or_stands_still(
        store: MemoryStore, clock: ManualClock, tmp_path: Path) -> None:
    g = store.for_gene("agent", A, "d")
    first = g.write_memory("a", b"1", "CONTEXT")
    second = g.write_memory("b", b"2", "CONTEXT")  # the clock has not moved
    clock.advance(hours=-1)  # and now it steps back
    third = g.write_memory("c", b"3", "CONTEXT")
    g.delete_memory("a")
    times = [parse_time(e.updated_at) for e in (first, second, third)]
    assert times[0] < times[1] < times[2]
    assert parse_time(third.created_at) == times[2]
    stamps = [parse_time(line["ts"]) for line in audit_lines(tmp_path / ".rotifer")]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    newest = [e.key for e in g.query_memory({})]
    assert newest == ["c", "b"]  # query order is commit order


def test_time_is_taken_while_the_change_holds_the_agent(
        store_factory: StoreFactory, store: MemoryStore, clock: ManualClock,
        tmp_path: Path) -> None:
    """A writer that waits for the agent's lock stamps its change with the time it
    got the lock, not the time it asked."""
    other = store_factory(tmp_path / ".rotifer", clock=clock)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with other.backend.write("agent") as tx:
            tx.get_agent("agent")  # a transaction holds the agent from its first statement
            holding.set()
            release.wait(10)
            clock.advance(seconds=30)  # time passes while the lock is held

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    asked = clock.now_us()
    result: list[object] = []
    writer = threading.Thread(target=lambda: result.append(
        store.for_gene("agent", A, "d").write_memory("k", b"v", "CONTEXT")))
    writer.start()
    time.sleep(0.2)  # the writer is now waiting for the lock
    release.set()
    holder.join()
    writer.join()
    entry = result[0]
    assert parse_time(entry.updated_at) >= asked + 30_000_000  # type: ignore[attr-defined]


def test_every_line_of_a_change_carries_its_seq_and_the_chain(
        store: MemoryStore, tmp_path: Path) -> None:
    g = store.for_gene("agent", A, "d")
    g.write_memory("a", b"1", "CONTEXT")
    g.write_memory("a", b"22", "CONTEXT")
    with pytest.raises(AgentMemoryError):
        store.for_gene("agent", gene_id("b"), "elsewhere").delete_memory("a")  # refused: a change too
    g.delete_memory("a")
    lines = audit_lines(tmp_path / ".rotifer")
    seqs = [line["seq"] for line in lines]
    assert seqs == list(range(seqs[0], seqs[0] + 4))
    assert all(isinstance(line["prev"], str) for line in lines[1:])
    assert verify_agent(store, "agent").ok


class _Interrupt(BaseException):
    pass


def test_interrupted_changes_never_leave_a_phantom_line(
        store: MemoryStore, tmp_path: Path) -> None:
    """A timer signal raises at random points of a few hundred changes (as the
    gene deadline does); afterwards every logged change is in the store and every
    change that was not committed has its rolled_back line."""
    store.clock = __import__("rotifer.memory.clock", fromlist=["SystemClock"]).SystemClock()
    g = store.for_gene("agent", A, "d")
    rng = random.Random(15)

    armed = [False]

    def on_alarm(signum: int, frame: object) -> None:
        if armed[0]:
            raise _Interrupt()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    interrupted = 0
    try:
        for n in range(400):
            try:
                armed[0] = True
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.00005, 0.002))
                g.write_memory(f"k{n % 37}", b"x" * rng.randrange(1, 50), "CONTEXT")
                if n % 5 == 0:
                    g.delete_memory(f"k{(n + 3) % 37}")
            except (_Interrupt, AgentMemoryError):
                interrupted += 1
            finally:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    report = verify_agent(store, "agent", repair=False)
    assert report.ok, report.message
    assert interrupted > 0
    lines = audit_lines(tmp_path / ".rotifer")
    pairs = list(itertools.pairwise(lines))
    assert not [a for a, b in pairs if a["action"] == b["action"] == "rolled_back"
                and a["seq"] == b["seq"]], "a change marked rolled_back twice"


PHANTOM = '''
import os, signal, sys
from pathlib import Path
from rotifer.memory import MemoryStore
from rotifer.memory.engine.changes import Change, log_change
store = MemoryStore.open(Path(sys.argv[1]), url=sys.argv[2])
with store.backend.write("agent") as tx:
    record = tx.get_agent("agent")
    change = Change("agent", record.last_us + 1, "v2:dead", seq=record.next_seq,
                    epoch=record.epoch)
    change.line("write", "ghost", None, 9)
    tx.update_agent("agent", record.used_bytes, record.next_seq + 1, change.now_us)
    log_change(tx, store.audit, "agent", record.next_seq, change.lines, change)
    os.kill(os.getpid(), signal.SIGKILL)  # between the append and the commit
'''


def test_the_next_change_marks_a_dead_writers_change_rolled_back(
        store_factory: StoreFactory, store: MemoryStore, tmp_path: Path) -> None:
    """A process SIGKILLed between appending its lines and committing: the next change
    of the agent finds those lines last in the log and writes their rolled_back line."""
    import subprocess
    import sys

    url = store_factory.url()
    done = subprocess.run([sys.executable, "-c", PHANTOM, str(tmp_path / ".rotifer"), url],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    ghost = audit_lines(tmp_path / ".rotifer")[-1]
    assert (ghost["key"], ghost["action"]) == ("ghost", "write")
    store.for_gene("agent", A, "d").write_memory("real", b"v", "CONTEXT")
    lines = audit_lines(tmp_path / ".rotifer")
    assert [(x["action"], x["seq"]) for x in lines[-2:]] == [
        ("rolled_back", ghost["seq"]), ("write", ghost["seq"])]
    assert lines[-2]["reason"].startswith("found at the next change")
    report = verify_agent(store, "agent")
    assert report.ok and report.repaired == 0, report.message


@pytest.mark.parametrize(("exc", "reason"), [
    (AgentMemoryError("MEMORY_STORAGE_ERROR", "gone"),
     "not committed: MemoryError MEMORY_STORAGE_ERROR"),
    (KeyboardInterrupt(), "not committed: KeyboardInterrupt"),
])
def test_a_rolled_back_line_names_the_error_by_its_public_name(
        store: MemoryStore, tmp_path: Path, exc: BaseException, reason: str) -> None:
    """The reason of a rolled_back line names a refused call's error
    ``MemoryError`` (its public name, as lines have always said), other
    exceptions by their class."""
    store.for_gene("agent", A, "d").write_memory("a", b"1", "CONTEXT")
    change = Change("agent", store.clock.now_us(), "d", seq=99)
    change.line("write", "b", None, 1)
    change.logged = change.appended = True
    settle(store.backend, store.audit, store.clock, change, exc)
    last = audit_lines(tmp_path / ".rotifer")[-1]
    assert (last["action"], last["seq"], last["reason"]) == ("rolled_back", 99, reason)
