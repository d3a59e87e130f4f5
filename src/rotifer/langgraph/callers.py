"""Who the store acts as: one gene (its v2 id and domain) or the deployer.

Both answer the same four questions -- read a key, write a key, scan a key
prefix newest first until a page is full, delete a key -- through the memory's public calls only,
so every rule (scopes, data policy, quota and cleanup, retention, the audit
log) applies exactly as it does to a gene's ``ctx.memory`` or to ``rotifer
agent memory``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from rotifer.memory import AgentMemoryError, Category, DeployerMemory, GeneMemory, MemoryEntry
from rotifer.memory.audit import DEPLOYER
from rotifer.memory.context import audit_context
from rotifer.memory.errors import ErrorCode
from rotifer.memory.views.folders import deployer_folders, gene_folders
from rotifer.memory.views.many import Delete, Outcome, Write, change_many, read_many

from .policy import NamespacePolicy

T = TypeVar("T")


class Caller(Protocol):
    """The memory calls the store makes, as one caller."""

    def read(self, key: str) -> MemoryEntry | None: ...

    def write(self, key: str, value: bytes, policy: NamespacePolicy) -> MemoryEntry: ...

    def write_beside(self, key: str, value: bytes, item: MemoryEntry) -> None:
        """Write a CACHE entry with ``item``'s access and retention policies."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key``; a key that is not there is nothing to do."""
        ...

    def pick(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None],
             count: int | None) -> list[T]:
        """Up to ``count`` (``None``: all) non-``None`` answers of ``pick`` over the
        entries under ``key_prefix`` the caller may read, newest first, read from
        one snapshot only until ``count`` are kept (no query limit, no 4 MiB
        bound: the answer is the page)."""
        ...

    def read_many(self, keys: list[str]) -> list[Outcome]:
        """``read`` of each key: its entry, ``None``, or its own error."""
        ...

    def folders(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None]
                ) -> dict[str, T]:
        """Each folder (a key up to its last ``/``) under ``key_prefix`` holding an
        entry the caller may read that ``pick`` answers for, with one answer:
        one entry read per folder, not every entry (:mod:`rotifer.memory.views.folders`)."""
        ...

    def change_many(self, ops: list[Write | Delete],
                    contexts: list[dict[str, str] | None]) -> list[Outcome]:
        """Each op as ``write`` / ``delete`` makes it (a delete of nothing is
        MEMORY_NOT_FOUND here), each under its context, in as few memory
        transactions as the rules allow: its outcome, or its own error."""
        ...


def delete_if_there(delete: Callable[[str], object], key: str) -> None:
    """LangGraph's delete of an item that is not there does nothing (rotifer's
    answers MEMORY_NOT_FOUND, which a missing key cost nothing to learn)."""
    try:
        delete(key)
    except AgentMemoryError as exc:
        if exc.code is not ErrorCode.NOT_FOUND:
            raise


class GeneCaller:
    """A gene's ``ctx.memory``: its scopes decide what it may read and change."""

    def __init__(self, memory: GeneMemory) -> None:
        self.memory = memory

    def read(self, key: str) -> MemoryEntry | None:
        return self.memory.read_memory(key)

    def write(self, key: str, value: bytes, policy: NamespacePolicy) -> MemoryEntry:
        return self.memory.write_memory(key, value, policy.category, policy.access,
                                        policy.retention)

    def write_beside(self, key: str, value: bytes, item: MemoryEntry) -> None:
        self.memory.write_memory(key, value, Category.CACHE, item.access_policy,
                                 item.retention_policy)

    def delete(self, key: str) -> None:
        delete_if_there(self.memory.delete_memory, key)

    def pick(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None],
             count: int | None) -> list[T]:
        return self.memory.pick_memory(key_prefix, pick, count)

    def read_many(self, keys: list[str]) -> list[Outcome]:
        return read_many(self.memory, keys)

    def folders(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None]
                ) -> dict[str, T]:
        return gene_folders(self.memory, key_prefix, pick)

    def change_many(self, ops: list[Write | Delete],
                    contexts: list[dict[str, str] | None]) -> list[Outcome]:
        return change_many(self.memory, ops, contexts)


class DeployerCaller:
    """The agent's owner: reads and deletes whatever the policies say (as
    ``rotifer agent memory``), and writes nothing -- an entry's ``createdBy`` is
    always a gene's v2 id, so a put is refused with MEMORY_ACCESS_DENIED (and
    audited as a refused access)."""

    def __init__(self, memory: DeployerMemory) -> None:
        self.memory = memory

    def read(self, key: str) -> MemoryEntry | None:
        return self.memory.read(key)

    def write_beside(self, key: str, value: bytes, item: MemoryEntry) -> None:
        self.write(key, value, NamespacePolicy())

    def write(self, key: str, value: bytes, policy: NamespacePolicy) -> MemoryEntry:
        raise self.memory.store.refuse_outside(
            self.memory.agent_id, "write",
            "the deployer writes no entries (an entry's createdBy is a gene's v2 id): "
            "open the store for a gene to put", key, actor=DEPLOYER)

    def delete(self, key: str) -> None:
        delete_if_there(self.memory.delete_key, key)

    def pick(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None],
             count: int | None) -> list[T]:
        return self.memory.pick(key_prefix, pick, count)

    def folders(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None]
                ) -> dict[str, T]:
        return deployer_folders(self.memory, key_prefix, pick)

    def read_many(self, keys: list[str]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for key in keys:
            try:
                outcomes.append(self.read(key))
            except AgentMemoryError as exc:
                outcomes.append(exc)
        return outcomes

    def change_many(self, ops: list[Write | Delete],
                    contexts: list[dict[str, str] | None]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for op, context in zip(ops, contexts, strict=True):
            try:
                with audit_context(context):
                    if isinstance(op, Write):  # refused: the deployer writes nothing
                        self.write(op.key, op.value, NamespacePolicy())
                    else:
                        self.memory.delete_key(op.key)
                outcomes.append(None)
            except AgentMemoryError as exc:
                outcomes.append(exc)
        return outcomes
