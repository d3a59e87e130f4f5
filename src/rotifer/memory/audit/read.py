"""Reading the audit log back in a stream: every file, every line, the chain checked.

``audit verify`` and ``audit show`` read logs of any size, so nothing here
holds the log: the files (``audit.jsonl.1``, ``.2``, ... oldest first, then
``audit.jsonl``) are read a buffered line at a time, each line is hashed for
the chain and forgotten, and only the lines of the agent asked about are
parsed as JSON.  Memory is bounded by the longest line, whatever the log's
size.

Finding an agent's lines without parsing every line: a line of agent ``a``
holds ``"agent":<a as JSON>,`` (the second field of every line this rotifer
writes), so only lines containing the agent's JSON string are parsed and
checked; the others are only hashed.  The chain needs no parsing either:
``"prev"`` is every line's last field, so its value is read off the line's
last 75 bytes.  A line damaged anywhere changes its hash, which the next
line's ``prev`` then fails to name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from json.encoder import encode_basestring as quote  # the escaping audit lines use
from pathlib import Path
from typing import Any

from .file import archives, current_number

_NULL_TAIL = b',"prev":null}'
_HASH_HEAD = b',"prev":"'


class LogProblem(Exception):
    """The first thing found wrong; its message names where."""


@dataclass(slots=True)
class Logged:
    """One line of the log, where it is, and its hash (``""``: not from a file)."""

    line: dict[str, Any]
    where: str
    digest: str = ""
    #: (file number, byte offset, length with the newline): see :mod:`.index`.
    place: tuple[int, int, int] | None = None


@dataclass
class Scan:
    """What a pass over the whole log counted."""

    lines: int = 0
    #: Lines without ``prev`` (written before the chain was): taken as written.
    legacy: int = 0
    #: Bytes read so far (for a progress bar), and the log's total size.
    done: int = 0
    total: int = 0
    files: list[Path] = field(default_factory=list)


def log_files(path: Path) -> list[Path]:
    """Every file of the log, oldest first."""
    return [*archives(path), *([path] if path.exists() else [])]


def _prev(chunk: bytes) -> str | bool | None:
    """The line's ``prev`` read off its end: a hex string, ``None`` (the first
    line), or ``False`` when the line does not end with one (parse it)."""
    if chunk.endswith(_NULL_TAIL):
        return None
    if len(chunk) >= 75 and chunk.endswith(b'"}') and chunk[-75:-66] == _HASH_HEAD:
        return chunk[-66:-2].decode("ascii", "replace")
    return False


def agent_marker(agent: str) -> bytes:
    """What every line of ``agent`` contains (see the module doc)."""
    return quote(agent).encode("utf-8", "surrogatepass")


def scan(path: Path, agent: str | None, scan: Scan | None = None, *, chain: bool = True,
         only: bytes | None = None,
         progress: Callable[[Scan], None] | None = None) -> Iterator[Logged]:
    """The lines of ``agent`` (every line when ``None``) of every file of the
    log at ``path``, in order, with their hashes; the chain checked over every
    line when ``chain`` (raises :class:`LogProblem` at the first break).
    ``only``: just the agent's lines that contain these bytes."""
    stats = scan if scan is not None else Scan()
    stats.files = files = log_files(path)
    stats.total = sum(_size(f) for f in files)
    marker = None if agent is None else agent_marker(agent)
    previous: str | None = None  # the hash of the line before
    live = current_number(path)
    every = 1 << 20
    next_report = every
    for index, file in enumerate(files):
        try:
            handle = open(file, "rb")  # noqa: SIM115 - closed below, also when abandoned
        except OSError as exc:
            raise LogProblem(f"cannot read {file}: {exc.strerror or exc}") from None
        file_no = live if index == len(files) - 1 and file == path else \
            int(file.name.rsplit(".", 1)[1])
        offset = 0
        with handle:
            for number, raw in enumerate(handle, 1):
                at = offset
                offset += len(raw)
                stats.done += len(raw)
                if progress is not None and stats.done >= next_report:
                    progress(stats)
                    next_report = stats.done + every
                if not raw.endswith(b"\n"):  # a writer died mid-line: its change never was
                    if index != len(files) - 1:
                        raise LogProblem(f"{file.name} ends in half a line but is not the "
                                         "newest file")
                    break
                chunk = raw[:-1]
                stats.lines += 1
                line: dict[str, Any] | None = None
                digest = ""
                if chain:
                    digest = hashlib.sha256(chunk).hexdigest()
                    prev = _prev(chunk)
                    if prev is False:
                        line = _parse(chunk, file, number)
                        if "prev" in line:
                            prev = line["prev"]
                        else:
                            stats.legacy += 1
                    if prev is not False and prev != previous:
                        where = f"{file.name} line {number}"
                        what = ("the log starts mid-chain: the line before it is missing (a "
                                "removed line or file)") if previous is None else (
                            "it does not follow the line before it: a line was edited, "
                            "removed, inserted or reordered here")
                        raise LogProblem(f"{where}: broken hash chain -- {what}")
                    previous = digest
                if (marker is not None and marker not in chunk) or \
                        (only is not None and only not in chunk):
                    continue
                if line is None:
                    line = _parse(chunk, file, number)
                if agent is None or line.get("agent") == agent:
                    yield Logged(line, f"{file.name} line {number}", digest,
                                 (file_no, at, len(raw)))
    if progress is not None:
        progress(stats)


def _parse(chunk: bytes, file: Path, number: int) -> dict[str, Any]:
    try:
        line = json.loads(chunk)
    except ValueError:
        raise LogProblem(f"{file.name} line {number} is not JSON (edited or damaged)") from None
    if not isinstance(line, dict):
        raise LogProblem(f"{file.name} line {number} is not a JSON object (edited or damaged)")
    return line


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0


def read_chained(path: Path) -> tuple[list[Logged], int]:
    """Every complete line of the log, the chain checked; (lines, legacy count).
    Holds the whole log: for tests and small logs (verify and show stream)."""
    stats = Scan()
    lines = list(scan(path, None, stats))
    return lines, stats.legacy
