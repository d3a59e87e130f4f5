"""A change killed between its append and its commit, then made again.

The killed change N leaves its lines in the log with no ``rolled_back`` line
(its process is gone).  When another agent's line comes after them, the next
change of the agent -- numbered N again, since N never committed -- must still
write N's ``rolled_back`` line before its own lines: one written later (by
``audit verify``) would follow the committed change N, and a reader taking it
for that change's would leave a committed change out (and verify would then
fail, the store having one more change than the log).  And a log that already
holds such a late line (written by an earlier rotifer) is read right.

The kill is real: a child process runs the operation (a gene's write or delete,
the deployer's delete of a key or a category, an agent's removal, an import)
and SIGKILLs itself the moment ``log_change`` returns (its lines appended,
nothing committed).  An import is the one change not retried under its number:
it makes a new memory (a new epoch), so its killed lines stay outside the
history instead.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import MemoryStore
from rotifer.memory.audit.history import audit_history
from rotifer.memory.audit.text import rolled_back_line
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.clock import format_time

from .conftest import StoreFactory
from .helpers import audit_lines, gene_id

A = gene_id("a")

KILLED = '''
import os, signal, sys
from pathlib import Path
from rotifer.memory import MemoryStore
from rotifer.memory.engine import changes

from rotifer.memory import ManualClock
clock = ManualClock(sys.argv[5]) if len(sys.argv) > 5 else None  # a clock that stands still
store = MemoryStore.open(Path(sys.argv[1]), url=sys.argv[2], clock=clock)
op = sys.argv[3]

def trace(frame, event, arg):
    if event == "call" and frame.f_code is changes.log_change.__code__:
        return on_return
    return None

def on_return(frame, event, arg):
    if event == "return":  # its lines appended, its transaction open: killed here
        os.kill(os.getpid(), signal.SIGKILL)
    return on_return

sys.settrace(trace)
if op == "write":
    store.for_gene("agent", sys.argv[4], "d").write_memory("k", b"killed", "CONTEXT")
elif op == "delete":
    store.for_gene("agent", sys.argv[4], "d").delete_memory("old")
elif op == "delete_key":
    store.deployer("agent").delete_key("old")
elif op == "delete_category":
    store.deployer("agent").delete_category("CONTEXT")
elif op == "drop_agent":
    store.drop_agent("agent")
elif op == "import":
    from rotifer.memory.transfer import import_agent
    import_agent(store, Path(sys.argv[4]))
sys.exit("not killed")
'''

#: The same operation again (it commits this time), by operation.
RETRY = {
    "write": lambda s: s.for_gene("agent", A, "d").write_memory("k", b"retried", "CONTEXT"),
    "delete": lambda s: s.for_gene("agent", A, "d").delete_memory("old"),
    "delete_key": lambda s: s.deployer("agent").delete_key("old"),
    "delete_category": lambda s: s.deployer("agent").delete_category("CONTEXT"),
    "drop_agent": lambda s: s.drop_agent("agent"),
}


def _kill_in(op: str, rot: Path, url: str, *clock: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", KILLED, str(rot), url, op, A, *clock],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    killed = audit_lines(rot)[-1]
    assert killed["agent"] == "agent" and killed["action"] != "rolled_back"
    return killed


def _agent_lines(rot: Path) -> list[dict[str, Any]]:
    return [x for x in audit_lines(rot) if x.get("agent") == "agent"]


@pytest.mark.parametrize("op", sorted(RETRY))
def test_a_change_made_again_after_a_kill_settles_the_killed_one_first(
        store_factory: StoreFactory, store: MemoryStore, rot: Path, op: str) -> None:
    store.for_gene("agent", A, "d").write_memory("old", b"v", "CONTEXT")
    store.create_agent("other")
    killed = _kill_in(op, rot, store_factory.url())
    # Another agent's line comes after the killed change's: it is not the log's last.
    store.for_gene("other", A, "d").write_memory("x", b"y", "CONTEXT")
    RETRY[op](store)
    lines = _agent_lines(rot)
    n = killed["seq"]
    rolled = [i for i, x in enumerate(lines) if x["action"] == "rolled_back"]
    assert [lines[i]["seq"] for i in rolled] == [n], lines
    retried = [i for i, x in enumerate(lines)
               if x["seq"] == n and x["action"] != "rolled_back" and x["ts"] != killed["ts"]]
    assert retried and rolled[0] < retried[0], "the rolled_back line comes before the retry's"
    report = verify_agent(store, "agent")  # by the history index, where it can
    assert report.ok and report.repaired == 0, report.message
    for _ in range(2):
        report = verify_agent(store, "agent", full=True)
        assert report.ok and report.repaired == 0, report.message
    shown = [x for x in audit_history(store, "agent") if x.get("seq") == n]
    assert shown and all(x["ts"] != killed["ts"] for x in shown)


def test_a_late_rolled_back_line_does_not_hide_the_committed_change_of_its_number(
        store_factory: StoreFactory, store: MemoryStore, rot: Path) -> None:
    """A log an earlier rotifer left: the killed change N, another agent's line,
    the retried change N (committed, with no rolled_back line before it), then
    N's rolled_back line appended by ``audit verify``.  The late line names the
    killed change, not the committed one."""
    store.create_agent("other")
    store.for_gene("agent", A, "d").write_memory("old", b"v", "CONTEXT")
    killed = _kill_in("write", rot, store_factory.url())
    store.for_gene("other", A, "d").write_memory("x", b"y", "CONTEXT")
    n = killed["seq"]
    RETRY["write"](store)
    # The log as that rotifer wrote it: no rolled_back line before the retry
    # (the chain, and the anchor the store committed, as they were then).
    head = _rewrite_without_rolled_back(rot)
    store.audit.close()
    with store.backend.write("agent") as tx:
        record = tx.get_agent("agent")
        assert record is not None and record.next_seq == n + 1
        tx.update_agent("agent", record.used_bytes, record.next_seq, record.last_us, head)
        tx.set_indexed("agent", record.epoch, False, [])
    # ...and verify then appended it, after the committed change N.
    late = rolled_back_line("2026-03-01T12:00:09.000000Z", "agent", n,
                            "found by audit verify: its process ended before the commit",
                            epoch=killed.get("epoch", ""))
    store.audit.write([late])
    for _ in range(2):
        report = verify_agent(store, "agent", full=True)
        assert report.ok and report.repaired == 0, report.message
    shown = [x for x in audit_history(store, "agent") if x.get("seq") == n]
    assert [x["key"] for x in shown] == ["k"] and shown[0]["ts"] != killed["ts"]
    assert store.for_gene("agent", A, "d").read_memory("k") is not None


def _rewrite_without_rolled_back(rot: Path) -> str:
    """The log without the agent's rolled_back lines, its chain recomputed;
    returns the hash of the agent's last line (its anchor)."""
    from rotifer.memory.audit.text import line_hash

    path = rot / "audit.jsonl"
    out: list[str] = []
    prev: str | None = None
    head = ""
    for text in path.read_text().splitlines():
        line = json.loads(text)
        if line.get("agent") == "agent" and line["action"] == "rolled_back":
            continue
        line.pop("prev", None)
        line["prev"] = prev
        body = json.dumps(line, separators=(",", ":"), ensure_ascii=False)
        out.append(body)
        prev = line_hash(body.encode())
        if line.get("agent") == "agent":
            head = prev
    path.write_text("\n".join(out) + "\n")
    return head


