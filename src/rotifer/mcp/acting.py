"""Who the MCP server acts as -- one gene of the agent, or its deployer -- and the
memory calls behind each tool and resource.

Every call goes through the memory's public calls (a gene's ``read_memory``,
``write_memory`` by way of ``write_untrusted``, ``query_memory``,
``delete_memory``; the deployer's ``read``, ``list`` and ``delete_key``), so
scopes, the data policy, quota and cleanup, retention and the audit log apply
exactly as for that gene's ``ctx.memory`` or for ``rotifer agent memory``.
Refusals are the memory's own :class:`AgentMemoryError`; the server turns them
into tool errors.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rotifer.memory import AgentMemoryError, DeployerMemory, GeneMemory, MemoryEntry
from rotifer.memory.audit import DEPLOYER
from rotifer.memory.clock import parse_time
from rotifer.memory.errors import ErrorCode, denied, invalid
from rotifer.memory.filters import MemoryFilter
from rotifer.memory.model import MAX_QUERY_LIMIT, Category, parse_category
from rotifer.memory.paging import newest_pages
from rotifer.memory.policy import Actor, scope_allows
from rotifer.memory.views.browse import describe_keys, next_evictions, usage_by_category
from rotifer.memory.views.untrusted import write_untrusted

#: What the audit lines of the server's writes and deletes say in ``via``.
VIA = "mcp"
#: The most entries the usage summary names as the next write's victims.
MAX_VICTIMS_SHOWN = 50


@dataclass(frozen=True)
class WritePolicy:
    """What the deployer lets an LLM write (``rotifer mcp`` flags; docs/mcp.md).

    * default: CACHE only, as ``write_untrusted`` writes it (first cleared for
      room; it follows the agent's data policy);
    * ``retention_days``: also PATTERN and CONTEXT, and every write (CACHE too)
      expires that many days after its last update;
    * ``allow_preference``: also PREFERENCE.  Without ``retention_days`` that is
      trusting the client: every category is written as ``write_memory`` does,
      with no expiry.
    """

    retention_days: int | None = None
    allow_preference: bool = False

    def categories(self) -> list[Category]:
        allowed = [Category.CACHE]
        if self.retention_days is not None or self.allow_preference:
            allowed += [Category.PATTERN, Category.CONTEXT]
        if self.allow_preference:
            allowed.append(Category.PREFERENCE)
        return allowed

    def refusal(self, category: Category) -> str | None:
        """Why this server takes no write of ``category`` (``None``: it does)."""
        if category in self.categories():
            return None
        if category is Category.PREFERENCE:
            return ("this MCP server writes no PREFERENCE entries: what an LLM writes is "
                    "untrusted input (the deployer allows it with --allow-preference)")
        return (f"this MCP server writes {category.value} entries only with a retention limit "
                "(the deployer sets one with --retention-days), else only CACHE")


def encode_value(value: bytes) -> tuple[str, str]:
    """``(text, "text")`` for UTF-8, else ``(base64, "base64")``."""
    try:
        return value.decode("utf-8"), "text"
    except UnicodeDecodeError:
        return base64.b64encode(value).decode("ascii"), "base64"


def decode_value(value: object, encoding: object) -> bytes:
    """A tool's ``value`` in its ``encoding`` as bytes (MEMORY_INVALID_INPUT if it is not)."""
    if not isinstance(value, str):
        raise invalid("value must be a string (text, or base64 with encoding 'base64')")
    if encoding in (None, "text"):
        return _utf8(value)
    if encoding == "base64":
        try:
            return base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise invalid("value is not valid base64 (encoding 'base64')") from None
    raise invalid(f"encoding must be 'text' or 'base64', not {encoding!r}")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text
        raise invalid("value is not valid Unicode text (lone surrogate)") from None


def entry_json(entry: MemoryEntry, *, with_value: bool = True) -> dict[str, Any]:
    """An entry as a tool returns it: the seed's fields (``MemoryEntry.to_json``
    without the value, key for key and in its order: tests/mcp/test_results.py
    holds the two together), the value as text or base64, and its bytes.

    Built here in one dict rather than by ``to_json`` and amending its dict: a
    tool call builds one per entry it answers."""
    access = entry.access_policy
    retention = entry.retention_policy
    out: dict[str, Any] = {
        "entryId": entry.entry_id,
        "category": entry.category.value,
        "key": entry.key,
        "createdBy": entry.created_by,
        "lastAccessedBy": entry.last_accessed_by,
        "createdAt": entry.created_at,
        "updatedAt": entry.updated_at,
        "accessPolicy": {"readScope": access.read_scope.value,
                         "writeScope": access.write_scope.value,
                         "sharePolicy": access.share_policy.value},
        "retentionPolicy": None if retention is None else retention.to_json(),
    }
    if with_value:
        out["value"], out["encoding"] = encode_value(entry.value)
    out["bytes"] = entry.size
    return out


def _filter(args: dict[str, Any]) -> dict[str, Any]:
    wanted = {name: args[name] for name in MemoryFilter.FIELDS if args.get(name) is not None}
    MemoryFilter.parse(wanted)  # every check and message of query_memory
    return wanted


class Acting:
    """The calls one server makes; :class:`GeneActing` or :class:`DeployerActing`."""

    agent: str
    actor: str
    writes: bool

    def read(self, key: str, category: str | None) -> MemoryEntry | None:
        raise NotImplementedError

    def write(self, key: str, value: bytes, category: str,
              access_policy: object) -> MemoryEntry:
        raise NotImplementedError

    def search(self, args: dict[str, Any]) -> list[MemoryEntry]:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def usage(self, next_write_bytes: int) -> dict[str, Any]:
        raise NotImplementedError

    def readable(self) -> Iterator[MemoryEntry]:
        """Every entry this caller may read, newest first (the resources)."""
        raise NotImplementedError


class GeneActing(Acting):
    """Acting as one of the agent's genes: its scopes decide what it may read and change."""

    writes = True

    def __init__(self, memory: GeneMemory, policy: WritePolicy) -> None:
        if memory.actor is None:
            raise denied("the gene has no v2 id, so it cannot use memory")
        self.memory = memory
        self.policy = policy
        self.agent = memory.agent_id
        self.actor = memory.actor.gene_id
        self._as = Actor(memory.actor.gene_id, memory.actor.domain)

    def read(self, key: str, category: str | None) -> MemoryEntry | None:
        return self.memory.read_memory(key, category)

    def write(self, key: str, value: bytes, category: str,
              access_policy: object) -> MemoryEntry:
        cat = parse_category(category)
        why = self.policy.refusal(cat)
        if why is not None:  # audited like any refused access
            raise self.memory.store.refuse_outside(self.agent, "write", why, key,
                                                   actor=self.actor, via=VIA)
        if self.policy.retention_days is None and self.policy.allow_preference:
            return self.memory.write_memory(key, value, cat, access_policy)  # type: ignore[arg-type]
        return write_untrusted(self.memory, key, value, category=cat,
                               max_retention_days=self.policy.retention_days,
                               access_policy=access_policy)  # type: ignore[arg-type]

    def search(self, args: dict[str, Any]) -> list[MemoryEntry]:
        return self.memory.query_memory(_filter(args))

    def delete(self, key: str) -> None:
        self.memory.delete_memory(key)

    def usage(self, next_write_bytes: int) -> dict[str, Any]:
        return usage_summary(self.memory.store, self.agent, next_write_bytes, self._may_read)

    def _may_read(self, keys: list[str]) -> set[str]:
        infos = describe_keys(self.memory.store, self.agent, keys)
        return {i.key for i in infos
                if scope_allows(i.access.read_scope, self._as, i.created_by, i.creator_domain)}

    def readable(self) -> Iterator[MemoryEntry]:
        return newest_pages(self.memory.query_memory)


class DeployerActing(Acting):
    """The agent's owner: reads, lists and deletes anything; writes nothing."""

    writes = False
    actor = DEPLOYER

    def __init__(self, memory: DeployerMemory) -> None:
        self.memory = memory
        self.agent = memory.agent_id

    def read(self, key: str, category: str | None) -> MemoryEntry | None:
        entry = self.memory.read(key)
        if entry is not None and category is not None and entry.category != \
                parse_category(category):
            return None  # as read_memory with a category: another category is no match
        return entry

    def write(self, key: str, value: bytes, category: str,
              access_policy: object) -> MemoryEntry:
        raise self.memory.store.refuse_outside(
            self.agent, "write", "the deployer writes no entries (an entry's createdBy is a "
            "gene's v2 id): serve the agent --as one of its genes to write", key, actor=DEPLOYER)

    def search(self, args: dict[str, Any]) -> list[MemoryEntry]:
        wanted = MemoryFilter.parse(_filter(args))
        found = []
        for entry in self.memory.list(wanted.category, key_prefix=wanted.key_prefix):
            at = parse_time(entry.updated_at)
            if (wanted.since_us is not None and at < wanted.since_us) or \
                    (wanted.until_us is not None and at >= wanted.until_us):
                continue
            found.append(entry)
            if len(found) == wanted.limit:
                break
        return found

    def delete(self, key: str) -> None:
        self.memory.delete_key(key)

    def usage(self, next_write_bytes: int) -> dict[str, Any]:
        return usage_summary(self.memory.store, self.agent, next_write_bytes, set)

    def readable(self) -> Iterator[MemoryEntry]:
        yield from self.memory.list()


def usage_summary(store: Any, agent: str, next_write_bytes: int,
                  may_read: Any) -> dict[str, Any]:
    """Bytes of the quota by category, and what a new write of ``next_write_bytes``
    would evict: the cleanup order's first entries (``next_evictions``, the
    console's marks), named only if the caller may read them."""
    if not (isinstance(next_write_bytes, int) and not isinstance(next_write_bytes, bool)
            and next_write_bytes >= 0):
        raise invalid("nextWriteBytes must be a whole number of bytes, 0 or more")
    store.purge_expired(agent)
    record = store.agent_record(agent)
    by = usage_by_category(store, agent)
    used, quota = record.used_bytes, record.quota_bytes
    need = used + next_write_bytes - quota
    victims: list[Any] = []
    freed = 0
    if need > 0:
        limit = 64
        while True:
            walk = next_evictions(store, agent, limit)
            victims, freed = [], 0
            for brief in walk:
                victims.append(brief)
                freed += brief.size
                if freed >= need:
                    break
            if freed >= need or len(walk) < limit or limit >= 1 << 20:
                break
            limit *= 8
    shown = may_read([b.key for b in victims[:MAX_VICTIMS_SHOWN]]) if victims else set()
    named = [{"key": b.key, "category": b.category.value, "bytes": b.size}
             for b in victims[:MAX_VICTIMS_SHOWN] if b.key in shown]
    hidden = [b for b in victims if b.key not in shown]
    fits = need <= 0 or freed >= need
    return {
        "quotaBytes": quota,
        "usedBytes": used,
        "freeBytes": max(0, quota - used),
        "byCategory": {c.value: {"entries": u.count, "bytes": u.bytes} for c, u in by.items()},
        "nextWrite": {
            "bytes": next_write_bytes,
            "fits": fits,
            "evicts": named if fits else [],
            "evictsOtherEntries": len(hidden) if fits else 0,
            "evictsOtherBytes": sum(b.size for b in hidden) if fits else 0,
            "error": None if fits else ErrorCode.QUOTA_EXCEEDED.value,
        },
        "evictionOrder": "CACHE, then PATTERN, then CONTEXT, each least recently updated "
                         "first; PREFERENCE is never evicted",
    }


def error_json(error: AgentMemoryError) -> dict[str, str]:
    return {"code": error.code.value, "message": error.message}


__all__ = ["MAX_QUERY_LIMIT", "VIA", "Acting", "DeployerActing", "GeneActing", "WritePolicy",
           "decode_value", "encode_value", "entry_json", "error_json", "usage_summary"]
