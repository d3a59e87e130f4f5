"""A plain in-memory reference model of the seed's Memory API.

Written straight from ``shared/seed/memory-api.txt`` and ``CONTRACT.md``, as
simply as possible, so that the stateful test (``test_stateful.py``) can run
random operation sequences against the real store and this model side by side
and compare every result, error code and audit line.  It deliberately shares
no code with ``rotifer.memory``: it imports nothing from it, keeps entries in a
dict and recomputes everything (used bytes, eviction order, expiry) from the
spec's sentences on every call.  Policies arrive in the seed's JSON form
(camelCase dicts); the test converts the store's results to the same plain
form before comparing.

Where the spec leaves a detail open, the model follows CONTRACT.md; where both
are silent the choice is marked ``# reading:`` and listed in the test's report.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

CATEGORIES: Final = ("PREFERENCE", "PATTERN", "CONTEXT", "CACHE")
SCOPES: Final = ("CREATOR_GENE_ONLY", "SAME_DOMAIN", "ALL_GENES", "DEPLOYER_CONFIGURED")
SHARES: Final = ("PRIVATE", "ANONYMIZED_SHARE", "KNOWLEDGE_GENE")
#: "CACHE, oldest first, before anything else", then PATTERN, then CONTEXT; never PREFERENCE.
EVICTION_ORDER: Final = ("CACHE", "PATTERN", "CONTEXT")
DEFAULT_ACCESS: Final = {"readScope": "SAME_DOMAIN", "writeScope": "SAME_DOMAIN",
                         "sharePolicy": "PRIVATE"}
RETENTION_FIELDS: Final = ("maxRetentionDays", "autoDeleteOnTermination",
                           "anonymizationSupported")
FILTER_FIELDS: Final = ("category", "keyPrefix", "since", "until", "limit")
MAX_KEY_BYTES: Final = 1024
MAX_VALUE_BYTES: Final = 1024 * 1024
MAX_DAYS: Final = 2_147_483_647
DAY_US: Final = 86_400 * 1_000_000
DEPLOYER: Final = "deployer"


class Unset:
    """The model's own "argument not given" marker (the store's is ``UNSET``)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET_: Final = Unset()


class ModelError(Exception):
    """A refusal the spec requires; ``code`` is one of the seed's codes."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


#: Marks an audit field the spec does not pin down (the test does not compare it).
ANY: Final = object()


def fmt_time(us: int) -> str:
    """RFC 3339, UTC, ``Z``, microseconds kept (CONTRACT.md)."""
    dt = datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> int:
    """Epoch microseconds of an RFC 3339 date-time (offset required)."""
    if len(text) < 20 or text[10] not in "Tt":
        raise ValueError(text)
    dt = datetime.fromisoformat(text.replace("z", "Z"))
    if dt.tzinfo is None:
        raise ValueError(text)
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def entry_id(agent: str, key: str) -> str:
    return hashlib.sha256(agent.encode() + b"\0" + key.encode()).hexdigest()


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass
class Entry:
    key: str
    category: str
    value: bytes
    created_by: str
    creator_domain: str | None
    last_accessed_by: str
    created_us: int
    updated_us: int
    access: dict[str, str]
    retention: dict[str, Any] | None
    #: Write order, for ties in updatedAt (CONTRACT.md: "ties ordered by write order").
    seq: int

    @property
    def size(self) -> int:
        """The quota counts the UTF-8 bytes of the key and of the value."""
        return len(self.key.encode()) + len(self.value)

    def as_json(self, agent: str) -> dict[str, Any]:
        """The seed's JSON form of the entry."""
        return {
            "entryId": entry_id(agent, self.key),
            "category": self.category,
            "key": self.key,
            "value": base64.b64encode(self.value).decode(),
            "createdBy": self.created_by,
            "lastAccessedBy": self.last_accessed_by,
            "createdAt": fmt_time(self.created_us),
            "updatedAt": fmt_time(self.updated_us),
            "accessPolicy": dict(self.access),
            "retentionPolicy": None if self.retention is None else dict(self.retention),
        }


@dataclass
class Agent:
    quota: int
    max_retention_days: int | None
    anonymization_supported: bool
    entries: dict[str, Entry] = field(default_factory=dict)
    #: The time of the agent's last change that wrote audit lines.
    last_us: int = 0

    def used(self) -> int:
        return sum(e.size for e in self.entries.values())


@dataclass(frozen=True)
class Gene:
    gene_id: str | None
    domain: str | None


