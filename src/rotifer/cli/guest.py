"""``agent audit show | verify`` of an agent another project moved into this one's store.

``rotifer agent move NAME --to sqlite:OTHER/.rotifer/playground.db`` run in a
project P puts NAME's memory in project OTHER's store.  The agent stays P's: its
spec and binding are there, and every later change of its memory is logged in
P's log, which also holds the move at both ends and the anchor the store
commits.  OTHER's own log records the move too (the agent's history up to the
move, the move and the import, chained in OTHER's log: see
:func:`rotifer.memory.transfer.move_agent`), so that ``audit show`` and ``audit
verify`` run in OTHER, which has no spec of the agent, read it there:

* ``show`` prints the history OTHER's log holds, with a hint saying whose agent
  it is;
* ``verify`` checks OTHER's hash chain and replays the history against the
  store while the store's last change is the move (the anchor is the one in P's
  log: it is not checked here, and the summary says so); once P has changed the
  memory again, the changes since are in P's log only, and ``verify`` checks
  OTHER's chain and says where the rest is.

When P moves the memory out of OTHER's store again, OTHER's log gets the
changes P made there since and the move (:func:`~rotifer.memory.transfer.move_agent`'s
``source_mirror``): ``show`` prints the history up to the move out, and
``verify`` (:func:`verify_moved_away`) checks OTHER's chain and replays that
history, which must end with the move and leave nothing in the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rotifer.genes.errors import RotiferError

from . import common

if TYPE_CHECKING:
    from rotifer.memory.store import MemoryStore


def moved_in(store: MemoryStore, name: str) -> str | None:
    """The store ``name``'s memory in ``store`` was moved from by another project
    (the ``source`` of the ``import_agent`` line of its current memory in this
    project's log), or None when it was not moved in."""
    from rotifer.memory.audit.read import LogProblem, scan

    path = store.audit.path
    with store.backend.read() as tx:
        record = tx.get_agent(name)
    if record is None or path is None or not record.epoch:
        return None
    try:
        for logged in scan(path, name, chain=False, only=b'"import_agent"'):
            line = logged.line
            if line.get("epoch") == record.epoch and line.get("via") == "move":
                return str(line.get("source", "another store")).removeprefix("move:")
    except LogProblem:
        return None
    return None


def moved_away(store: MemoryStore, name: str) -> bool:
    """Was ``name``'s memory in this project's store (moved in by another project,
    or kept here by one whose configured store this is) and moved out of it by
    that project?  The store has no memory of it now, and the last memory of it
    this project's log saw end ended with a ``move`` that nothing in this log
    continues -- or the log holds a move into this store (one moved out again by
    an older rotifer, which wrote nothing here)."""
    from rotifer.memory.audit.actions import MOVE
    from rotifer.memory.audit.lineage import memory_end
    from rotifer.memory.audit.read import LogProblem, scan

    path = store.audit.path
    if path is None or store.has_agent(name):
        return False
    try:
        ended = memory_end(path, name)
        return (ended is not None and ended[0] == MOVE) or any(
            logged.line.get("via") == "move"
            for logged in scan(path, name, chain=False, only=b'"import_agent"'))
    except LogProblem:
        return False


def gone(name: str) -> str:
    """What is said of a memory moved out of this project's store whose history
    this project's log does not hold."""
    return (f"no agent '{name}' here: its memory was in this project's store until the "
            "project that keeps its spec moved it out; that project's log holds its history")


def hint(name: str, source: str) -> None:
    common.hint(f"agent '{name}' has no spec in this project: its memory was moved here "
                f"from {source} by the project that keeps its spec, whose log holds its "
                "changes since; this is the history this project's log holds")


def verify_guest(store: MemoryStore, name: str, source: str) -> str:
    """``audit verify`` of a memory moved in (see the module doc); the summary,
    or RotiferError AUDIT_MISMATCH."""
    from rotifer.memory.audit.read import LogProblem, Scan, scan
    from rotifer.memory.audit.verify import verify_agent

    path = store.audit.path
    assert path is not None
    with store.backend.read() as tx:
        record = tx.get_agent(name)
    assert record is not None
    last = record.next_seq - 1
    here = -1
    stats = Scan()
    try:
        for logged in scan(path, name, stats):  # the chain, over the whole log
            if logged.line.get("epoch") == record.epoch and \
                    isinstance(logged.line.get("seq"), int):
                here = max(here, int(logged.line["seq"]))
    except LogProblem as exc:
        raise RotiferError(str(exc), code="AUDIT_MISMATCH") from None
    there = f"`rotifer agent audit verify {name}` in the project that keeps its spec"
    if here < last:
        later = f"change {last}" if here + 1 == last else f"changes {here + 1} to {last}"
        return (f"agent {name!r}: this log holds its history up to change {here}, its move "
                f"here from {source}; {later} {'is' if here + 1 == last else 'are'} in the "
                f"log of the project that keeps its spec, checked by {there}; hash chain "
                f"intact over {common.plural(stats.lines, 'line')}")
    report = verify_agent(store, name, repair=False, anchor=False)
    if not report.ok:
        raise RotiferError(report.message, code="AUDIT_MISMATCH")
    return (f"{report.message}; it was moved here from {source}: its anchor is in the log "
            f"of the project that keeps its spec, checked by {there}")

def verify_moved_away(store: MemoryStore, name: str) -> str:
    """``audit verify`` of a memory another project moved in and out again: this
    log's hash chain, and its history of the memory replayed up to the move out
    (its last committed change), with nothing left of it in the store; the
    summary, or RotiferError AUDIT_MISMATCH."""
    from rotifer.genes.errors import AgentNotFound
    from rotifer.memory.audit.actions import MOVE
    from rotifer.memory.audit.lineage import find_imports, history_lines, lineage, memory_end
    from rotifer.memory.audit.read import LogProblem, Scan, scan
    from rotifer.memory.audit.replay import Replay, compare

    path = store.audit.path
    assert path is not None
    stats = Scan()
    out: dict[str, object] | None = None
    try:
        ended = memory_end(path, name)
        for logged in scan(path, name, stats):  # the chain, over the whole log
            if logged.line.get("action") == MOVE and ended is not None and \
                    logged.line.get("epoch", "") == ended[1]:
                out = logged.line
        if out is None or ended is None or ended[0] != MOVE:  # moved out by an older rotifer
            raise AgentNotFound(gone(name))
        imports, _ = find_imports(path, name)
        replay = Replay(name)
        for logged in history_lines(path, name, lineage(str(out.get("epoch", "")), imports)):
            replay.feed(logged)
        replay.finish(None, False)
        with store.backend.read() as tx:
            compare(replay, tx, name)
        if replay.exists is not False:
            raise LogProblem(f"the history of {name!r} in this log does not end with its move "
                             "out of this project's store (the log was cut or rewritten)")
    except LogProblem as exc:
        raise RotiferError(str(exc), code="AUDIT_MISMATCH") from None
    return (f"agent {name!r}: {common.plural(replay.changes, 'committed change')}, "
            f"{common.plural(replay.lines, 'line')} up to change {out.get('seq')}, its move "
            f"out of this project's store to {out.get('to', 'another store')} by the project "
            "that keeps its spec, whose log holds its history since; hash chain intact over "
            f"{common.plural(stats.lines, 'line')}")


__all__ = ["gone", "hint", "moved_away", "moved_in", "verify_guest", "verify_moved_away"]
