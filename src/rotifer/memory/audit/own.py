"""``audit verify`` of one agent by the history index: its own lines, not the log.

The index (:mod:`.index`) holds, for each line of the agent, its place in the
log and the SHA-256 the store committed with it.  :func:`by_index` reads the
agent's lines at their places, and the line before each: each must hash to
its digest (which pins every byte of it, however the chain around it was
recomputed) and name the line before it as its ``prev`` (so that neighbour
cannot be edited or removed either), the last committed change must end at
the store's anchor, and the replay must agree with the store -- the replay
of these lines, or on PostgreSQL of the database's own copy of them.
:mod:`.verify` reads the whole log instead whenever this cannot vouch for
the agent."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..storage.backend import AgentRecord, Transaction
from ..storage.index_sql import IndexRow
from .actions import ROLLED_BACK
from .file import current_number
from .history import plan
from .index import DIGEST, IndexStale, LineReader
from .lineage import Imports, history_lines, holds, lineage, note_import
from .read import Logged, LogProblem, Scan, agent_marker, log_files
from .replay import Replay, compare

_decode = json.JSONDecoder().decode


class Checked(NamedTuple):
    """What :func:`by_index` found: the replay, the lines read, a note for the
    report, whether each line's link was checked and the replay was of the
    backend's own copy."""

    result: Replay
    lines: int
    note: str
    links: bool = True
    kept: bool = False


def by_index(tx: Transaction, path: Path, agent: str, *, anchor: bool = True,
             links: bool = True, progress: Callable[[Scan], None] | None = None
             ) -> Checked | None:
    """Verify ``agent`` from its own lines alone, found by the history index:
    each line read at its indexed place must hash to the digest the store
    committed with it (an edit anywhere in it, however the chain around it was
    recomputed, changes that) and name the line before it in the log as its
    ``prev`` (``links``: an edit of that neighbour, or its removal, breaks the
    link), the last committed change must end at the store's anchor, and the
    replay must agree with the store -- of these lines, or with a backend that
    keeps its own copy of them (PostgreSQL), of that copy, as the whole-log
    pass replays it.  ``None`` when that cannot be done or finds anything
    wrong -- an index not whole (see :func:`.history.plan`), rows without a
    digest, a line not where its row says (another worker's line, on
    PostgreSQL), a digest, a link, the anchor or the store disagreeing: the
    whole log is then read (which names the first thing wrong, and rebuilds
    the index)."""
    kept = tx.audit_lines(agent) is not None
    record = tx.get_agent(agent)
    found = plan(tx, path, agent, record)
    if record is None or found is None or not found.simple:
        return None
    rows = tx.index_entries(agent)
    if any(row[DIGEST] is None for row in rows):
        return None  # rows from before the digest: read the whole log, which rebuilds
    last = (record.epoch, record.next_seq - 1)
    stats = Scan(total=sum(row[2] for row in rows))
    head = ""
    result = Replay(agent)
    imports: Imports = {}
    numbered: set[str] = set()
    try:
        with LineReader(path, agent) as reader:
            before: tuple[int, int, bytes] | None = None  # the line read last: its end, hash
            for row, raw in reader.raw_lines(rows):
                # The digest pins every byte of the line: no other check is needed.
                digest = hashlib.sha256(raw[:-1]).digest()
                if not raw.endswith(b"\n") or digest != bytes(row[DIGEST]):
                    return None
                line = _decode(raw[:-1].decode("utf-8", "surrogatepass"))
                if not isinstance(line, dict) or line.get("agent") != agent \
                        or "prev" not in line:
                    return None
                if links and not _linked(reader, row, line["prev"], before, stats):
                    return None
                before = (row[0], row[1] + row[2], digest)
                if (line.get("epoch", ""), line.get("seq")) == last and \
                        line.get("action") != ROLLED_BACK:
                    head = digest.hex()
                stats.lines += 1
                stats.done += row[2]
                if progress is not None and stats.lines % 4096 == 0:
                    progress(stats)
                if kept:  # replayed from the backend's copy, below
                    note_import(imports, line)
                    if isinstance(line.get("seq"), int):
                        numbered.add(str(line.get("epoch", "")))
                    continue
                result.feed(Logged(line, f"index row {row[0]}:{row[1]}", digest.hex(),
                                   (row[0], row[1], row[2])))
            if kept:
                replayed = _replay_kept(tx, agent, record, imports, numbered,
                                        lambda: _again(reader, rows))
                if replayed is None:
                    return None
                result = replayed
        result.finish(record.next_seq, True)
        compare(result, tx, agent)
    except (IndexStale, LogProblem, ValueError):
        return None
    if anchor and record.head and head != record.head:
        return None
    after = _unindexed_after(path, agent, rows[-1] if rows else None, stats)
    if after:
        return None  # lines of a change that never committed: the full pass marks them
    if progress is not None:
        progress(stats)
    note = "; it ends where the store says" if anchor and record.head else ""
    if after is None:
        note += (f"; the log after its last line holds more than {TAIL_SEARCH >> 20} MiB of "
                 "other agents' lines, searched that far for a change of it that never "
                 "committed (--full searches it all)")
    return Checked(result, len(rows), note, links, kept)


