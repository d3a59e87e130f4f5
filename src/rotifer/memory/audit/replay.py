"""Replaying an agent's history line by line: which changes were committed,
and the entries they leave.

:class:`Replay` is fed the lines of one history in order (see
:mod:`rotifer.memory.audit.lineage`) and holds only what it must: the
replayed entries (key -> category, bytes, createdBy), the one change whose
fate the next line decides, and the refusals logged behind it.  Each line it
knows to be part of a committed change (or a refusal, which changes
nothing) it hands back from :meth:`Replay.feed` in order, so ``audit show``
streams the same decisions ``audit verify`` makes.

The rules (committed changes are numbered 1, 2, 3, ... without gaps): a
change numbered N was not committed if a ``rolled_back`` line names it, or
the next change is numbered N again, or it is the history's last change and
the store's ``next_seq`` is still N; it was committed if the next change is
N + 1, or it ended the agent's memory (``drop_agent``, ``move``), or the next
change starts one (``import_agent``).  Anything else is a gap: reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..storage.backend import Transaction
from .actions import ENDS, IMPORT, REMOVES, ROLLED_BACK, SETS, STARTS, UPDATE
from .read import Logged, LogProblem

State = dict[str, tuple[str, int, str | None]]


@dataclass
class Group:
    """The lines of one change (one epoch, seq and time, contiguous)."""

    epoch: str
    seq: int
    ts: Any
    lines: list[Logged] = field(default_factory=list)
    ends_agent: bool = False

    @property
    def where(self) -> str:
        return self.lines[0].where

    @property
    def starts(self) -> bool:
        return self.lines[0].line.get("action") == STARTS


def _apply(state: State, logged: Logged) -> None:
    line = logged.line
    action, key = line.get("action"), str(line.get("key"))
    if action in SETS:
        if action == UPDATE:
            if key not in state:
                raise LogProblem(f"{logged.where}: updates {key!r}, which the log never wrote")
            creator = state[key][2]
        else:
            creator = line.get("createdBy") if action == IMPORT else line.get("actor")
        state[key] = (str(line.get("category")), int(line.get("bytes") or 0), creator)
    elif action in REMOVES:
        if state.pop(key, None) is None:
            raise LogProblem(f"{logged.where}: removes {key!r}, which the log never wrote")
    elif action == STARTS:
        state.clear()


class Replay:
    """One history, fed line by line (see the module doc)."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.state: State = {}
        self.exists: bool | None = None  # None: the history never said
        self.last_seq: int | None = None
        self.changes = 0
        self.lines = 0
        #: (epoch, seq) of every change found not committed, in order.
        self.phantoms: list[tuple[str, int]] = []
        #: The same with each change's time: what tells a phantom from a later
        #: committed change numbered like it (for the index's rebuild).
        self.phantom_changes: set[tuple[str, int, Any]] = set()
        self._unexplained: dict[tuple[str, int], None] = {}
        self._pending: Group | None = None
        self._held: list[Logged] = []  # refusals logged behind the pending change

    def unexplained(self) -> list[tuple[str, int]]:
        """Changes found not committed that no ``rolled_back`` line names."""
        return list(self._unexplained)

    def _phantom(self, group: Group, explained: bool) -> None:
        self.phantoms.append((group.epoch, group.seq))
        self.phantom_changes.add((group.epoch, group.seq, group.ts))
        if not explained:
            self._unexplained[(group.epoch, group.seq)] = None

    def _commit(self, group: Group) -> list[Logged]:
        for logged in group.lines:
            _apply(self.state, logged)
        if group.ends_agent:  # after its lines: a move's move_out lines name what it held
            self.state.clear()
        self.changes += 1
        self.exists = not group.ends_agent
        self.last_seq = None if group.ends_agent else group.seq
        return group.lines

    def _settled(self, out: list[Logged]) -> list[Logged]:
        self._pending = None
        out.extend(self._held)
        self._held = []
        return out

    def feed(self, logged: Logged) -> list[Logged]:
        """Take the next line; return the lines now known to be committed (or
        refusals), in order."""
        self.lines += 1
        line = logged.line
        seq, epoch = line.get("seq"), line.get("epoch", "")
        pending = self._pending
        if line.get("action") == ROLLED_BACK or not isinstance(seq, int):
            if line.get("action") == ROLLED_BACK:
                if isinstance(seq, int) and (epoch, seq) in self._unexplained:
                    # An earlier change of this number, found not committed when
                    # the next one took its number: the line (written late, by
                    # `audit verify` or an older rotifer) is that one's, not the
                    # pending change's -- whose fate its successor or the store
                    # decides, as for any change.
                    del self._unexplained[(epoch, seq)]
                    return []
                if pending is not None and (pending.epoch, pending.seq) == (epoch, seq):
                    self._phantom(pending, True)
                    return self._settled([])
                return []
            if "prev" not in line:  # an older rotifer's line: taken as written
                _apply(self.state, logged)
            if pending is not None:
                self._held.append(logged)
                return []
            return [logged]
        ts = line.get("ts")
        if pending is not None and (pending.epoch, pending.seq, pending.ts) == (epoch, seq, ts):
            pending.lines.append(logged)
            pending.ends_agent = pending.ends_agent or line.get("action") in ENDS
            return []
        group = Group(epoch, seq, ts, [logged], line.get("action") in ENDS)
        out: list[Logged] = []
        if pending is not None:
            if seq == pending.seq and epoch == pending.epoch:
                self._phantom(pending, False)  # its number was used again: never committed
            elif seq == pending.seq + 1 or pending.ends_agent or group.starts:
                out = self._commit(pending)
            else:
                raise LogProblem(f"{group.where}: change {seq} follows change {pending.seq} "
                                 "(a change is missing from the log)")
            out = self._settled(out)
        elif self.last_seq is not None and seq != self.last_seq + 1 and not group.starts:
            raise LogProblem(f"{group.where}: change {seq} follows change {self.last_seq} "
                             "(a change is missing from the log)")
        self._pending = group
        return out

    def finish(self, next_seq: int | None, exists: bool) -> list[Logged]:
        """The end of the history: decide its last change from what the store
        says now (``next_seq``, ``exists``)."""
        pending = self._pending
        if pending is None:
            return self._settled([])
        # Not committed exactly when the store still has the agent and has not
        # counted the change; any other disagreement the comparison names.
        if not (exists and next_seq == pending.seq):
            return self._settled(self._commit(pending))
        self._phantom(pending, False)
        return self._settled([])


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``1 entry``, ``2 entries``: a count with its noun."""
    return f"{count} {singular if count == 1 else plural or singular + 's'}"


def compare(r: Replay, tx: Transaction, agent: str) -> None:
    """Raise :class:`LogProblem` at the first difference between replay and store."""
    record = tx.get_agent(agent)
    if record is None:
        if r.exists and r.state:
            raise LogProblem(f"the log says agent {agent!r} holds {counted(len(r.state), 'entry', 'entries')}; "
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
