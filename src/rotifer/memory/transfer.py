"""Moving an agent's memory to another binding: export, import and move.

The seed: "When an agent moves to another binding, its PREFERENCE, PATTERN and
CONTEXT entries go with it, with their access policies, retention policies and
createdBy unchanged.  CACHE entries may be left behind and rebuilt."

* :func:`export_agent` writes one agent's memory to a JSON file (a copy: the
  source keeps it).  CACHE is left out unless ``keep_cache``.
* :func:`import_agent` loads such a file into a store that has no memory for
  that agent yet.  It is all-or-nothing: one backend write transaction creates
  the agent and every entry, then reads them back and checks the counts, the
  bytes and the checksums *before* it commits.
* :func:`move_agent` does both between two open stores (SQLite -> PostgreSQL
  or back) and then removes the agent from the source, so it lives in one
  place.  See :func:`move_agent` for how it stays all-or-nothing across two
  databases.

Entries are carried exactly as stored: key, category, value, createdBy,
lastAccessedBy, createdAt, updatedAt (to the microsecond), access and
retention policies, plus what the rules need beyond the seed's fields (the
creator's domain for SAME_DOMAIN, the write-order number for ties, the expiry
time).  The entryId is the same, because the agent id is.

Every side audits (actor ``deployer``), in the audit log of the store it
happens in: ``export`` on the source; on the destination one ``import_agent``
line and one ``import`` line per entry (``via`` says ``file`` or ``move``);
for a move, on the source one ``move`` line, one ``move_out`` line per carried
entry and one ``move_drop`` line per CACHE entry left behind.  As everywhere,
the lines are appended before the change commits: no line, no change.

Choices (documented in docs/backends.md):

* The destination must not have a memory for the agent yet: an import or move
  never merges or overwrites (MEMORY_INVALID_INPUT, nothing changed).  Merging
  two memories would have to pick winners per key and re-run cleanup; dropping
  the one already there would lose data.  Remove it first if it must go.
* An agent that has no memory in the source is MEMORY_NOT_FOUND.
* After a verified move the agent is dropped from the source, so it lives in
  exactly one place; an export leaves the source as it was.
* The agent keeps its quota and data policy unless ``quota_bytes`` gives the
  destination a different quota; a quota the carried entries do not fit is
  MEMORY_QUOTA_EXCEEDED, and nothing is changed anywhere (an import never
  evicts).

The file format (version 1)
---------------------------

A JSON object::

    {"format": "rotifer-agent-memory", "version": 1,
     "agent": "<agent id>", "exportedAt": "<RFC 3339>", "source": "<backend:where>",
     "keepCache": false,
     "settings": {"quotaBytes": 10485760,
                  "dataPolicy": {"maxRetentionDays": null, "anonymizationSupported": false},
                  "nextSeq": 42},
     "entries": [{"entry": <MemoryEntry.to_json(): the seed's JSON, value in base64>,
                  "creatorDomain": "formatter" | null,
                  "seq": 7,
                  "expiresUs": 1767225600000000 | null,
                  "sha256": "<hex>"}, ...],          # in write order (seq)
     "counts": {"PREFERENCE": 1, "PATTERN": 0, "CONTEXT": 0, "CACHE": 0},
     "totalBytes": 123,                               # UTF-8 key bytes + value bytes
     "leftBehind": {"count": 3, "bytes": 900},        # CACHE entries not carried
     "sha256": "<hex>"}

``canonical(x)`` is ``json.dumps(x, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` in UTF-8.  An entry's ``sha256`` is the SHA-256 of
``canonical`` of its record without the ``sha256`` field.  The total
``sha256`` is the SHA-256 of ``canonical({"agent": ..., "settings": ...,
"entries": [each entry's sha256, in file order]})``.  ``exportedAt``,
``source`` and ``leftBehind`` are informational and not covered.  The
checksums catch damage, not tampering (anyone who can edit the file can
recompute them); so an import also re-checks every rule an entry must satisfy
(valid key and value, its entryId, a policy the data policy allows, an expiry
time that follows from its retention, the quota).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .audit import DEPLOYER
from .backend import AgentRecord, Row, Transaction
from .changes import Change, log_change, settle
from .clock import format_time, parse_time
from .errors import ErrorCode, MemoryError, invalid, storage
from .model import (
    Category,
    DataPolicy,
    MemoryEntry,
    check_key,
    check_value,
    entry_id,
)
from .policy import check_fits_data_policy, expires_at
from .store import MemoryStore, to_entry

FORMAT: Final = "rotifer-agent-memory"
VERSION: Final = 1
#: Categories that always move with the agent; CACHE only with ``keep_cache``.
CARRIED: Final = (Category.PREFERENCE, Category.PATTERN, Category.CONTEXT)
_RECORD_FIELDS: Final = {"entry", "creatorDomain", "seq", "expiresUs", "sha256"}
_TOP_FIELDS: Final = {"format", "version", "agent", "exportedAt", "source", "keepCache",
                      "settings", "entries", "counts", "totalBytes", "leftBehind", "sha256"}


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


def _sha(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def describe(store: MemoryStore) -> str:
    """``backend:where`` for messages and audit lines (never a password)."""
    backend = store.backend
    where = str(getattr(backend, "location", None) or getattr(backend, "path", None) or "")
    schema = getattr(backend, "schema", "")
    if schema and schema != "public":
        where += f" (schema {schema})"
    return f"{backend.name}:{where}"


def _settings(record: AgentRecord) -> dict[str, Any]:
    return {"quotaBytes": record.quota_bytes, "dataPolicy": record.data_policy.to_json(),
            "nextSeq": record.next_seq}


def _record(row: Row) -> dict[str, Any]:
    data: dict[str, Any] = {"entry": to_entry(row).to_json(), "creatorDomain": row.creator_domain,
                            "seq": row.seq, "expiresUs": row.expires_us}
    data["sha256"] = _sha(data)
    return data


def _total(agent_id: str, settings: Mapping[str, Any], shas: list[str]) -> str:
    return _sha({"agent": agent_id, "settings": settings, "entries": shas})


def _all_rows(tx: Transaction, agent_id: str) -> list[Row]:
    return sorted(tx.iter_newest(agent_id), key=lambda r: r.seq)


@dataclass(frozen=True)
class _Snapshot:
    record: AgentRecord
    carried: list[Row]
    left: list[Row]      # CACHE not carried
    expired: list[Row]   # expired at snapshot time: gone, never carried

    def bundle(self, keep_cache: bool, now_us: int, source: str) -> dict[str, Any]:
        records = [_record(r) for r in self.carried]
        settings = _settings(self.record)
        counts = {c.value: sum(1 for r in self.carried if r.category is c) for c in Category}
        return {
            "format": FORMAT, "version": VERSION, "agent": self.record.agent_id,
            "exportedAt": format_time(now_us), "source": source, "keepCache": keep_cache,
            "settings": settings, "entries": records, "counts": counts,
            "totalBytes": sum(r.size for r in self.carried),
            "leftBehind": {"count": len(self.left), "bytes": sum(r.size for r in self.left)},
            "sha256": _total(self.record.agent_id, settings, [r["sha256"] for r in records]),
        }


def _snapshot(tx: Transaction, agent_id: str, now_us: int, keep_cache: bool) -> _Snapshot:
    record = tx.get_agent(agent_id)
    if record is None:
        raise MemoryError(ErrorCode.NOT_FOUND, f"agent {agent_id!r} has no memory in this store")
    carried: list[Row] = []
    left: list[Row] = []
    expired: list[Row] = []
    for row in _all_rows(tx, agent_id):
        if row.expires_us is not None and row.expires_us <= now_us:
            expired.append(row)
        elif row.category in CARRIED or keep_cache:
            carried.append(row)
        else:
            left.append(row)
    return _Snapshot(record, carried, left, expired)


def _line(now_us: int, agent_id: str, action: str, key: str | None = None,
          category: Category | None = None, nbytes: int = 0, **extra: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "ts": format_time(now_us), "agent": agent_id, "action": action, "key": key,
        "category": None if category is None else category.value, "actor": DEPLOYER,
        "bytes": nbytes, "entryId": None if key is None else entry_id(agent_id, key),
    }
    line.update(extra)
    return line


def _report(bundle: Mapping[str, Any], source: str, destination: str) -> TransferReport:
    return TransferReport(
        agent=bundle["agent"], entries=len(bundle["entries"]), bytes=bundle["totalBytes"],
        sha256=bundle["sha256"], counts=dict(bundle["counts"]),
        left_behind=bundle["leftBehind"]["count"], left_behind_bytes=bundle["leftBehind"]["bytes"],
        source=source, destination=destination)


# -- export ---------------------------------------------------------------------


def snapshot_agent(store: MemoryStore, agent_id: str, *, keep_cache: bool = False
                   ) -> dict[str, Any]:
    """The export document for ``agent_id`` (one consistent snapshot), unaudited."""
    if store.has_agent(agent_id):
        store.purge_expired(agent_id)  # audited as ``expire``, as any read path does
    now = store.clock.now_us()
    with store.backend.long_running(), store.backend.read() as tx:
        snap = _snapshot(tx, agent_id, now, keep_cache)
    return snap.bundle(keep_cache, now, describe(store))


def export_agent(store: MemoryStore, agent_id: str, path: Path, *, keep_cache: bool = False
                 ) -> TransferReport:
    """Write ``agent_id``'s memory to ``path`` (a copy; the store keeps it).

    The file is written aside and fsynced, then the ``export`` audit line is
    appended, then the file is renamed into place: it appears whole or not at
    all, and never without its audit line (if the line cannot be written, the
    file is removed and the call fails).  An existing file at ``path`` is
    replaced.  The file is readable by its owner only: memory can hold
    personal data.
    """
    bundle = snapshot_agent(store, agent_id, keep_cache=keep_cache)
    path = Path(path)
    tmp = _write_aside(path, canonical(bundle) + b"\n")
    try:
        store.audit.write([_line(
            store.clock.now_us(), agent_id, "export", nbytes=bundle["totalBytes"],
            entries=len(bundle["entries"]), sha256=bundle["sha256"], keepCache=keep_cache,
            leftBehind=bundle["leftBehind"]["count"], to=str(path))])
        os.replace(tmp, path)
    except OSError as exc:
        raise storage(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        _unlink_quietly(tmp)
    return _report(bundle, describe(store), str(path))


def _write_aside(path: Path, data: bytes) -> Path:
    """Write ``data`` to a private temporary file beside ``path`` and fsync it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        _unlink_quietly(tmp)
        raise storage(f"cannot write {path}: {exc.strerror or exc}") from exc
    return tmp


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):  # already renamed into place, or never made
        path.unlink()