def _linked(reader: LineReader, row: IndexRow, prev: object,
            before: tuple[int, int, bytes] | None, stats: Scan) -> bool:
    """Does ``prev`` (of the line at ``row``'s place) name the line before it in
    the log?  That line is the one just read when the two are adjacent (an
    agent's change of many lines), else read backwards from the place: one
    line more per line of the agent, never the log around it."""
    if before is not None and (before[0], before[1]) == (row[0], row[1]):
        return prev == before[2].hex()
    raw = reader.line_before(row[0], row[1])
    if raw is None:
        return prev is None  # the log's first line
    stats.lines += 1
    stats.done += len(raw) + 1
    stats.total += len(raw) + 1
    return prev == hashlib.sha256(raw).hexdigest()


def _replay_kept(tx: Transaction, agent: str, record: AgentRecord, imports: Imports,
                 numbered: set[str], log: Callable[[], Iterator[Logged]]) -> Replay | None:
    """The replay of the backend's own copy of the agent's lines (PostgreSQL's
    ``memory_audit``: committed changes only, every worker's), as the whole-log
    pass replays it.  The history's lineage is taken from the log's
    ``import_agent`` lines (``imports``) and must be the one the copy's give too
    (``None`` if not: an import another worker logged).  Usually one pass over
    the copy; when a part of the history lived where there is no copy (a
    memory with numbered lines in the log, ``numbered``, but none in the copy:
    moved in from SQLite), those lines are the log's, read again by the index
    (``log``), in the order the whole-log pass takes them, and the copy a
    second time."""
    segments = lineage(record.epoch, imports)
    wanted = {s.epoch: s.below for s in segments}
    seen: set[str] = set()
    result = Replay(agent)
    for n, line in enumerate(tx.audit_lines(agent) or iter(()), 1):
        seen.add(str(line.get("epoch", "")))
        note_import(imports, line)
        if "seq" in line and holds(wanted, line):
            line.setdefault("prev", None)
            result.feed(Logged(line, f"database line {n}"))
    if lineage(record.epoch, imports) != segments:
        return None
    if not any(s.epoch not in seen and s.epoch in numbered for s in segments):
        return result
    result = Replay(agent)
    for logged in history_lines(None, agent, segments, lambda: tx.audit_lines(agent) or iter(()),
                                frozenset(seen), log=log):
        if logged.where.startswith("database"):
            logged.line.setdefault("prev", None)
        result.feed(logged)
    return result


def _again(reader: LineReader, rows: list[IndexRow]) -> Iterator[Logged]:
    """The agent's lines read again at their indexed places, each still hashing
    to its digest (else :class:`IndexStale`)."""
    for row, raw in reader.raw_lines(rows):
        digest = hashlib.sha256(raw[:-1]).digest()
        if digest != bytes(row[DIGEST]):
            raise IndexStale(f"the line at {row[0]}:{row[1]} changed while verify read it")
        line = _decode(raw[:-1].decode("utf-8", "surrogatepass"))
        yield Logged(line, f"index row {row[0]}:{row[1]}", digest.hex(),
                     (row[0], row[1], row[2]))


#: How much of the log after the agent's last line :func:`by_index` searches
#: for a change that never committed (an agent idle while others wrote a lot
#: would otherwise pay for their lines).
TAIL_SEARCH = 16 << 20
BLOCK = 1 << 16  # (a read allocates its whole size first: memory stays bounded)


def _unindexed_after(path: Path, agent: str, row: IndexRow | None, stats: Scan
                     ) -> bool | None:
    """Does the log hold a line of ``agent`` after its last indexed one (``row``)?
    Such a line is of a change whose writer died before the commit (the agent is
    held: no change of it is in progress); its lines were the log's last when it
    died, so only the log after the agent's last line is read, a block at a
    time, parsing only the lines that hold the agent's name.  ``None``: more
    than :data:`TAIL_SEARCH` bytes follow, and the rest was not searched."""
    marker = agent_marker(agent)
    live = current_number(path)
    number, start = (live, 0) if row is None else (row[0], row[1] + row[2])
    if row is None:
        files = [(int(f.name.rsplit(".", 1)[1]) if f != path else live, f)
                 for f in log_files(path)]
    else:
        files = [(n, path if n == live else path.with_name(f"{path.name}.{n}"))
                 for n in range(number, live + 1)]
    searched = 0
    for n, file in files:
        try:
            handle = open(file, "rb")  # noqa: SIM115 - closed by the with below
        except FileNotFoundError:
            continue
        with handle:
            if row is not None and n == number:
                handle.seek(start)
            rest = b""
            while block := handle.read(BLOCK):
                searched += len(block)
                stats.done += len(block)
                stats.total += len(block)  # not known before: the bar counts it as it goes
                data, at = rest + block, 0
                while (hit := data.find(marker, at)) >= 0:
                    first = data.rfind(b"\n", 0, hit) + 1
                    last = data.find(b"\n", hit)
                    if last < 0:
                        break  # the line goes on in the next block
                    try:
                        line = json.loads(data[first:last])
                    except ValueError:
                        return True  # a damaged line: the full pass says what it is
                    if isinstance(line, dict) and line.get("agent") == agent:
                        return True
                    at = last + 1
                rest = data[data.rfind(b"\n") + 1:]
                if searched > TAIL_SEARCH:
                    return None
            if rest.strip():
                return True  # half a line at the end: the full pass says what it is
    return False


