"""Reading the audit log back: is it intact, and does it agree with the store?

:func:`verify_agent` (``rotifer agent audit verify``) does three things:

1. Checks the hash chain over every line of every file of the log (the
   rolled-over ``audit.jsonl.N`` oldest first, then ``audit.jsonl``): each
   line's ``prev`` must be the SHA-256 of the line before it, and the first
   line's ``prev`` must be ``null``.  An edited, removed, inserted or reordered
   line breaks the link of the line after it.  Lines written by an older
   rotifer (no ``prev``) are counted and reported, not checked.
2. Decides which of the agent's changes were committed, from the lines and
   the store alone.  Committed changes of an agent are numbered 1, 2, 3, ...
   without gaps (see :mod:`rotifer.memory.changes`), so a change numbered N
   was *not* committed if a ``rolled_back`` line names N, or the next change
   in the log is numbered N again, or it is the agent's last change and the
   store's ``next_seq`` is still N.  Any other jump in numbers is reported.
3. Replays the committed changes (key -> category, bytes, createdBy) and
   compares the result, and the last committed number, with the store.

Changes found not committed that have no ``rolled_back`` line yet (their
process died) get one appended, unless ``repair=False``.  All of this runs
holding the agent (a write transaction that changes nothing), so no change
of the agent is between appending its lines and committing meanwhile.

With a backend that keeps the lines itself (PostgreSQL's ``memory_audit``,
written in each change's own transaction), step 2 and 3 read them from there
-- only committed changes, in commit order, from every worker -- and step 1
checks the local files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .audit import archives, line_hash, rolled_back_line
from .backend import Transaction
from .clock import format_time, parse_time

if TYPE_CHECKING:
    from .store import MemoryStore

#: Actions that set an entry, and those that remove one.
SETS = frozenset({"write", "update", "import"})
REMOVES = frozenset({"delete", "evict", "expire", "deployer_delete", "move_out", "move_drop"})
#: Actions after which the agent has no memory, and the one that creates it anew.
ENDS = frozenset({"drop_agent", "move"})
STARTS = "import_agent"


class LogProblem(Exception):
    """The first thing found wrong; its message names where."""


@dataclass
class Logged:
    """One line of the log and where it is."""

    line: dict[str, Any]
    where: str


@dataclass
class Group:
    """The lines of one change of the agent (one ``seq``)."""

    seq: int
    lines: list[Logged] = field(default_factory=list)

    @property
    def where(self) -> str:
        return self.lines[0].where

    @property
    def ends_agent(self) -> bool:
        return any(x.line.get("action") in ENDS for x in self.lines)


@dataclass
class Report:
    ok: bool
    message: str
    changes: int = 0
    lines: int = 0
    legacy: int = 0
    repaired: int = 0
    phantoms: list[int] = field(default_factory=list)


def log_files(path: Path) -> list[Path]:
    """Every file of the log, oldest first."""
    return [*archives(path), *([path] if path.exists() else [])]


def read_chained(path: Path) -> tuple[list[Logged], int]:
    """Every complete line of the log, the chain checked; (lines, legacy count).

    Raises :class:`LogProblem` at the first line that is not JSON or whose
    ``prev`` does not name the line before it.
    """
    out: list[Logged] = []
    legacy = 0
    previous: bytes | None = None
    files = log_files(path)
    for index, file in enumerate(files):
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise LogProblem(f"cannot read {file}: {exc.strerror or exc}") from None
        chunks = raw.split(b"\n")
        torn = chunks.pop()  # after the last newline: b"" unless a writer died mid-line
        if torn and index != len(files) - 1:
            raise LogProblem(f"{file.name} ends in half a line but is not the newest file")
        for number, chunk in enumerate(chunks, 1):
            where = f"{file.name} line {number}"
            try:
                line = json.loads(chunk)
            except ValueError:
                raise LogProblem(f"{where} is not JSON (edited or damaged)") from None
            if not isinstance(line, dict):
                raise LogProblem(f"{where} is not a JSON object (edited or damaged)")
            if "prev" not in line:
                legacy += 1
            else:
                expected = None if previous is None else line_hash(previous)
                if line["prev"] != expected:
                    what = ("the log starts mid-chain: the line before it is missing (a "
                            "removed line or file)") if previous is None else (
                        "it does not follow the line before it: a line was edited, removed, "
                        "inserted or reordered here")
                    raise LogProblem(f"{where}: broken hash chain -- {what}")
            previous = chunk
            out.append(Logged(line, where))
    return out, legacy


def _groups(lines: list[Logged], agent: str) -> Iterator[Group | Logged]:
    """The agent's changes (lines sharing a seq, contiguous) and its other lines."""
    group: Group | None = None
    for logged in lines:
        line = logged.line
        if line.get("agent") != agent:
            continue
        seq = line.get("seq")
        if line.get("action") == "rolled_back" or not isinstance(seq, int):
            if group is not None:
                yield group
                group = None
            yield logged
            continue
        if group is not None and group.seq == seq and group.lines[-1].line.get("ts") == \
                line.get("ts"):
            group.lines.append(logged)
            continue
        if group is not None:
            yield group
        group = Group(seq, [logged])
    if group is not None:
        yield group


