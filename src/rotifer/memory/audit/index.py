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

import functools
import json
import os
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from hashlib import blake2b
from itertools import repeat
from pathlib import Path
from typing import Any, NamedTuple

from ..clock import parse_time
from ..storage.index_sql import IndexRow
from .file import archives, current_number, last_line
from .places import Placed, Places


class Entry(NamedTuple):
    """One indexed line of an agent (see the module doc): the columns of
    :data:`~rotifer.memory.storage.index_sql.ENTRY_COLUMNS`, named."""

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


#: The positions in an :data:`IndexRow` the passes over all rows read.
SEQ, EPOCH, TS_US, ACTION, KEY_HASH, CATEGORY, NBYTES, DIGEST = 3, 4, 5, 6, 7, 8, 9, 10


#: Past every place: the start of a walk from the newest row back.
END = (1 << 62, 1 << 62)


_decode = json.JSONDecoder().decode


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


#: :func:`key_hash` of a string key or ``None`` (hashable: the cache takes no other),
#: cached for the change that writes its line (a key is written again and again).
str_key_hash = functools.lru_cache(maxsize=4096)(key_hash)


#: :func:`key_hash`'s hash before any byte, copied for each key by :func:`key_hashes`.
_KEY_HASHER = blake2b(digest_size=8)


_Q_IS_64_BITS = array("q").itemsize == 8


def key_hashes(keys: Sequence[str]) -> list[int]:
    """:func:`key_hash` of many string keys (an eviction's): each hash from a
    copy of an empty one, the digests read as numbers all at once (an
    ``array`` of big-endian 64-bit ints, not ``int.from_bytes`` per key)."""
    hasher = _KEY_HASHER.copy
    digests: list[bytes] = []
    append = digests.append
    try:
        for key in keys:  # UTF-8 as it is, the same bytes as surrogatepass gives
            digest = hasher()
            digest.update(key.encode())
            append(digest.digest())
    except UnicodeEncodeError:  # a lone surrogate: key_hash's own encoding
        digests = [blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
                   for key in keys]
    if not _Q_IS_64_BITS:  # pragma: no cover - no such platform in sight
        return [int.from_bytes(d, "big", signed=True) for d in digests]
    numbers = array("q", b"".join(digests))
    if sys.byteorder == "little":
        numbers.byteswap()
    return numbers.tolist()


#: A run of a change's lines whose index columns the change made with them
#: (``Change.brief_lines``, ``Change.line``): the first line's position among the lines
#: appended, the columns all of them share (seq, epoch, ts_us, action), and
#: each line's key hash, category and bytes.
IndexRun = tuple[int, tuple[int, str, int, str], Sequence[int | None], Sequence[str | None],
                 Sequence[int]]


def rows_with(agent_id: str, places: Places, runs: Sequence[IndexRun]
              ) -> list[tuple[Any, ...]]:
    """:func:`rows_for` of the lines ``places`` says went out, each row of a line
    in one of ``runs`` (in order, none overlapping) zipped from the run's columns
    and the places' (no tuple per line read back field by field, no Python
    step per row); :func:`rows_for` for the lines between and after."""
    out: list[tuple[Any, ...]] = []
    at, number = 0, places.number
    offsets, lengths, digests = places.offsets, places.lengths, places.digests
    for start, (seq, epoch, ts_us, action), hashes, categories, sizes in runs:
        if start > at:
            out += rows_for(agent_id, places.placed(at, start))
        count = len(hashes)
        if count == 1:  # one line (a write's): its row as one tuple, no zip of repeats
            at = start + 1
            out.append((agent_id, number, offsets[start], lengths[start], seq, epoch, ts_us,
                        action, hashes[0], categories[0], sizes[0], digests[start]))
            continue
        at = start + count
        out += zip(repeat(agent_id, count), repeat(number, count), offsets[start:at],
                   lengths[start:at], repeat(seq, count), repeat(epoch, count),
                   repeat(ts_us, count), repeat(action, count), hashes, categories, sizes,
                   digests[start:at], strict=True)
    if at < len(lengths):
        out += rows_for(agent_id, places.placed(at))
    return out


class LineReader:
    """Reads indexed lines back from the log files, checking each is what its row says."""

    def __init__(self, path: Path, agent: str) -> None:
        self.path = path
        self.agent = agent
        self._live = current_number(path)
        self._fds: dict[int, int] = {}
        self._files: list[int] | None = None
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
        raw = os.pread(self._fd(row[0]), row[2], row[1])
        self.lines_read += 1
        self.bytes_read += len(raw)
        return self._checked(row, raw), raw[:-1]

    def lines_at(self, rows: Sequence[IndexRow]) -> list[dict[str, Any]]:
        """The lines at the places of ``rows``, in the rows' order, each checked
        as :meth:`line` checks it; adjacent places (a run of the agent's lines)
        are read at once (:meth:`raw_lines`), whichever way the rows go (a page
        of the history goes newest first)."""
        order = sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][1]))
        out: list[dict[str, Any]] = [{}] * len(rows)
        for i, (row, raw) in zip(order, self.raw_lines([rows[i] for i in order]), strict=True):
            out[i] = self._checked(row, raw)
        return out

    def _checked(self, row: IndexRow, raw: bytes) -> dict[str, Any]:
        """``raw`` (read at ``row``'s place, with the newline) parsed, if it is
        the line the row describes (agent, action, number, key), else
        :class:`IndexStale`."""
        if len(raw) != row[2] or not raw.endswith(b"\n"):
            raise IndexStale(f"no whole line at {row[0]}:{row[1]}")
        try:
            line = _decode(raw[:-1].decode("utf-8", "surrogatepass"))
        except ValueError:
            raise IndexStale(f"no JSON at {row[0]}:{row[1]}") from None
        if not isinstance(line, dict) or line.get("agent") != self.agent \
                or line.get("action") != row[ACTION] or line.get("seq") != row[SEQ] \
                or key_hash(line.get("key")) != row[KEY_HASH]:
            raise IndexStale(f"another line at {row[0]}:{row[1]}")
        return line

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

    def line_before(self, file_no: int, off: int) -> bytes | None:
        """The bytes (no newline) of the line just before the place ``file_no:off``
        in the log -- the last line of the file before when ``off`` is 0 -- or
        ``None`` when that place starts the log.  Read backwards from there as
        the append reads the log's last line (:func:`.file.last_line`)."""
        if off == 0:
            earlier = [n for n in self._numbers() if n < file_no]
            if not earlier:
                return None
            file_no = earlier[-1]
            off = os.fstat(self._fd(file_no)).st_size
            if off == 0:
                raise IndexStale(f"file {file_no} of the log is empty")
        fd = self._fd(file_no)
        if os.pread(fd, 1, off - 1) != b"\n":
            raise IndexStale(f"no line ends before {file_no}:{off}")
        raw = last_line(fd, off)  # the file's first ``off`` bytes end in that line
        if raw is not None:
            self.lines_read += 1
            self.bytes_read += len(raw) + 1
        return raw

    def _numbers(self) -> list[int]:
        """The numbers of the log's files, oldest first (the live file's last)."""
        if self._files is None:
            self._files = [int(p.name.rsplit(".", 1)[1]) for p in archives(self.path)]
            self._files.append(self._live)
        return self._files

    def lines(self, entries: Iterable[IndexRow]) -> Iterator[dict[str, Any]]:
        for entry in entries:
            yield self.line(entry)[0]
