"""The history index: where each agent's audit lines are in the shared log.

The log is shared by every agent of a project, so reading one agent's history
from it costs the whole log.  The store therefore keeps, for every line it
appends for an agent, one row of ``memory_audit_index`` (SQLite and
PostgreSQL alike; primary key ``(agent_id, file_no, off)``)::

    agent_id, file_no, off, len, seq, epoch, ts_us, action, key_hash, category, nbytes,
    digest

``file_no`` is the number the live ``audit.jsonl`` gets when it rolls over
(:func:`.file.current_number`): ``audit.jsonl.N`` once rolled, the live file
until then; ``off``/``len`` the line's bytes in it (with its newline).  The
rows of a change are inserted in the change's own transaction, after its
lines are appended and before the commit that also records its anchor: a
change that never committed (its writer killed) leaves no row, and every row
is of a committed change -- or a ``rolled_back`` line, a refusal, an export
(lines that change nothing, indexed in a transaction of their own after
their append; one lost to a kill in between is the only thing a reader may
miss, and ``audit verify`` puts it back).  ``key_hash`` (64 bits of BLAKE2b of
the key), ``category`` and ``nbytes`` are enough to draw the chart without
reading a line.  ``digest`` is the line's SHA-256 (what the next line's
``prev`` names), committed with the change: ``audit verify`` of one agent
checks each of its lines against it and reads no other agent's line (a row
from before the column has none, and verify reads the whole log and rebuilds).

``memory_audit_indexed`` says for which agents the rows are the whole
history: ``(agent_id, epoch)`` -- set when ``agent create`` makes the memory
(it has no earlier lines) and by ``audit verify``, which rebuilds an agent's
rows from the log (after an import or a move, whose earlier lines another
store wrote; after an upgrade; after anything made the rows stale).  A reader
(:mod:`.history`) uses the rows only when that marker names the agent's
current epoch and the newest indexed change is the store's last committed
one; each line it reads at an indexed place must be the line the row
describes.  Anything else -- no marker, rows behind the store, a log file
moved, renumbered or edited -- and it reads the whole log as before, with the
same answers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from hashlib import blake2b
from pathlib import Path
from typing import Any, NamedTuple

from ..clock import parse_time
from ..model import Category
from .actions import ENDS, REMOVES, SETS
from .file import Placed, current_number

#: The columns a reader gets, in this order (:class:`Entry`).
ENTRY_COLUMNS = ("file_no, off, len, seq, epoch, ts_us, action, key_hash, category, nbytes, "
                 "digest")


class Entry(NamedTuple):
    """One indexed line of an agent (see the module doc)."""

    file_no: int
    off: int
    length: int
    seq: int | None
    epoch: str
    ts_us: int
    action: str
    key_hash: int | None
    category: str | None
    nbytes: int
    #: The line's SHA-256 (``None``: a row written before rows had one).
    digest: bytes | None = None


#: A row as the backends return it: the :data:`ENTRY_COLUMNS` as a plain tuple.
#: A history of 100,000 lines is 100,000 rows, and making each an :class:`Entry`
#: costs more than fetching it, so the passes over all of them read these
#: positions, and only the rows whose lines are read become entries.
IndexRow = tuple[Any, ...]
SEQ, EPOCH, TS_US, ACTION, KEY_HASH, CATEGORY, NBYTES, DIGEST = 3, 4, 5, 6, 7, 8, 9, 10


#: The actions the chart follows (the others change no bytes).
CHART_ACTIONS: tuple[str, ...] = tuple(sorted(SETS | REMOVES | ENDS))
#: What a chart step does, as a small number (so 100,000 rows come back without
#: two strings each): a set into the category of that position in ``Category``,
#: :data:`UNKNOWN` a set into no known category, :data:`ENDED` the memory's
#: end, :data:`REMOVED` plus the position in :data:`REMOVE_ACTIONS` a removal.
CATEGORY_CODES: dict[str, int] = {c.value: n for n, c in enumerate(Category)}
UNKNOWN, ENDED, REMOVED = -1, len(CATEGORY_CODES), len(CATEGORY_CODES) + 1
REMOVE_ACTIONS: tuple[str, ...] = tuple(sorted(REMOVES))


def step_code(action: object, category: object) -> int | None:
    """The code of a line with this action and category (``None``: not followed)."""
    if action in ENDS:
        return ENDED
    if action in REMOVES:
        return REMOVED + REMOVE_ACTIONS.index(str(action))
    if action in SETS:
        return CATEGORY_CODES.get(category, UNKNOWN) if isinstance(category, str) else UNKNOWN
    return None


def _literal(word: str) -> str:
    """An action or category name as an SQL string (they are fixed words)."""
    assert word.replace("_", "").isalpha(), word
    return f"'{word}'"


#: :func:`step_code` in SQL, over the ``action`` and ``category`` columns.
STEP_CODE_SQL = (
    "CASE WHEN action IN (" + ", ".join(_literal(a) for a in sorted(SETS)) + ") THEN "
    "(CASE category " + " ".join(f"WHEN {_literal(c)} THEN {n}"
                                 for c, n in CATEGORY_CODES.items())
    + f" ELSE {UNKNOWN} END) WHEN action IN ("
    + ", ".join(_literal(a) for a in sorted(ENDS)) + f") THEN {ENDED} ELSE (CASE action "
    + " ".join(f"WHEN {_literal(a)} THEN {REMOVED + i}" for i, a in enumerate(REMOVE_ACTIONS))
    + " END) END")
#: Past every place: the start of a walk from the newest row back.
END = (1 << 62, 1 << 62)


class IndexSql(NamedTuple):
    """The reading statements, with one backend's placeholder ``p``."""

    #: Per epoch of the agent: the newest committed change's number, the newest number.
    summary: str
    #: The rows of one action, in log order.
    of_action: str
    #: Rows before a place, newest first: in a time window, without an action (``""``:
    #: none left out), of a key's hash unless the flag says any key; at most N.
    page: str
    #: What the chart needs of the rows of :data:`CHART_ACTIONS`, in log order:
    #: time, :func:`step_code`, key hash, bytes.
    steps: str
    #: The newest numbered row's number that is not a ``rolled_back`` line (read
    #: from the end: it is almost always the last row).
    last: str

    @classmethod
    def using(cls, p: str) -> IndexSql:
        table = "memory_audit_index WHERE agent_id = " + p
        return cls(
            f"SELECT epoch, max(CASE WHEN action <> {p} THEN seq END), max(seq) FROM {table} "
            "AND seq IS NOT NULL GROUP BY epoch",
            f"SELECT {ENTRY_COLUMNS} FROM {table} AND action = {p} ORDER BY file_no, off",
            f"SELECT {ENTRY_COLUMNS} FROM {table} AND (file_no < {p} OR (file_no = {p} AND "
            f"off < {p})) AND ts_us >= {p} AND ts_us < {p} AND action <> {p} AND "
            f"({p} OR key_hash = {p}) "
            f"ORDER BY file_no DESC, off DESC LIMIT {p}",
            f"SELECT ts_us, {STEP_CODE_SQL}, key_hash, nbytes FROM {table} AND action IN ("
            + ", ".join([p] * len(CHART_ACTIONS)) + ") ORDER BY file_no, off",
            f"SELECT seq FROM {table} AND seq IS NOT NULL AND action <> {p} "
            "ORDER BY file_no DESC, off DESC LIMIT 1")