State = dict[str, tuple[str, int, str | None]]


def _apply(state: State, logged: Logged) -> None:
    line = logged.line
    action, key = line.get("action"), str(line.get("key"))
    if action in SETS:
        if action == "update":
            if key not in state:
                raise LogProblem(f"{logged.where}: updates {key!r}, which the log never wrote")
            creator = state[key][2]
        else:
            creator = line.get("createdBy") if action == "import" else line.get("actor")
        state[key] = (str(line.get("category")), int(line.get("bytes") or 0), creator)
    elif action in REMOVES:
        if state.pop(key, None) is None:
            raise LogProblem(f"{logged.where}: removes {key!r}, which the log never wrote")
    elif action in ENDS or action == STARTS:
        state.clear()


@dataclass
class Replay:
    state: State = field(default_factory=dict)
    exists: bool | None = None  # None: the log never said
    last_seq: int | None = None
    changes: int = 0
    phantoms: list[Group] = field(default_factory=list)
    explained: set[int] = field(default_factory=set)  # phantom seqs with a rolled_back line


def replay(lines: list[Logged], agent: str, next_seq: int | None, exists: bool) -> Replay:
    """Which changes were committed, and the entries they leave (see the module doc).

    ``next_seq``/``exists``: what the store says now.  Raises :class:`LogProblem`.
    """
    r = Replay()
    pending: Group | None = None

    def commit(group: Group) -> None:
        for logged in group.lines:
            _apply(r.state, logged)
        r.changes += 1
        r.exists = not group.ends_agent
        r.last_seq = None if group.ends_agent else group.seq

    for item in _groups(lines, agent):
        if isinstance(item, Logged):
            line = item.line
            if line.get("action") == "rolled_back":
                if pending is not None and pending.seq == line.get("seq"):
                    r.phantoms.append(pending)
                    r.explained.add(pending.seq)
                    pending = None
            elif "prev" not in line:  # an older rotifer's line: taken as written
                _apply(r.state, item)
            continue
        group = item
        if pending is not None:
            if group.seq == pending.seq:
                r.phantoms.append(pending)  # its number was used again: never committed
            elif group.seq == pending.seq + 1 or pending.ends_agent or \
                    group.lines[0].line.get("action") == STARTS:
                commit(pending)
            else:
                raise LogProblem(f"{group.where}: change {group.seq} follows change "
                                 f"{pending.seq} (a change is missing from the log)")
        elif r.last_seq is not None and group.seq != r.last_seq + 1 and \
                group.lines[0].line.get("action") != STARTS:
            raise LogProblem(f"{group.where}: change {group.seq} follows change {r.last_seq} "
                             "(a change is missing from the log)")
        pending = group
    if pending is not None:
        if pending.ends_agent:
            if exists and next_seq == pending.seq:
                r.phantoms.append(pending)
            else:
                commit(pending)
        elif exists and next_seq == pending.seq + 1:
            commit(pending)
        elif exists and next_seq == pending.seq:
            r.phantoms.append(pending)
        else:
            commit(pending)  # compared with the store below, which names the problem
    return r


