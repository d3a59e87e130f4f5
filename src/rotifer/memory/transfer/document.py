"""The export document: its fields, checksums, and reading and writing it in a stream.

The file is one JSON object (see the package docstring), laid out so that it
can be written and read one entry at a time without holding the agent in
memory: the fields known before the entries on the first line, ending with
``"entries":[``; one entry record per line (every record after the first
starts with a comma); then a line ``],`` followed by the fields known only
after the entries (counts, totals, checksum) and the closing brace.  Any
JSON parser reads it as the same object.  A file in another layout (written
by hand, or by an older rotifer on one line) is still read, whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Protocol

from ..errors import invalid, storage
from ..model import Category
from ..storage.backend import Row
from ..store import to_entry

FORMAT: Final = "rotifer-agent-memory"
VERSION: Final = 1
#: Categories that always move with the agent; CACHE only with ``keep_cache``.
CARRIED: Final = (Category.PREFERENCE, Category.PATTERN, Category.CONTEXT)
RECORD_FIELDS: Final = {"entry", "creatorDomain", "seq", "expiresUs", "sha256"}
#: Fields written before the entries, and after them.
HEAD_FIELDS: Final = ("format", "version", "agent", "exportedAt", "source", "keepCache",
                      "settings")
TAIL_FIELDS: Final = ("counts", "totalBytes", "leftBehind", "sha256")
TOP_FIELDS: Final = {*HEAD_FIELDS, "entries", *TAIL_FIELDS}
#: Fields a file may have or lack: ``epoch``, the exported memory's epoch (files
#: written before epochs were have none), which the import's audit line names so
#: that ``audit verify`` and ``show`` follow the agent's history back through it.
#: ``spec``: the agent's spec as the exporting project's CLI gave it (an object
#: the memory layer carries and does not read), so that ``agent import`` in
#: another project can create the agent from the file alone.
#: ``history``: the agent's audit lines up to the export (committed changes,
#: oldest first, never a value), which an import into a log that has none of
#: them appends before its own, so that the history goes on (``audit show``).
OPTIONAL_FIELDS: Final = frozenset({"epoch", "spec", "history"})
_OPEN_ENTRIES: Final = '"entries":['


class Progress(Protocol):
    """Told how far a transfer got (the CLI draws a bar from it)."""

    def start(self, entries: int | None, nbytes: int | None) -> None:
        """The totals, where known in advance."""

    def advance(self, entries: int, nbytes: int) -> None:
        """This many more entries and bytes are done."""

    def finish(self) -> None: ...


@dataclass(frozen=True)
class TransferReport:
    """What an export, import or move carried (for the CLI to print)."""

    agent: str
    entries: int
    bytes: int
    sha256: str
    counts: dict[str, int]
    left_behind: int = 0
    left_behind_bytes: int = 0
    source: str = ""
    destination: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "entries": self.entries, "bytes": self.bytes,
                "sha256": self.sha256, "counts": dict(self.counts),
                "leftBehind": {"count": self.left_behind, "bytes": self.left_behind_bytes},
                "source": self.source, "destination": self.destination}


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def sha(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def entry_record(row: Row) -> dict[str, Any]:
    """One entry as the file carries it, with its checksum."""
    data: dict[str, Any] = {"entry": to_entry(row).to_json(), "creatorDomain": row.creator_domain,
                            "seq": row.seq, "expiresUs": row.expires_us}
    data["sha256"] = sha(data)
    return data


class TotalChecksum:
    """The document's ``sha256``, fed one entry checksum at a time.

    Byte for byte ``sha256(canonical({"agent": ..., "settings": ...,
    "entries": [each entry's sha256, in file order]}))``, without the list."""

    def __init__(self, agent_id: str, settings: Mapping[str, Any]) -> None:
        self._hash = hashlib.sha256(b'{"agent":' + canonical(agent_id) + b',"entries":[')
        self._settings = dict(settings)
        self._first = True

    def add(self, entry_sha: str) -> None:
        self._hash.update((b"" if self._first else b",") + canonical(entry_sha))
        self._first = False

    def hexdigest(self) -> str:
        done = self._hash.copy()
        done.update(b'],"settings":' + canonical(self._settings) + b"}")
        return done.hexdigest()


class EntrySet:
    """An order-free fingerprint of a set of entries: their count and the sum of
    their checksums (mod 2**256).  Two sets agree when the same entries, every
    field included, are in both, whatever order they were read in."""

    def __init__(self) -> None:
        self.count = 0
        self.total = 0

    def add(self, entry_sha: str) -> None:
        self.count += 1
        self.total = (self.total + int(entry_sha, 16)) % (1 << 256)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EntrySet) and (self.count, self.total) == (other.count,
                                                                            other.total)

    __hash__ = None  # type: ignore[assignment]


# -- writing ---------------------------------------------------------------------------


class DocumentWriter:
    """Writes an export aside (a private temporary file beside ``path``), one
    entry at a time; :meth:`close` fsyncs it and returns its path, for the
    caller to rename into place once the export is audited."""

    def __init__(self, path: Path, head: Mapping[str, Any]) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            self._file: IO[bytes] = os.fdopen(fd, "wb", buffering=1 << 16)
        except OSError as exc:
            unlink_quietly(self.tmp)
            raise storage(f"cannot write {path}: {exc.strerror or exc}") from exc
        self._first = True
        self._write(canonical(dict(head))[:-1] + b"," + _OPEN_ENTRIES.encode() + b"\n")

    def _write(self, data: bytes) -> None:
        try:
            self._file.write(data)
        except OSError as exc:
            self.abort()
            raise storage(f"cannot write {self.path}: {exc.strerror or exc}") from exc

    def entry(self, record: Mapping[str, Any]) -> None:
        self._write((b"" if self._first else b",") + canonical(dict(record)) + b"\n")
        self._first = False

    def close(self, tail: Mapping[str, Any]) -> Path:
        self._write(b"]," + canonical(dict(tail))[1:] + b"\n")
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        except OSError as exc:
            self.abort()
            raise storage(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        return self.tmp

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        unlink_quietly(self.tmp)


def unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):  # already renamed into place, or never made
        path.unlink()


# -- reading ---------------------------------------------------------------------------


@dataclass
class Document:
    """An export being read: the head fields, then the entries (an iterator, read
    once), then -- only once the entries are exhausted -- the tail fields."""

    head: dict[str, Any]
    entries: Iterator[Any]
    tail: dict[str, Any]
    #: The file's size, for progress (None for a document in memory).
    size: int | None = None
    #: Bytes read so far (file only).
    read: int = 0


def from_mapping(bundle: Mapping[str, Any]) -> Document:
    """A document already in memory (e.g. an older caller's dict)."""
    head = {k: v for k, v in bundle.items() if k not in TAIL_FIELDS and k != "entries"}
    tail = {k: bundle[k] for k in TAIL_FIELDS if k in bundle}
    entries = bundle.get("entries")
    if "entries" not in bundle:
        raise invalid(f"export has unknown field(s) [] or lacks {['entries']}")
    if not isinstance(entries, list):
        raise invalid("export entries must be a list")
    return Document(head, iter(entries), tail)


def _not_export(path: Path, why: str = "") -> Exception:
    return invalid(f"{path} is not an agent memory export{why}")


@contextlib.contextmanager
def open_document(path: Path) -> Iterator[Document]:
    """Open an export file for reading in a stream (or whole, if it is not laid out
    as rotifer writes it); MEMORY_INVALID_INPUT if it is not an export."""
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed below, after the caller streamed it
        size = os.fstat(file.fileno()).st_size
    except OSError as exc:
        raise invalid(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        first = file.readline()
        head = _streamed_head(first)
        if head is None:
            file.seek(0)
            yield _whole(path, file.read(), size)
            return
        doc = Document(head, iter(()), {}, size, len(first))
        doc.entries = _stream_entries(path, file, doc)
        yield doc
    except OSError as exc:
        raise invalid(f"cannot read {path}: {exc.strerror or exc}") from exc
    finally:
        file.close()


def _streamed_head(first: bytes) -> dict[str, Any] | None:
    text = first.rstrip(b"\r\n")
    if not text.endswith(_OPEN_ENTRIES.encode()) or not text.startswith(b"{"):
        return None
    try:
        data = json.loads(text + b"]}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("entries") != []:
        return None
    del data["entries"]
    return data


def _stream_entries(path: Path, file: IO[bytes], doc: Document) -> Iterator[Any]:
    first = True
    for line in file:
        doc.read += len(line)
        text = line.strip()
        if text.startswith(b"],"):
            try:
                tail = json.loads(b"{" + text[2:])
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise _not_export(path, f" (its closing fields are not JSON: {exc})") from None
            if not isinstance(tail, dict):
                raise _not_export(path)
            if file.read(1).strip():
                raise _not_export(path, " (data after its end)")
            doc.tail = tail
            return
        if not first:
            if not text.startswith(b","):
                raise _not_export(path, " (entries must be separated by commas)")
            text = text[1:]
        first = False
        try:
            yield json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _not_export(path, f" (an entry is not JSON: {exc})") from None
    raise _not_export(path, " (it ends before its entries do: the file is cut short)")


def _whole(path: Path, raw: bytes, size: int) -> Document:
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _not_export(path, f" (not JSON: {exc})") from None
    if not isinstance(data, dict):
        raise _not_export(path)
    doc = from_mapping(data)
    doc.size = size
    doc.read = size
    return doc


def read_export(path: Path) -> dict[str, Any]:
    """Load a whole export file into memory (for tools and tests; imports stream)."""
    with open_document(Path(path)) as doc:
        entries = list(doc.entries)
        return {**doc.head, "entries": entries, **doc.tail}