def test_a_failed_change_is_settled_before_the_next_change_of_the_agent_begins(
        store_factory: StoreFactory, store: MemoryStore, rot: Path) -> None:
    """A change interrupted after its append asks the store whether it committed
    and writes its rolled_back line holding the agent: a change of the agent
    started meanwhile (another process) waits, so the line never follows that
    change's lines of the same number."""
    import threading

    from rotifer.memory.audit.log import AuditLog
    from rotifer.memory.engine import changes

    other = store_factory(rot)
    retried = threading.Event()

    def retry() -> None:
        other.for_gene("agent", A, "d").write_memory("k", b"retried", "CONTEXT")
        retried.set()

    worker = threading.Thread(target=retry)

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code is changes.log_change.__code__:
            return cut_off
        return None

    def cut_off(frame: Any, event: str, arg: Any) -> Any:
        if event == "return":  # a Ctrl-C landing just after the append (as interrupt_at does)
            signal.default_int_handler(signal.SIGINT, frame)
        return cut_off

    def watch(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is AuditLog.write.__code__ \
                and frame.f_back.f_code is changes.settle.__code__ and not worker.is_alive():
            # Settling: the store said "not committed"; another writer starts now.
            worker.start()
            retried.wait(1)

    sys.settrace(trace)  # (the trace ends where the interrupt comes out of it)
    sys.setprofile(watch)
    try:
        with pytest.raises(KeyboardInterrupt):
            store.for_gene("agent", A, "d").write_memory("k", b"cut", "CONTEXT")
    finally:
        sys.settrace(None)
        sys.setprofile(None)
    worker.join(60)
    assert retried.is_set()
    lines = _agent_lines(rot)
    assert [(x["action"], x["seq"]) for x in lines] == [
        ("write", 1), ("rolled_back", 1), ("write", 1)], lines
    for _ in range(2):
        report = verify_agent(store, "agent", full=True)
        assert report.ok and report.repaired == 0, report.message


def test_a_change_appended_in_batches_is_one_change_not_a_rolled_back_one(
        store_factory: StoreFactory, store: MemoryStore, rot: Path) -> None:
    """A move's lines go out a thousand at a time, all of them of one change (one
    number, one time): the second batch continues the first, it is no retry of
    it, so no rolled_back line comes between them (one did, and the replay then
    took the move's first batch for a change that never committed)."""
    from rotifer.memory.transfer import move_agent
    from rotifer.memory.transfer.operations import LINES_PER_WRITE

    memory = store.for_gene("agent", A, "d")
    for i in range(LINES_PER_WRITE + 5):
        memory.write_memory(f"k/{i}", b"v", "CONTEXT")
    other = store_factory(rot, name="other")
    move_agent(store, other, "agent")
    lines = _agent_lines(rot)
    assert not [x for x in lines if x["action"] == "rolled_back"]
    assert sum(x["action"] == "move_out" for x in lines) == LINES_PER_WRITE + 5
    report = verify_agent(other, "agent", full=True)
    assert report.ok and report.repaired == 0, report.message
    shown = list(audit_history(other, "agent"))
    assert sum(x["action"] == "move_out" for x in shown) == LINES_PER_WRITE + 5


@pytest.mark.parametrize("between", [False, True], ids=["last", "behind another agent"])
def test_a_retry_timed_like_the_killed_change_still_settles_it_first(
        store_factory: StoreFactory, store: MemoryStore, rot: Path, between: bool) -> None:
    """A clock that stood still (or stepped back behind the agent's last change):
    the retried change gets the very time of the killed one, ``last_us + 1``.
    Its lines are no continuation of the killed change's, so the killed one's
    rolled_back line still goes first (the replay groups a change's lines by
    number and time: without it the two would read as one change)."""
    store.for_gene("agent", A, "d").write_memory("old", b"v", "CONTEXT")
    store.create_agent("other")
    killed = _kill_in("write", rot, store_factory.url(), format_time(store.clock.now_us()))
    if between:
        store.for_gene("other", A, "d").write_memory("x", b"y", "CONTEXT")
    RETRY["write"](store)
    lines = _agent_lines(rot)
    assert [(x["action"], x["seq"], x["ts"]) for x in lines[-3:]] == [
        ("write", killed["seq"], killed["ts"]), ("rolled_back", killed["seq"], killed["ts"]),
        ("write", killed["seq"], killed["ts"])]
    for full in (False, True, True):
        report = verify_agent(store, "agent", full=full)
        assert report.ok and report.repaired == 0, report.message
    shown = [x for x in audit_history(store, "agent") if x.get("seq") == killed["seq"]]
    assert [(x["key"], x["bytes"]) for x in shown] == [("k", len(b"k") + len(b"retried"))]


def test_a_killed_import_lies_outside_the_history_of_the_import_made_again(
        store_factory: StoreFactory, store: MemoryStore, rot: Path, tmp_path: Path) -> None:
    """An import makes a new memory with a new epoch: the one killed after its lines
    went out and the one run again are two memories, not one change numbered twice.
    The killed one's lines get no rolled_back line (nothing in the store names their
    epoch), and neither ``audit verify`` nor ``show`` counts them."""
    from rotifer.memory.transfer import export_agent

    store.for_gene("agent", A, "d").write_memory("old", b"v", "CONTEXT")
    export_agent(store, "agent", tmp_path / "agent.json")
    store.drop_agent("agent")
    done = subprocess.run([sys.executable, "-c", KILLED, str(rot), store_factory.url(), "import",
                           str(tmp_path / "agent.json")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    killed = audit_lines(rot)[-1]
    assert killed["action"] in ("import_agent", "import"), killed
    assert not store.has_agent("agent")
    from rotifer.memory.transfer import import_agent

    import_agent(store, tmp_path / "agent.json")
    lines = _agent_lines(rot)
    assert not [x for x in lines if x["action"] == "rolled_back"]
    report = verify_agent(store, "agent", full=True)
    assert report.ok and report.repaired == 0, report.message
    shown = list(audit_history(store, "agent"))
    assert killed["epoch"] not in {x.get("epoch") for x in shown}
    assert [x["action"] for x in shown].count("import_agent") == 1
