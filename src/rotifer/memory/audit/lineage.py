"""An agent's history across the stores it has lived in: epochs and their lineage.

An agent's memory can move (``agent move``) or be copied (``agent export``
then ``import``) into another store, and the stores of one project write to
one audit log.  So the log can hold lines of several *memories* of one agent:
the one it left, the one it lives in now, a copy that goes on beside the
original.  Their change numbers continue each other (a move is the source's
change N and the import the destination's change N + 1; an import of an
export taken at ``nextSeq`` N is change N), so numbers alone cannot tell
them apart once a copy goes on beside its original.

Epochs do.  Every memory of an agent gets an ``epoch`` when it is created in
a store -- ``agent create``, an import, the destination of a move: 48 random
bits, kept on the agent's row -- and every line of its changes carries it
next to ``seq``.  The ``import_agent`` line that starts a memory names the
epoch it continues, ``previousEpoch`` (the source's, for a move; the one the
export file records, for an import).  The *lineage* of the memory a store
holds is then a chain of segments, oldest first::

    (epoch E0, seq < K1), (E1, K1 <= seq < K2), ..., (E, seq >= Kn)

where Ki is the number of the import that started Ei.  Lines of E0 numbered
K1 or more belong to the original going on after a copy was taken, not to
this history; lines of an epoch not in the chain belong to another memory
(a copy, or an import that never committed).  Within the lineage the rules
of one store hold: committed changes numbered 1, 2, 3, ... without gaps.

Agents made before epochs existed have epoch ``""`` and their lines none:
for them the log is read as before (one memory), and a move or import of
them starts a new epoch whose ``previousEpoch`` is ``""``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring as quote
from pathlib import Path
from typing import Any

from .actions import DROP_AGENT, IMPORT_AGENT, MOVE
from .read import Logged, Scan, scan

#: (epoch of the new memory) -> (its import's seq, the epoch it continues)
Imports = dict[str, tuple[int, str]]


@dataclass(frozen=True)
class Segment:
    """The lines of ``epoch`` numbered below ``below`` (``None``: no bound)."""

    epoch: str
    below: int | None = None


def note_import(imports: Imports, line: dict[str, Any]) -> None:
    """Record ``line`` if it is an ``import_agent`` line that continues an epoch."""
    epoch, previous, seq = line.get("epoch"), line.get("previousEpoch"), line.get("seq")
    if line.get("action") == IMPORT_AGENT and isinstance(epoch, str) and epoch and \
            isinstance(previous, str) and isinstance(seq, int):
        imports[epoch] = (seq, previous)


def lineage(epoch: str, imports: Imports) -> list[Segment]:
    """The segments of the memory ``epoch``'s history, oldest first."""
    segments = [Segment(epoch)]
    seen = {epoch}
    while epoch in imports:
        seq, previous = imports[epoch]
        if previous in seen:  # a cycle can only be an edited log: stop there
            break
        segments.insert(0, Segment(previous, seq))
        seen.add(previous)
        epoch = previous
    return segments


def holds(segments: dict[str, int | None], line: dict[str, Any]) -> bool:
    """Is ``line`` (which has a ``seq``) part of the history ``segments`` describe?"""
    epoch = line.get("epoch", "")
    if epoch not in segments:
        return False
    below, seq = segments[epoch], line.get("seq")
    return below is None or (isinstance(seq, int) and seq < below)


def _batches(segments: list[Segment], in_database: Callable[[str], bool]
             ) -> Iterator[tuple[bool, list[Segment]]]:
    """Consecutive segments read from the same place: (from the database?, segments)."""
    batch: list[Segment] = []
    where: bool | None = None
    for segment in segments:
        here = in_database(segment.epoch)
        if batch and here != where:
            yield bool(where), batch
            batch = []
        batch.append(segment)
        where = here
    if batch:
        yield bool(where), batch


def history_lines(path: Path | None, agent: str, segments: list[Segment],
                  database: Callable[[], Iterator[dict[str, Any]]] | None = None,
                  database_epochs: frozenset[str] = frozenset(),
                  progress: Callable[[Scan], None] | None = None,
                  log: Callable[[], Iterable[Logged]] | None = None) -> Iterator[Logged]:
    """The lines of the history ``segments`` describe, in order: each segment from
    the database's own copy when it holds that epoch (PostgreSQL's
    ``memory_audit``), else from the log at ``path``; consecutive segments of one
    place in one pass.  Lines without ``seq`` (refusals made before any change,
    exports) come from the log, where they fall among the history's own lines.
    ``log``: the agent's lines of the log, in order, found otherwise than by a
    scan (by the history index)."""
    first = segments[0]
    for from_database, batch in _batches(segments, lambda e: database is not None and
                                         e in database_epochs):
        wanted = {s.epoch: s.below for s in batch}
        if from_database:
            assert database is not None
            for n, line in enumerate(database(), 1):
                if "seq" in line and holds(wanted, line):
                    yield Logged(line, f"database line {n}")
            continue
        if log is not None:
            source: Iterable[Logged] = log()
        elif path is not None:
            source = scan(path, agent, chain=False, progress=progress)
        else:
            continue
        inside = first in batch
        for logged in source:
            line = logged.line
            if "seq" not in line:
                if inside:
                    yield logged
            elif holds(wanted, line):
                inside = True
                yield logged
            else:
                inside = False


def find_imports(path: Path | None, agent: str,
                 database: Callable[[], Iterator[dict[str, Any]]] | None = None
                 ) -> tuple[Imports, frozenset[str]]:
    """The agent's imports in the log (and the database's copy), and the epochs
    the database's copy holds lines of."""
    imports: Imports = {}
    if path is not None:
        for logged in scan(path, agent, chain=False, only=quote(IMPORT_AGENT).encode()):
            note_import(imports, logged.line)
    epochs: set[str] = set()
    if database is not None:
        for line in database():
            epochs.add(line.get("epoch", ""))
            note_import(imports, line)
    return imports, frozenset(epochs)


def memory_end(path: Path | None, agent: str) -> tuple[str, str] | None:
    """How and where the last memory of ``agent`` this log saw end ended: (the
    action, its epoch) of the log's last ``drop_agent`` line, or of its last
    ``move`` whose memory no later line of this log continues (an
    ``import_agent`` naming it as ``previousEpoch``: a move this project logged
    at both ends, or one into this project's store); ``None``: none ended.  Two
    passes that parse only those lines; the later line wins, by its place."""
    if path is None:
        return None
    found: list[tuple[tuple[int, int], str, str]] = []
    for logged in scan(path, agent, chain=False, only=quote(DROP_AGENT).encode()):
        if logged.line.get("action") == DROP_AGENT:
            found.append((_at(logged), DROP_AGENT, str(logged.line.get("epoch", ""))))
    moved: tuple[tuple[int, int], str, str] | None = None
    for logged in scan(path, agent, chain=False, only=quote(MOVE).encode()):
        line = logged.line  # a move's line, or an import's "via": "move"
        if line.get("action") == MOVE:
            moved = (_at(logged), MOVE, str(line.get("epoch", "")))
        elif line.get("action") == IMPORT_AGENT and moved is not None \
                and line.get("previousEpoch") == moved[2]:
            moved = None  # that memory went on (in a store whose lines are here too)
    if moved is not None:
        found.append(moved)
    if not found:
        return None
    _, action, epoch = max(found)
    return action, epoch


def _at(logged: Logged) -> tuple[int, int]:
    return (-1, -1) if logged.place is None else (logged.place[0], logged.place[1])