class IndexStale(Exception):
    """An indexed place does not hold the line its row describes."""


def key_hash(key: object) -> int | None:
    """A key as a signed 64-bit number (BLAKE2b), ``None`` for no key."""
    if not isinstance(key, str):
        return None
    digest = blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def entry_of(line: Mapping[str, Any], file_no: int, off: int, length: int,
             times: dict[str, int] | None = None, digest: bytes | None = None
             ) -> Entry | None:
    """The row of ``line`` at that place, or ``None`` for a line no agent's history holds."""
    ts = line.get("ts")
    if not isinstance(line.get("agent"), str) or not isinstance(ts, str):
        return None
    at = None if times is None else times.get(ts)
    if at is None:
        try:
            at = parse_time(ts)
        except ValueError:
            return None
        if times is not None:
            times[ts] = at
    seq, nbytes, category, epoch = (line.get("seq"), line.get("bytes"), line.get("category"),
                                    line.get("epoch", ""))
    return Entry(file_no, off, length, seq if isinstance(seq, int) else None,
                 epoch if isinstance(epoch, str) else "", at, str(line.get("action")),
                 key_hash(line.get("key")), category if isinstance(category, str) else None,
                 nbytes if isinstance(nbytes, int) and not isinstance(nbytes, bool) else 0,
                 digest)