def compare(r: Replay, tx: Transaction, agent: str) -> None:
    """Raise :class:`LogProblem` at the first difference between replay and store."""
    record = tx.get_agent(agent)
    if record is None:
        if r.exists and r.state:
            raise LogProblem(f"the log says agent {agent!r} holds {len(r.state)} entries; "
                             "the store has no memory for it")
        return
    if r.last_seq is not None and record.next_seq != r.last_seq + 1:
        raise LogProblem(f"the store has committed {record.next_seq - 1} changes of {agent!r}; "
                         f"the log's last committed change is {r.last_seq}")
    stored: State = {row.key: (row.category.value, row.size, row.created_by)
                     for row in tx.iter_newest(agent)}
    for key in sorted(set(stored) | set(r.state)):
        logged, held = r.state.get(key), stored.get(key)
        if logged == held:
            continue
        if held is None:
            raise LogProblem(f"key {key!r}: the log says {_describe(logged)}; the store has "
                             "no such entry")
        if logged is None:
            raise LogProblem(f"key {key!r}: the store has {_describe(held)}; the log never "
                             "wrote it (or says it was removed)")
        raise LogProblem(f"key {key!r}: the log says {_describe(logged)}; the store has "
                         f"{_describe(held)}")


def _describe(value: tuple[str, int, str | None] | None) -> str:
    if value is None:
        return "nothing"
    category, size, creator = value
    return f"{category}, {size} bytes, created by {creator}"


def verify(tx: Transaction, path: Path, agent: str,
           stored_lines: list[dict[str, Any]] | None = None) -> tuple[Report, Replay | None]:
    """Check the log at ``path`` (and ``stored_lines``, the backend's own copy of
    the agent's committed lines, if it keeps one) against ``tx``'s store."""
    try:
        lines, legacy = read_chained(path)
    except LogProblem as exc:
        return Report(False, str(exc)), None
    record = tx.get_agent(agent)
    source = lines if stored_lines is None else [
        Logged({**line, "prev": None}, f"database line {n}")
        for n, line in enumerate(stored_lines, 1)]
    agent_legacy = sum(1 for x in lines if x.line.get("agent") == agent and "prev" not in x.line)
    try:
        result = replay(source, agent, None if record is None else record.next_seq,
                        record is not None)
        compare(result, tx, agent)
    except LogProblem as exc:
        note = (f" ({agent_legacy} of the agent's lines were written by an older rotifer "
                "without seq or hash chain and were taken as written)") if agent_legacy else ""
        return Report(False, f"{exc}{note}", legacy=legacy), None
    mine = sum(1 for x in source if x.line.get("agent") == agent)
    summary = (f"agent {agent!r}: {result.changes} committed changes, {mine} lines, "
               f"{len(result.state)} entries agree with the store; hash chain intact over "
               f"{len(lines)} lines")
    if legacy:
        summary += (f" ({legacy} older lines without seq or chain, from a rotifer before "
                    "0.x, taken as written)")
    return Report(True, summary, result.changes, mine, legacy,
                  phantoms=[g.seq for g in result.phantoms]), result


def missing_rollbacks(result: Replay, agent: str, now_us: int) -> list[dict[str, Any]]:
    """``rolled_back`` lines for changes found not committed that have none yet."""
    return [rolled_back_line(format_time(now_us), agent, g.seq,
                             "found by audit verify: its process ended before the commit")
            for g in result.phantoms if g.seq not in result.explained]


