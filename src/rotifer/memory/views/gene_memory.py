"""A gene's view of its agent's memory: the seed's four calls (``ctx.memory``).

Each call acts under the gene's v2 id and domain and checks the entry's access
policy before every read, write and delete; changes run through
:meth:`Engine.change <rotifer.memory.engine.core.Engine.change>`, which
times, numbers and audits them.  The calls are written in two rooms beside
each other: :mod:`.gene_reads` (read, query, pick) and :mod:`.gene_writes`
(write, delete), each full path with its lean twin (:mod:`.gene_view`).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..filters import MemoryFilter
from ..model import UNSET, AccessPolicy, Category, MemoryEntry, RetentionPolicy, Unset
from .gene_reads import GeneReads
from .gene_writes import GeneWrites

__all__ = ["GeneMemory", "GeneMemoryAccess"]


class GeneMemoryAccess(Protocol):
    """The four calls a gene gets as ``ctx.memory``."""

    def read_memory(self, key: str, category: Category | str | None = None) -> MemoryEntry | None:
        ...

    def write_memory(
        self,
        key: str,
        value: bytes,
        category: Category | str,
        access_policy: AccessPolicy | dict[str, Any] | None = None,
        retention_policy: RetentionPolicy | dict[str, Any] | Unset | None = UNSET,
    ) -> MemoryEntry: ...

    def query_memory(self, filter: MemoryFilter | dict[str, Any] | None = None) -> list[MemoryEntry]:
        ...

    def delete_memory(self, key: str) -> None: ...


class GeneMemory(GeneReads, GeneWrites):
    """One gene's view of its agent's memory: the seed's four calls.

    A ``gene_id`` that is not ``v2:`` + 64 lowercase hex digits is no v2 id:
    the view refuses every call exactly as for ``gene_id=None`` (audited with
    no actor), so a malformed string never becomes an entry's ``createdBy``."""