def rows_for(agent_id: str, placed: Placed) -> list[tuple[Any, ...]]:
    """The index rows of ``agent_id``'s lines among those just appended."""
    times: dict[str, int] = {}
    out = []
    for line, file_no, off, length, digest in placed:
        if line.get("agent") != agent_id:
            continue
        entry = entry_of(line, file_no, off, length, times, digest)
        if entry is not None:
            out.append((agent_id, *entry))
    return out


class LineReader:
    """Reads indexed lines back from the log files, checking each is what its row says."""

    def __init__(self, path: Path, agent: str) -> None:
        self.path = path
        self.agent = agent
        self._live = current_number(path)
        self._fds: dict[int, int] = {}
        #: How much was read (for a progress report).
        self.lines_read = 0
        self.bytes_read = 0

    def __enter__(self) -> LineReader:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _fd(self, number: int) -> int:
        fd = self._fds.get(number)
        if fd is None:
            archived = self.path.with_name(f"{self.path.name}.{number}")
            try:
                fd = os.open(archived, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                if number != self._live:
                    raise IndexStale(f"{archived.name} is missing") from None
                try:
                    fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError as exc:
                    raise IndexStale(str(exc)) from None
            except OSError as exc:
                raise IndexStale(str(exc)) from None
            self._fds[number] = fd
        return fd

    def line(self, row: IndexRow) -> tuple[dict[str, Any], bytes]:
        """The line at the place of ``row`` (an :class:`Entry` or an :data:`IndexRow`),
        and its bytes without the newline."""
        entry = row if isinstance(row, Entry) else Entry(*row)
        raw = os.pread(self._fd(entry.file_no), entry.length, entry.off)
        self.lines_read += 1
        self.bytes_read += len(raw)
        if len(raw) != entry.length or not raw.endswith(b"\n"):
            raise IndexStale(f"no whole line at {entry.file_no}:{entry.off}")
        try:
            line = json.loads(raw[:-1])
        except ValueError:
            raise IndexStale(f"no JSON at {entry.file_no}:{entry.off}") from None
        if not isinstance(line, dict) or line.get("agent") != self.agent \
                or line.get("action") != entry.action or line.get("seq") != entry.seq \
                or key_hash(line.get("key")) != entry.key_hash:
            raise IndexStale(f"another line at {entry.file_no}:{entry.off}")
        return line, raw[:-1]

    def raw_lines(self, rows: Sequence[IndexRow]) -> Iterator[tuple[IndexRow, bytes]]:
        """Each row with the bytes at its place (its newline included; shorter if
        the file is): a run of adjacent places is read at once, up to 64 KiB
        (and one line), so memory stays bounded whatever the agent's history.
        Nothing is checked: the caller compares the bytes with the row's digest."""
        i, count = 0, len(rows)
        while i < count:
            file_no, start = rows[i][0], rows[i][1]
            end, j = start + rows[i][2], i + 1
            while j < count and rows[j][0] == file_no and rows[j][1] == end \
                    and end - start < (1 << 16):
                end += rows[j][2]
                j += 1
            data = os.pread(self._fd(file_no), end - start, start)
            self.lines_read += j - i
            self.bytes_read += len(data)
            at = 0
            for row in rows[i:j]:
                yield row, data[at:at + row[2]]
                at += row[2]
            i = j

    def lines(self, entries: Iterable[IndexRow]) -> Iterator[dict[str, Any]]:
        for entry in entries:
            yield self.line(entry)[0]