def history(lines: list[Logged], agent: str, *, key: str | None = None,
            actor: str | None = None, since_us: int | None = None,
            next_seq: int | None = None, exists: bool = True,
            rolled_back: bool = False) -> list[dict[str, Any]]:
    """The agent's committed lines (and refusals made outside any change),
    oldest first; never a value (no line holds one).  ``rolled_back`` keeps the
    lines that say a change did not commit (the change's own lines stay out)."""
    try:
        result = replay(lines, agent, next_seq, exists)
        phantom = {id(x) for g in result.phantoms for x in g.lines}
    except LogProblem:
        phantom = set()
    out = []
    for logged in lines:
        line = logged.line
        if line.get("agent") != agent or id(logged) in phantom or \
                (line.get("action") == "rolled_back" and not rolled_back):
            continue
        if key is not None and line.get("key") != key:
            continue
        if actor is not None and line.get("actor") != actor:
            continue
        if since_us is not None:
            try:
                if parse_time(str(line.get("ts"))) < since_us:
                    continue
            except ValueError:
                continue
        out.append({k: v for k, v in line.items() if k != "prev"})
    return out


def verify_agent(store: MemoryStore, agent: str, *, repair: bool = True) -> Report:
    """Verify ``agent``'s log against ``store`` (see the module doc), holding the agent."""
    path = store.audit.path
    if path is None:
        return Report(False, "this store keeps no audit log")
    with store.backend.write(agent) as tx:
        kept = tx.audit_lines(agent)
        report, result = verify(tx, path, agent, kept)
        if report.ok and repair and result is not None:
            now = store.clock.now_us()
            extra = missing_rollbacks(result, agent, now) if kept is None else \
                _local_phantoms(path, agent, kept, now)
            if extra:
                store.audit.write(extra)
                report.repaired = len(extra)
    return report


def _local_phantoms(path: Path, agent: str, kept: list[dict[str, Any]], now_us: int
                    ) -> list[dict[str, Any]]:
    """With a backend that keeps the committed lines: the changes in the local log
    that are not among them (same seq and ts) and have no ``rolled_back`` line."""
    committed = {(line.get("seq"), line.get("ts")) for line in kept}
    lines, _ = read_chained(path)
    found: dict[int, bool] = {}
    for item in _groups(lines, agent):
        if isinstance(item, Logged):
            if item.line.get("action") == "rolled_back" and item.line.get("seq") in found:
                found[item.line["seq"]] = False
            continue
        first = item.lines[0].line
        if (item.seq, first.get("ts")) not in committed:
            found[item.seq] = True
    return [rolled_back_line(format_time(now_us), agent, seq,
                             "found by audit verify: not among the database's committed "
                             "changes") for seq, missing in found.items() if missing]


def agent_history(store: MemoryStore, agent: str, *, key: str | None = None,
                  actor: str | None = None, since_us: int | None = None,
                  limit: int | None = None, rolled_back: bool = False
                  ) -> list[dict[str, Any]]:
    """``agent``'s history, newest first (``rotifer agent audit show``; the
    console passes ``rolled_back=True`` to mark the changes that did not commit)."""
    stored: list[dict[str, Any]] | None
    with store.backend.read() as tx:
        stored = tx.audit_lines(agent)
        record = tx.get_agent(agent)
    if stored is not None:
        lines = [Logged({**line, "prev": None}, f"database line {n}")
                 for n, line in enumerate(stored, 1)]
    else:
        lines = []
        if store.audit.path is not None:
            for file in log_files(store.audit.path):
                for number, chunk in enumerate(file.read_bytes().split(b"\n")[:-1], 1):
                    try:
                        line = json.loads(chunk)
                    except ValueError:
                        continue  # verify names it; history shows what it can read
                    if isinstance(line, dict):
                        lines.append(Logged(line, f"{file.name} line {number}"))
    found = history(lines, agent, key=key, actor=actor, since_us=since_us,
                    next_seq=None if record is None else record.next_seq,
                    exists=record is not None, rolled_back=rolled_back)
    found.reverse()
    return found if limit is None else found[:limit]