# -- reading and checking a document ------------------------------------------------


def read_export(path: Path) -> dict[str, Any]:
    """Load an export file; MEMORY_INVALID_INPUT if it is not one."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise invalid(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise invalid(f"{path} is not an agent memory export (not JSON: {exc})") from None
    if not isinstance(data, dict):
        raise invalid(f"{path} is not an agent memory export")
    return data


def _int(value: object, what: str, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise invalid(f"{what} must be a whole number >= {minimum}")
    return value


def check_export(bundle: Mapping[str, Any], *, quota_bytes: int | None = None
                 ) -> tuple[AgentRecord, list[Row]]:
    """Every check an import makes before touching a store.

    Returns the agent record the destination gets (with ``quota_bytes`` if
    given, else the exported quota) and the rows to insert.  Anything wrong --
    a format or version we do not know, a checksum or count that does not
    match, an entry the rules would never have admitted -- is
    MEMORY_INVALID_INPUT; entries that do not fit the quota are
    MEMORY_QUOTA_EXCEEDED.
    """
    if bundle.get("format") != FORMAT:
        raise invalid(f"not an agent memory export (format must be {FORMAT!r})")
    if bundle.get("version") != VERSION:
        raise invalid(f"unsupported export version {bundle.get('version')!r}; "
                      f"this rotifer reads version {VERSION}")
    unknown = sorted(set(bundle) - _TOP_FIELDS)
    missing = sorted(_TOP_FIELDS - set(bundle))
    if unknown or missing:
        raise invalid(f"export has unknown field(s) {unknown} or lacks {missing}")
    agent_id = bundle["agent"]
    if not isinstance(agent_id, str) or not agent_id or "\x00" in agent_id:
        raise invalid("export has no valid agent id")
    settings = bundle["settings"]
    if not isinstance(settings, dict) or set(settings) != {"quotaBytes", "dataPolicy", "nextSeq"}:
        raise invalid("export settings must be exactly quotaBytes, dataPolicy, nextSeq")
    quota = _int(settings["quotaBytes"], "quotaBytes", 1)
    if quota_bytes is not None:
        quota = _int(quota_bytes, "the destination's memory quota", 1)
    policy = DataPolicy.from_json(settings["dataPolicy"])
    next_seq = _int(settings["nextSeq"], "nextSeq", 1)
    keep_cache = bundle["keepCache"]
    if not isinstance(keep_cache, bool):
        raise invalid("keepCache must be a boolean")
    entries = bundle["entries"]
    if not isinstance(entries, list):
        raise invalid("export entries must be a list")

    rows: list[Row] = []
    keys: set[str] = set()
    seqs: set[int] = set()
    shas: list[str] = []
    for n, rec in enumerate(entries):
        where = f"entry {n}"
        if not isinstance(rec, dict) or set(rec) != _RECORD_FIELDS:
            raise invalid(f"{where} must have exactly the fields {sorted(_RECORD_FIELDS)}")
        body = {k: v for k, v in rec.items() if k != "sha256"}
        if rec["sha256"] != _sha(body):
            raise invalid(f"{where} fails its checksum: the file is damaged")
        shas.append(rec["sha256"])
        if not isinstance(rec["entry"], dict):
            raise invalid(f"{where} has no entry object")
        entry = MemoryEntry.from_json(rec["entry"])
        if not isinstance(rec["entry"]["key"], str):
            raise invalid(f"{where} has a key that is not a string")
        where = f"entry {n} ({entry.key!r})"
        check_key(entry.key)
        check_value(entry.value)
        if entry.entry_id != entry_id(agent_id, entry.key):
            raise invalid(f"{where} has an entryId that does not belong to agent {agent_id!r}")
        if entry.key in keys:
            raise invalid(f"{where} appears twice")
        keys.add(entry.key)
        if entry.category is Category.CACHE and not keep_cache:
            raise invalid(f"{where} is CACHE but the export says CACHE was left behind")
        seq = _int(rec["seq"], f"{where} seq", 1)
        if seq >= next_seq or seq in seqs:
            raise invalid(f"{where} has a write-order number that is reused or past nextSeq")
        seqs.add(seq)
        domain = rec["creatorDomain"]
        if domain is not None and not isinstance(domain, str):
            raise invalid(f"{where} creatorDomain must be a string or null")
        problem = check_fits_data_policy(entry.access_policy, entry.retention_policy, policy)
        if problem is not None:
            raise invalid(f"{where} does not fit the agent's data policy: {problem.message}")
        try:
            created, updated = parse_time(entry.created_at), parse_time(entry.updated_at)
        except ValueError as exc:
            raise invalid(f"{where} has a bad timestamp: {exc}") from None
        if format_time(created) != entry.created_at or format_time(updated) != entry.updated_at \
                or created > updated:
            raise invalid(f"{where} has timestamps that the store never writes")
        expires = rec["expiresUs"]
        if expires != expires_at(updated, entry.retention_policy, policy):
            raise invalid(f"{where} has an expiry time that does not follow from its "
                          "retention policy and updatedAt")
        rows.append(Row(
            agent_id=agent_id, key=entry.key, category=entry.category, value=entry.value,
            created_by=entry.created_by, creator_domain=domain,
            last_accessed_by=entry.last_accessed_by, created_us=created, updated_us=updated,
            access=entry.access_policy, retention=entry.retention_policy,
            expires_us=expires, seq=seq))

    total = sum(r.size for r in rows)
    counts = {c.value: sum(1 for r in rows if r.category is c) for c in Category}
    if bundle["counts"] != counts:
        raise invalid(f"export counts {bundle['counts']} do not match its entries {counts}")
    if bundle["totalBytes"] != total:
        raise invalid(f"export totalBytes {bundle['totalBytes']} does not match its entries "
                      f"({total})")
    if bundle["sha256"] != _total(agent_id, settings, shas):
        raise invalid("the export fails its total checksum: the file is damaged")
    if total > quota:
        raise MemoryError(ErrorCode.QUOTA_EXCEEDED,
                          f"agent {agent_id!r}'s entries need {total} bytes, more than the "
                          f"quota of {quota} bytes; nothing was imported (an import never "
                          "evicts)")
    return AgentRecord(agent_id, quota, policy, total, next_seq), rows


# -- import ---------------------------------------------------------------------


def _verify(tx: Transaction, record: AgentRecord, rows: list[Row], bundle: Mapping[str, Any]
            ) -> None:
    """Read the agent back and compare with what was meant to be stored: the
    settings, the count and bytes, every row field by field, and the export's
    total checksum recomputed from the rows as stored."""
    agent_id = record.agent_id
    held = tx.get_agent(agent_id)
    # last_us is the time of the import itself, not part of what was exported.
    if held is None or dataclasses.replace(held, last_us=0) != \
            dataclasses.replace(record, last_us=0):
        raise storage(f"verification failed: agent {agent_id!r}'s settings differ after copying")
    count, used = tx.count(agent_id), tx.sum_sizes(agent_id)
    if count != len(rows) or used != record.used_bytes:
        raise storage(f"verification failed: agent {agent_id!r} holds {count} entries / "
                      f"{used} bytes, expected {len(rows)} / {record.used_bytes}")
    stored = _all_rows(tx, agent_id)
    shas = [_record(r)["sha256"] for r in stored]
    if stored != sorted(rows, key=lambda r: r.seq) or \
            _total(agent_id, bundle["settings"], shas) != bundle["sha256"]:
        raise storage(f"verification failed: agent {agent_id!r}'s entries differ after copying")


def _import(store: MemoryStore, record: AgentRecord, rows: list[Row], bundle: Mapping[str, Any],
            origin: str, via: str) -> None:
    """Create the agent and its entries in one transaction, verified and audited
    before it commits."""
    agent_id = record.agent_id
    # The import is change number record.next_seq of the agent (its lines carry
    # it), timed after every entry it brings; the agent's next change is the one after.
    change = Change(agent_id, 0, DEPLOYER, seq=record.next_seq)
    try:
        with store.backend.long_running(), store.backend.write(agent_id) as tx:
            if tx.get_agent(agent_id) is not None:
                raise invalid(f"agent {agent_id!r} already has a memory in {describe(store)}; "
                              "nothing was changed (remove it there first if it must go)")
            latest = max((r.updated_us for r in rows), default=0)
            now = max(store.clock.now_us(), latest + 1)
            stored = dataclasses.replace(record, next_seq=record.next_seq + 1, last_us=now)
            tx.insert_agent(stored)
            for row in rows:
                tx.put(row)
            _verify(tx, stored, rows, bundle)
            lines = [_line(now, agent_id, "import_agent", nbytes=record.used_bytes,
                           entries=len(rows), sha256=bundle["sha256"],
                           quotaBytes=record.quota_bytes, dataPolicy=record.data_policy.to_json(),
                           via=via, source=origin, seq=change.seq)]
            lines += [_line(now, agent_id, "import", r.key, r.category, r.size,
                            createdBy=r.created_by, via=via, seq=change.seq) for r in rows]
            # before the commit, as every change
            log_change(store.backend, tx, store.audit, agent_id, record.next_seq, lines, change)
    except BaseException as exc:
        settle(store.backend, store.audit, store.clock, change, exc)
        raise


def import_agent(store: MemoryStore, export: Mapping[str, Any] | Path, *,
                 quota_bytes: int | None = None, source: str | None = None) -> TransferReport:
    """Create the agent in ``store`` from an export (a document or a file path).

    All or nothing: every check of :func:`check_export` first, then one write
    transaction, read back and verified before it commits.  The agent must not
    have a memory in ``store`` yet (MEMORY_INVALID_INPUT otherwise); an import
    never merges.  The file is left where it is.
    """
    bundle = read_export(export) if isinstance(export, Path) else export
    record, rows = check_export(bundle, quota_bytes=quota_bytes)
    origin = source or (f"file:{export}" if isinstance(export, Path) else str(bundle["source"]))
    _import(store, record, rows, bundle, origin, "file")
    return _report(bundle, origin, describe(store))


def verify_agent(store: MemoryStore, export: Mapping[str, Any], *,
                 quota_bytes: int | None = None) -> None:
    """Check that ``store`` holds exactly what ``export`` describes (else STORAGE_ERROR)."""
    record, rows = check_export(export, quota_bytes=quota_bytes)
    record = dataclasses.replace(record, next_seq=record.next_seq + 1)  # the import's own number
    with store.backend.long_running(), store.backend.read() as tx:
        _verify(tx, record, rows, export)


# -- move -------------------------------------------------------------------------


def move_agent(source: MemoryStore, destination: MemoryStore, agent_id: str, *,
               keep_cache: bool = False, quota_bytes: int | None = None) -> TransferReport:
    """Move ``agent_id``'s memory from ``source`` to ``destination``.

    How it stays all-or-nothing across two databases:

    1. The source agent is held exclusively (a write transaction) for the whole
       move, so no gene can change it in between; a gene call waiting on it
       afterwards finds no memory there (MEMORY_STORAGE_ERROR) and the caller
       re-binds the agent to the destination.
    2. The destination gets the agent in one transaction, verified before it
       commits, then verified again by a fresh read after the commit.
    3. Only then are the source's ``move`` lines audited and the agent removed
       from the source, in the transaction held since step 1.
    4. If anything fails after step 2 committed, the copy is removed from the
       destination again (audited there as ``drop_agent``) -- but only if the
       source verifiably still has the agent.  If the source no longer has it
       (its commit went through though it reported an error), the move did
       happen and is reported as done.  If the source cannot be checked at
       all, the copy stays, because two copies can be cleaned up and none
       cannot; the error says so.

    CACHE entries are not carried unless ``keep_cache``; they are removed with
    the rest of the source's memory (audited as ``move_drop``).  ``quota_bytes``
    gives the agent a different quota at the destination.
    """
    if not source.has_agent(agent_id):
        raise MemoryError(ErrorCode.NOT_FOUND, f"agent {agent_id!r} has no memory in "
                          f"{describe(source)}")
    if destination.has_agent(agent_id):
        raise invalid(f"agent {agent_id!r} already has a memory in {describe(destination)}; "
                      "nothing was moved (remove it there first if it must go)")
    source.purge_expired(agent_id)
    src, dst = describe(source), describe(destination)
    copied = False
    bundle: dict[str, Any] = {}
    change = Change(agent_id, 0, DEPLOYER, removes_agent=True)
    try:
        with source.backend.long_running(), source.backend.write(agent_id) as tx:
            held = tx.get_agent(agent_id)
            if held is None:
                raise MemoryError(ErrorCode.NOT_FOUND, f"agent {agent_id!r} has no memory in "
                                  f"{src}")
            now = max(source.clock.now_us(), held.last_us + 1)
            change.seq = held.next_seq
            snap = _snapshot(tx, agent_id, now, keep_cache)
            # The move is the source's change N; the destination's import is N + 1.
            snap = dataclasses.replace(snap, record=dataclasses.replace(
                snap.record, next_seq=held.next_seq + 1))
            bundle = snap.bundle(keep_cache, now, src)
            record, rows = check_export(bundle, quota_bytes=quota_bytes)
            _import(destination, record, rows, bundle, f"move:{src}", "move")
            copied = True
            verify_agent(destination, bundle, quota_bytes=quota_bytes)
            seq: dict[str, Any] = {"seq": change.seq}
            lines = [_line(now, agent_id, "move", nbytes=bundle["totalBytes"],
                           entries=len(rows), sha256=bundle["sha256"], keepCache=keep_cache,
                           leftBehind=len(snap.left), to=dst, **seq)]
            lines += [_line(now, agent_id, "move_out", r.key, r.category, r.size,
                            createdBy=r.created_by, to=dst, **seq) for r in snap.carried]
            lines += [_line(now, agent_id, "move_drop", r.key, r.category, r.size,
                            createdBy=r.created_by, **seq) for r in snap.left]
            lines += [_line(now, agent_id, "expire", r.key, r.category, r.size,
                            actor="retention", createdBy=r.created_by, **seq)
                      for r in snap.expired]
            log_change(source.backend, tx, source.audit, agent_id, held.next_seq, lines, change)
            tx.delete_agent(agent_id)
    except BaseException as exc:  # an interrupt after the copy must not leave two copies
        settle(source.backend, source.audit, source.clock, change, exc)
        moved = copied and _undo_copy(source, destination, agent_id, exc)
        if not moved or not isinstance(exc, Exception):
            raise
    return _report(bundle, src, dst)


def _undo_copy(source: MemoryStore, destination: MemoryStore, agent_id: str,
               cause: BaseException) -> bool:
    """After a failure once the copy committed: remove the copy, unless the
    source is gone (then return True: the move happened after all)."""
    try:
        still_there = source.has_agent(agent_id)
    except Exception as exc:
        raise storage(
            f"moving {agent_id!r} failed ({cause}) and {describe(source)} cannot be checked "
            f"({exc}); the copy in {describe(destination)} is kept -- check both and remove "
            "one of them") from cause
    if not still_there:
        return True
    try:
        destination.drop_agent(agent_id)
    except Exception as exc:
        raise storage(
            f"moving {agent_id!r} failed ({cause}) and its copy in {describe(destination)} "
            f"could not be removed ({exc}): the agent is now in both places") from cause
    return False


__all__ = [
    "CARRIED",
    "FORMAT",
    "VERSION",
    "TransferReport",
    "canonical",
    "check_export",
    "describe",
    "export_agent",
    "import_agent",
    "move_agent",
    "read_export",
    "snapshot_agent",
    "verify_agent",
]