class Model:
    """Agents, entries, a clock and the audit lines the spec requires."""

    def __init__(self, now_us: int) -> None:
        self.now = now_us
        self.agents: dict[str, Agent] = {}
        self.audit: list[dict[str, Any]] = []
        self.seq = 0
        #: The time of the change the current call makes (see :meth:`stamp`).
        self._ts: int | None = None

    # -- helpers ----------------------------------------------------------------

    def advance(self, us: int) -> None:
        self.now += us

    def create_agent(self, agent: str, quota: int, max_retention_days: int | None = None,
                     anonymization_supported: bool = False) -> None:
        self.agents[agent] = Agent(quota, max_retention_days, anonymization_supported)

    def stamp(self, agent: str) -> int:
        """The time of this call's change: the clock, unless that is not after the
        agent's last change (issue 15: times strictly increase per agent, in
        commit order, whatever the clock does)."""
        if self._ts is None:
            self._ts = max(self.now, self.agents[agent].last_us + 1)
        return self._ts

    def begin_call(self) -> None:
        self._ts = None

    def line(self, agent: str, action: str, key: str | None, category: Any, actor: Any,
             nbytes: Any, stamped: bool = True) -> None:
        ts = self.now
        if stamped:  # a change of the agent; refusals outside any change take the clock
            ts = self.agents[agent].last_us = self.stamp(agent)
        self.audit.append({"agent": agent, "action": action, "key": key, "category": category,
                           "actor": actor, "bytes": nbytes, "ts": ts})

    def expires_us(self, a: Agent, e: Entry) -> int | None:
        """updatedAt plus the entry's own maxRetentionDays, or the data policy's when
        its retentionPolicy is null; None means never."""
        days = a.max_retention_days if e.retention is None else e.retention["maxRetentionDays"]
        return None if days is None else e.updated_us + days * DAY_US

    def is_expired(self, a: Agent, e: Entry) -> bool:
        exp = self.expires_us(a, e)
        # reading: "expires at updatedAt plus that many days": gone from that instant on.
        return exp is not None and self.now >= exp

    def pending_expired(self, agent: str) -> bool:
        a = self.agents[agent]
        return any(self.is_expired(a, e) for e in a.entries.values())

    def purge(self, agent: str) -> None:
        """Expired entries are removed the next time memory is used; one line each."""
        a = self.agents[agent]
        for e in list(a.entries.values()):
            if self.is_expired(a, e):
                # reading: who "did" an expiry is not pinned (the store says "retention").
                self.line(agent, "expire", e.key, e.category, ANY, e.size)
                del a.entries[e.key]

    def used(self, agent: str) -> int:
        return self.agents[agent].used()

    def denied_no_id(self, agent: str, key: object) -> ModelError:
        """A gene without a v2 id: every call refused and recorded."""
        self.line(agent, "access_denied", key if isinstance(key, str) else None, ANY, None, ANY,
                  stamped=False)
        return ModelError("MEMORY_ACCESS_DENIED")

    @staticmethod
    def scope_allows(scope: str, gene: Gene, e: Entry) -> bool:
        if scope == "ALL_GENES":
            return True
        if scope == "CREATOR_GENE_ONLY":
            return gene.gene_id == e.created_by
        if scope == "SAME_DOMAIN":
            return gene.gene_id == e.created_by or (
                gene.domain is not None and gene.domain == e.creator_domain)
        return False  # DEPLOYER_CONFIGURED: always denied in this release

    # -- validation (MEMORY_INVALID_INPUT) ---------------------------------------

    @staticmethod
    def check_key(key: object) -> None:
        if (not isinstance(key, str) or key == "" or "\0" in key
                or len(key.encode()) > MAX_KEY_BYTES):
            raise ModelError("MEMORY_INVALID_INPUT")

    @staticmethod
    def check_category(category: object) -> str:
        if category not in CATEGORIES:
            raise ModelError("MEMORY_INVALID_INPUT")
        assert isinstance(category, str)
        return category

    @staticmethod
    def check_access(policy: object) -> dict[str, str] | None:
        if policy is None:
            return None
        if not isinstance(policy, dict) or set(policy) != set(DEFAULT_ACCESS):
            raise ModelError("MEMORY_INVALID_INPUT")
        if (policy["readScope"] not in SCOPES or policy["writeScope"] not in SCOPES
                or policy["sharePolicy"] not in SHARES):
            raise ModelError("MEMORY_INVALID_INPUT")
        return dict(policy)

    @staticmethod
    def check_retention(policy: object) -> dict[str, Any] | Unset | None:
        if policy is UNSET_ or policy is None:
            return policy  # type: ignore[return-value]
        if not isinstance(policy, dict) or set(policy) != set(RETENTION_FIELDS):
            raise ModelError("MEMORY_INVALID_INPUT")
        days = policy["maxRetentionDays"]
        if days is not None and not (_is_int(days) and 1 <= days <= MAX_DAYS):
            raise ModelError("MEMORY_INVALID_INPUT")
        if not isinstance(policy["autoDeleteOnTermination"], bool):
            raise ModelError("MEMORY_INVALID_INPUT")
        if not isinstance(policy["anonymizationSupported"], bool):
            raise ModelError("MEMORY_INVALID_INPUT")
        return dict(policy)

    def fits_data_policy(self, a: Agent, access: dict[str, str],
                         retention: dict[str, Any] | None) -> bool:
        if "DEPLOYER_CONFIGURED" in (access["readScope"], access["writeScope"]):
            return False  # "a write that sets it is refused"
        if access["sharePolicy"] != "PRIVATE" and not a.anonymization_supported:
            return False
        if retention is not None and a.max_retention_days is not None:
            days = retention["maxRetentionDays"]
            if days is None or days > a.max_retention_days:
                return False  # keeps it longer than the agent's policy allows
        return True

    # -- the four calls ------------------------------------------------------------

    def read(self, agent: str, gene: Gene, key: object, category: object = None
             ) -> dict[str, Any] | None:
        self.begin_call()
        if gene.gene_id is None:
            raise self.denied_no_id(agent, key)
        self.check_key(key)
        if category is not None:
            self.check_category(category)
        assert isinstance(key, str)
        self.purge(agent)
        a = self.agents[agent]
        e = a.entries.get(key)
        if e is None or (category is not None and e.category != category):
            return None
        if not self.scope_allows(e.access["readScope"], gene, e):
            self.line(agent, "access_denied", key, ANY, gene.gene_id, ANY)
            raise ModelError("MEMORY_ACCESS_DENIED")
        e.last_accessed_by = gene.gene_id  # a read sets lastAccessedBy, nothing else
        return e.as_json(agent)

    def write(self, agent: str, gene: Gene, key: object, value: object, category: object,
              access: object = None, retention: object = UNSET_) -> dict[str, Any]:
        self.begin_call()
        if gene.gene_id is None:
            raise self.denied_no_id(agent, key)
        self.check_key(key)
        if not isinstance(value, bytes) or len(value) > MAX_VALUE_BYTES:
            raise ModelError("MEMORY_INVALID_INPUT")
        cat = self.check_category(category)
        acc = self.check_access(access)
        ret = self.check_retention(retention)
        assert isinstance(key, str)
        self.purge(agent)
        a = self.agents[agent]
        size = len(key.encode()) + len(value)
        old = a.entries.get(key)

        def refuse(code: str, action: str) -> ModelError:
            if action == "quota_exceeded":
                self.line(agent, action, key, cat, gene.gene_id, size)
            else:
                self.line(agent, action, key, ANY, gene.gene_id, ANY)
            return ModelError(code)

        if old is not None:
            if not self.scope_allows(old.access["writeScope"], gene, old):
                raise refuse("MEMORY_ACCESS_DENIED", "access_denied")
            new_acc = old.access if acc is None else acc
            new_ret = old.retention if isinstance(ret, Unset) else ret
            if (new_acc, new_ret) != (old.access, old.retention):
                if gene.gene_id != old.created_by:
                    raise refuse("MEMORY_ACCESS_DENIED", "access_denied")
                if not self.fits_data_policy(a, new_acc, new_ret):
                    raise refuse("MEMORY_ACCESS_DENIED", "access_denied")
        else:
            new_acc = dict(DEFAULT_ACCESS) if acc is None else acc
            new_ret = None if isinstance(ret, Unset) else ret
            if not self.fits_data_policy(a, new_acc, new_ret):
                raise refuse("MEMORY_ACCESS_DENIED", "access_denied")

        # Quota: the old bytes of a replaced entry are freed by the replacement.
        used = a.used() - (0 if old is None else old.size) + size
        victims: list[Entry] = []
        if used > a.quota:
            for cat_ in EVICTION_ORDER:
                candidates = sorted(
                    (e for e in a.entries.values() if e.category == cat_ and e.key != key),
                    key=lambda e: (e.updated_us, e.seq))
                for e in candidates:
                    if used <= a.quota:
                        break
                    victims.append(e)
                    used -= e.size
            if used > a.quota:
                # the whole write, cleanup included, is one transaction: nothing evicted
                raise refuse("MEMORY_QUOTA_EXCEEDED", "quota_exceeded")
        for e in victims:
            # reading: the evict line's actor is not pinned.
            self.line(agent, "evict", e.key, e.category, ANY, e.size)
            del a.entries[e.key]

        self.seq += 1
        if old is None:
            now = self.stamp(agent)
            e = Entry(key, cat, value, gene.gene_id, gene.domain, gene.gene_id, now,
                      now, new_acc, new_ret, self.seq)
            self.line(agent, "write", key, cat, gene.gene_id, size)
        else:
            e = replace(old, category=cat, value=value, last_accessed_by=gene.gene_id,
                        updated_us=self.stamp(agent), access=new_acc, retention=new_ret,
                        seq=self.seq)
            self.line(agent, "update", key, cat, gene.gene_id, size)
        a.entries[key] = e
        return e.as_json(agent)

    def query(self, agent: str, gene: Gene, flt: object = None) -> list[dict[str, Any]]:
        self.begin_call()
        if gene.gene_id is None:
            raise self.denied_no_id(agent, None)
        flt = {} if flt is None else flt
        if not isinstance(flt, dict) or set(flt) - set(FILTER_FIELDS):
            raise ModelError("MEMORY_INVALID_INPUT")
        category = flt.get("category")
        if category is not None:
            self.check_category(category)
        prefix = flt.get("keyPrefix")
        if prefix is not None and (not isinstance(prefix, str) or "\x00" in prefix
                                   or any(0xD800 <= ord(c) <= 0xDFFF for c in prefix)):
            raise ModelError("MEMORY_INVALID_INPUT")  # a key's text rules: no NUL, no surrogate
        limit = flt.get("limit", 100)
        if not (_is_int(limit) and 1 <= limit <= 1000):
            raise ModelError("MEMORY_INVALID_INPUT")
        bounds = []
        for name in ("since", "until"):
            raw = flt.get(name)
            if raw is None:
                bounds.append(None)
                continue
            try:
                bounds.append(parse_rfc3339(raw))
            except (TypeError, ValueError):
                raise ModelError("MEMORY_INVALID_INPUT") from None
        since, until = bounds
        self.purge(agent)
        a = self.agents[agent]
        found = [
            e for e in a.entries.values()
            if self.scope_allows(e.access["readScope"], gene, e)
            and (category is None or e.category == category)
            and (prefix is None or e.key.startswith(prefix))
            and (since is None or e.updated_us >= since)
            and (until is None or e.updated_us < until)
        ]
        # most recently updated first; reading: a tie goes to the later write.
        found.sort(key=lambda e: (e.updated_us, e.seq), reverse=True)
        return [e.as_json(agent) for e in found[:limit]]

    def delete(self, agent: str, gene: Gene, key: object) -> None:
        self.begin_call()
        if gene.gene_id is None:
            raise self.denied_no_id(agent, key)
        self.check_key(key)
        assert isinstance(key, str)
        self.purge(agent)
        a = self.agents[agent]
        e = a.entries.get(key)
        if e is None:
            raise ModelError("MEMORY_NOT_FOUND")
        if not self.scope_allows(e.access["writeScope"], gene, e):
            self.line(agent, "access_denied", key, ANY, gene.gene_id, ANY)
            raise ModelError("MEMORY_ACCESS_DENIED")
        self.line(agent, "delete", key, e.category, gene.gene_id, e.size)
        del a.entries[key]

    # -- the deployer --------------------------------------------------------------

    def _newest(self, a: Agent, category: str | None) -> list[Entry]:
        found = [e for e in a.entries.values() if category is None or e.category == category]
        return sorted(found, key=lambda e: (e.updated_us, e.seq), reverse=True)

    def deployer_list(self, agent: str, category: object = None) -> list[dict[str, Any]]:
        self.begin_call()
        if category is not None:
            self.check_category(category)
        self.purge(agent)
        a = self.agents[agent]
        return [e.as_json(agent) for e in self._newest(a, category)]  # type: ignore[arg-type]

    def deployer_delete_key(self, agent: str, key: object) -> int:
        self.begin_call()
        self.check_key(key)
        assert isinstance(key, str)
        self.purge(agent)
        a = self.agents[agent]
        e = a.entries.get(key)
        if e is None:
            raise ModelError("MEMORY_NOT_FOUND")
        self.line(agent, "deployer_delete", key, e.category, DEPLOYER, e.size)
        del a.entries[key]
        return 1

    def deployer_delete_category(self, agent: str, category: object) -> int:
        self.begin_call()
        cat = self.check_category(category)
        self.purge(agent)
        a = self.agents[agent]
        gone = self._newest(a, cat)
        for e in gone:
            self.line(agent, "deployer_delete", e.key, e.category, DEPLOYER, e.size)
            del a.entries[e.key]
        return len(gone)
