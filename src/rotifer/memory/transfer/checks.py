"""Every check an import makes, one entry at a time.

Anything wrong -- a format or version we do not know, a checksum or count
that does not match, an entry the rules would never have admitted -- is
MEMORY_INVALID_INPUT; entries that do not fit the quota are
MEMORY_QUOTA_EXCEEDED.  The checks hold no entry longer than it takes to
check it: what they remember per entry is an 8-byte fingerprint of its key
and its write-order number (to refuse duplicates).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ..clock import format_time, parse_time
from ..errors import AgentMemoryError, ErrorCode, invalid
from ..model import (
    Category,
    DataPolicy,
    MemoryEntry,
    check_agent_id,
    check_key,
    check_value,
    entry_id,
)
from ..policy import check_fits_data_policy, expires_at
from ..storage.backend import AgentRecord, Row
from .document import (
    FORMAT,
    OPTIONAL_FIELDS,
    RECORD_FIELDS,
    TOP_FIELDS,
    VERSION,
    EntrySet,
    TotalChecksum,
    from_mapping,
    sha,
)


def _int(value: object, what: str, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise invalid(f"{what} must be a whole number >= {minimum}")
    return value


class ExportChecker:
    """Checks a document's head on creation, each entry with :meth:`row`, and
    the counts, totals and checksum with :meth:`finish`."""

    def __init__(self, head: Mapping[str, Any], *, quota_bytes: int | None = None) -> None:
        if head.get("format") != FORMAT:
            raise invalid(f"not an agent memory export (format must be {FORMAT!r})")
        if head.get("version") != VERSION:
            raise invalid(f"unsupported export version {head.get('version')!r}; "
                          f"this rotifer reads version {VERSION}")
        unknown = sorted(set(head) - TOP_FIELDS - OPTIONAL_FIELDS)
        if unknown:
            raise invalid(f"export has unknown field(s) {unknown} or lacks []")
        if "spec" in head and not isinstance(head["spec"], dict):
            raise invalid("export's 'spec' must be an object")
        history = head.get("history", [])
        if not isinstance(history, list) or not all(
                isinstance(x, dict) and x.get("agent") == head.get("agent")
                and isinstance(x.get("action"), str) and "value" not in x for x in history):
            raise invalid("export's 'history' must be a list of the agent's audit lines")
        self.head = dict(head)
        agent_id = head.get("agent")
        if not isinstance(agent_id, str) or not agent_id or "\x00" in agent_id:
            raise invalid("export has no valid agent id")
        check_agent_id(agent_id)
        self.agent_id = agent_id
        settings = head.get("settings")
        if not isinstance(settings, dict) or \
                set(settings) != {"quotaBytes", "dataPolicy", "nextSeq"}:
            raise invalid("export settings must be exactly quotaBytes, dataPolicy, nextSeq")
        self.settings = settings
        quota = _int(settings["quotaBytes"], "quotaBytes", 1)
        if quota_bytes is not None:
            quota = _int(quota_bytes, "the destination's memory quota", 1)
        self.quota = quota
        self.policy = DataPolicy.from_json(settings["dataPolicy"])
        self.next_seq = _int(settings["nextSeq"], "nextSeq", 1)
        epoch = head.get("epoch", "")
        if not isinstance(epoch, str) or len(epoch) > 64:
            raise invalid("epoch must be a short string")
        #: The exported memory's epoch (``""``: unknown), named by the import's line.
        self.epoch = epoch
        keep_cache = head.get("keepCache")
        if not isinstance(keep_cache, bool):
            raise invalid("keepCache must be a boolean")
        self.keep_cache = keep_cache
        self._keys: set[int] = set()
        self._seqs: set[int] = set()
        self.checksum = TotalChecksum(agent_id, settings)
        self.entries = EntrySet()
        self.counts = {c.value: 0 for c in Category}
        self.total = 0

    def empty_record(self) -> AgentRecord:
        """The agent as created before its entries (bytes counted at the end)."""
        return AgentRecord(agent_id=self.agent_id, quota_bytes=self.quota,
                           data_policy=self.policy, used_bytes=0, next_seq=self.next_seq)

    def row(self, rec: object, n: int) -> Row:
        """Entry ``n`` of the document, checked; the row to store."""
        where = f"entry {n}"
        if not isinstance(rec, dict) or set(rec) != RECORD_FIELDS:
            raise invalid(f"{where} must have exactly the fields {sorted(RECORD_FIELDS)}")
        body = {k: v for k, v in rec.items() if k != "sha256"}
        if rec["sha256"] != sha(body):
            raise invalid(f"{where} fails its checksum: the file is damaged")
        if not isinstance(rec["entry"], dict):
            raise invalid(f"{where} has no entry object")
        entry = MemoryEntry.from_json(rec["entry"])
        if not isinstance(rec["entry"]["key"], str):
            raise invalid(f"{where} has a key that is not a string")
        where = f"entry {n} ({entry.key!r})"
        check_key(entry.key)
        check_value(entry.value)
        if entry.entry_id != entry_id(self.agent_id, entry.key):
            raise invalid(f"{where} has an entryId that does not belong to agent "
                          f"{self.agent_id!r}")
        fingerprint = int.from_bytes(hashlib.blake2b(
            entry.key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")
        if fingerprint in self._keys:
            raise invalid(f"{where} appears twice")
        self._keys.add(fingerprint)
        if entry.category is Category.CACHE and not self.keep_cache:
            raise invalid(f"{where} is CACHE but the export says CACHE was left behind")
        seq = _int(rec["seq"], f"{where} seq", 1)
        if seq >= self.next_seq or seq in self._seqs:
            raise invalid(f"{where} has a write-order number that is reused or past nextSeq")
        self._seqs.add(seq)
        domain = rec["creatorDomain"]
        if domain is not None and not isinstance(domain, str):
            raise invalid(f"{where} creatorDomain must be a string or null")
        problem = check_fits_data_policy(entry.access_policy, entry.retention_policy,
                                         self.policy)
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
        if expires != expires_at(updated, entry.retention_policy, self.policy):
            raise invalid(f"{where} has an expiry time that does not follow from its "
                          "retention policy and updatedAt")
        row = Row(
            agent_id=self.agent_id, key=entry.key, category=entry.category, value=entry.value,
            created_by=entry.created_by, creator_domain=domain,
            last_accessed_by=entry.last_accessed_by, created_us=created, updated_us=updated,
            access=entry.access_policy, retention=entry.retention_policy,
            expires_us=expires, seq=seq)
        self.checksum.add(rec["sha256"])
        self.entries.add(rec["sha256"])
        self.counts[row.category.value] += 1
        self.total += row.size
        return row

    def finish(self, tail: Mapping[str, Any]) -> AgentRecord:
        """Check the document's closing fields; the agent record with its bytes.

        The rows are all in, so their duplicate checks end here and their sets
        go: a move keeps the checker of its first pass (the checksum of what
        goes) through its second, and two such pairs of sets were most of the
        move's peak memory (a 40,000-entry agent: ~8 MB of the 20 MB limit in
        tests/memory/test_transfer_memory.py)."""
        self._keys, self._seqs = set(), set()
        fields = (set(self.head) | set(tail) | {"entries"}) - OPTIONAL_FIELDS
        if fields != TOP_FIELDS or set(self.head) & set(tail):
            raise invalid(f"export has unknown field(s) {sorted(fields - TOP_FIELDS)} or lacks "
                          f"{sorted(TOP_FIELDS - fields)}")
        if tail["counts"] != self.counts:
            raise invalid(f"export counts {tail['counts']} do not match its entries "
                          f"{self.counts}")
        if tail["totalBytes"] != self.total:
            raise invalid(f"export totalBytes {tail['totalBytes']} does not match its entries "
                          f"({self.total})")
        if tail["sha256"] != self.checksum.hexdigest():
            raise invalid("the export fails its total checksum: the file is damaged")
        if self.total > self.quota:
            raise AgentMemoryError(ErrorCode.QUOTA_EXCEEDED,
                              f"agent {self.agent_id!r}'s entries need {self.total} bytes, more "
                              f"than the quota of {self.quota} bytes; nothing was imported (an "
                              "import never evicts)")
        return AgentRecord(agent_id=self.agent_id, quota_bytes=self.quota,
                           data_policy=self.policy, used_bytes=self.total,
                           next_seq=self.next_seq)


def check_export(bundle: Mapping[str, Any], *, quota_bytes: int | None = None
                 ) -> tuple[AgentRecord, list[Row]]:
    """Every check an import makes, on a document in memory: the agent record the
    destination gets (with ``quota_bytes`` if given) and the rows to insert."""
    doc = from_mapping(bundle)
    checker = ExportChecker(doc.head, quota_bytes=quota_bytes)
    rows = [checker.row(rec, n) for n, rec in enumerate(doc.entries)]
    return checker.finish(doc.tail), rows
