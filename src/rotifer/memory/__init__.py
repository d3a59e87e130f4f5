"""Agent Memory: what an agent's genes keep between runs.

The memory belongs to the agent, not to any gene.  Genes reach it through a
:class:`GeneMemory` view (their ``ctx.memory``) with the seed's four calls;
the deployer through :class:`DeployerMemory`.  Storage backends (SQLite,
PostgreSQL) sit behind :mod:`rotifer.memory.backend`; the rules above it are
the same for both.
"""

from .audit import AuditLog, telemetry_enabled
from .clock import Clock, ManualClock, SystemClock, format_time, parse_time
from .errors import AgentMemoryError, ErrorCode
from .errors import MemoryError as MemoryError  # noqa: A004 - the public name (CONTRACT.md)
from .filters import MemoryFilter
from .model import (
    UNSET,
    AccessPolicy,
    Category,
    DataPolicy,
    MemoryEntry,
    RetentionPolicy,
    Scope,
    SharePolicy,
    entry_id,
)
from .quota import parse_size
from .store import (
    DEFAULT_QUOTA_BYTES,
    DeniedMemory,
    DeployerMemory,
    GeneMemory,
    GeneMemoryAccess,
    MemoryStore,
)
from .untrusted import write_untrusted

__all__ = [
    "DEFAULT_QUOTA_BYTES",
    "UNSET",
    "AccessPolicy",
    "AgentMemoryError",
    "AuditLog",
    "Category",
    "Clock",
    "DataPolicy",
    "DeniedMemory",
    "DeployerMemory",
    "ErrorCode",
    "GeneMemory",
    "GeneMemoryAccess",
    "ManualClock",
    "MemoryEntry",
    "MemoryError",
    "MemoryFilter",
    "MemoryStore",
    "RetentionPolicy",
    "Scope",
    "SharePolicy",
    "SystemClock",
    "entry_id",
    "format_time",
    "parse_size",
    "parse_time",
    "telemetry_enabled",
    "write_untrusted",
]
