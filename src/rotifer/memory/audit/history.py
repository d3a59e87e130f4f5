"""An agent's audit history, newest first, in a stream: ``rotifer agent audit show``.

:func:`audit_history` is the public way to read what happened to an agent's
memory (the CLI's ``audit show`` and the web console use it): an iterator of
audit lines -- dicts as written, without ``prev``, never a value (no line
holds one) -- newest first, filtered by key, actor and time, at most
``limit`` of them.

It shows the agent's whole history across every store it has lived in (see
:mod:`rotifer.memory.audit.lineage`), committed changes only (a change that
never committed, and ``rolled_back`` lines, are left out), plus refusals
made before any change.  The log is read in a stream, oldest first, through
the same decisions ``audit verify`` makes (:class:`~.replay.Replay`);
memory stays bounded whatever the log's size: with ``limit`` only the newest
``limit`` matches are kept (a bounded deque); without one, matches are
spooled to a temporary file (in memory up to 8 MiB) and read back from its
end, a block at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any, TypeAlias

from ..clock import parse_time
from .actions import ROLLED_BACK
from .lineage import find_imports, history_lines, lineage
from .read import Logged, LogProblem, Scan
from .replay import Replay

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["AuditLine", "audit_history"]

#: One audit line as written (without ``prev``): ``ts``, ``agent``, ``action``,
#: ``key``, ``category``, ``actor``, ``bytes``, ``entryId``, the action's own
#: fields, ``epoch`` and ``seq`` (see docs/reliability.md).
AuditLine: TypeAlias = dict[str, Any]

SPOOL_IN_MEMORY = 8 << 20
BLOCK = 1 << 16


def audit_history(store: MemoryStore, agent: str, *, key: str | None = None,
                  actor: str | None = None, since_us: int | None = None,
                  limit: int | None = None,
                  progress: Callable[[Scan], None] | None = None,
                  rolled_back: bool = False) -> Iterator[AuditLine]:
    """``agent``'s committed history, newest first (see the module doc).

    ``key``/``actor``: only lines about that key / by that actor (a gene's v2
    id, ``deployer``, ``retention``); ``since_us``: only lines at or after that
    time (microseconds since the epoch); ``limit``: at most that many (the
    newest).  ``progress`` is told how far the reading of the log got.
    ``rolled_back`` also keeps the lines that say a change did not commit (the
    change's own lines stay out): the console marks them."""
    matches = _Matches(limit)
    path = store.audit.path
    with store.backend.long_running(), store.backend.read() as tx:  # bounded per statement
        record = tx.get_agent(agent)
        database = (lambda: tx.audit_lines(agent) or iter(())) \
            if tx.audit_lines(agent) is not None else None
        imports, epochs = find_imports(path, agent, database)
        segments = lineage("" if record is None else record.epoch, imports)
        replay = Replay(agent)

        def keep(lines: list[Logged]) -> None:
            for logged in lines:
                if _wanted(logged.line, key, actor, since_us):
                    matches.add({k: v for k, v in logged.line.items() if k != "prev"})

        try:
            for logged in history_lines(path, agent, segments, database, epochs, progress):
                if rolled_back and logged.line.get("action") == ROLLED_BACK:
                    keep([logged])
                keep(replay.feed(logged))
            keep(replay.finish(None if record is None else record.next_seq,
                               record is not None))
        except LogProblem:  # verify names it; show what could be read
            # (the change it stopped in may not replay either)
            with contextlib.suppress(LogProblem):
                keep(replay.finish(None, False))
    return matches.newest_first()


def _wanted(line: AuditLine, key: str | None, actor: str | None, since_us: int | None
            ) -> bool:
    if key is not None and line.get("key") != key:
        return False
    if actor is not None and line.get("actor") != actor:
        return False
    if since_us is not None:
        try:
            return parse_time(str(line.get("ts"))) >= since_us
        except ValueError:
            return False
    return True


class _Matches:
    """The lines to show, kept in bounded memory (see the module doc)."""

    def __init__(self, limit: int | None) -> None:
        self.newest: deque[AuditLine] | None = None if limit is None else deque(maxlen=limit)
        self.spool: IO[bytes] | None = None

    def add(self, line: AuditLine) -> None:
        if self.newest is not None:
            self.newest.append(line)
            return
        if self.spool is None:
            self.spool = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY)  # noqa: SIM115
        self.spool.write(json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass")
                         + b"\n")

    def newest_first(self) -> Iterator[AuditLine]:
        if self.newest is not None:
            return reversed(self.newest)
        return _backwards(self.spool)


def _backwards(spool: IO[bytes] | None) -> Iterator[AuditLine]:
    """The spooled lines from the last to the first, a block at a time."""
    if spool is None:
        return
    with spool:
        end = spool.seek(0, os.SEEK_END)
        rest = b""
        while end > 0:
            start = max(0, end - BLOCK)
            spool.seek(start)
            data = spool.read(end - start) + rest
            end = start
            parts = data.split(b"\n")
            rest = parts[0] if start > 0 else b""
            for part in reversed(parts if start == 0 else parts[1:]):
                if part:
                    yield json.loads(part.decode("utf-8", "surrogatepass"))
