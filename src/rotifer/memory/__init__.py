"""Agent Memory: what an agent's genes keep between runs.

The memory belongs to the agent, not to any gene.  Genes reach it through a
:class:`GeneMemory` view (their ``ctx.memory``) with the seed's four calls;
the deployer through :class:`DeployerMemory`.  Storage backends (SQLite,
PostgreSQL) sit behind :mod:`rotifer.memory.storage.backend`; the rules above
it are the same for both.

The package is built in rooms, and a module imports only from its own room
and the rooms below it (``tests/memory/test_rooms.py`` checks every import,
those under ``TYPE_CHECKING`` too, and that there is no circle)::

    transfer/    export, import, move; this package's public names
    store        MemoryStore: opening, the agents' lives, the views handed out
    views/       the gene's view and the deployer's, scan, untrusted
    engine/      Engine: the one way a change is made; changes: its lines
    audit/       the audit log: writing, the index, reading, verifying
    storage/     the backend interface, the shared SQL, sqlite/, postgres/
    (vocabulary) model, errors, clock, filters, policy, quota, paging,
                 context, signals, private; audit/actions (the action names)
"""

from typing import TYPE_CHECKING

from .lazy import loader

if TYPE_CHECKING:
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
    from .quota import DEFAULT_QUOTA_BYTES, parse_size
    from .store import (
        DeniedMemory,
        DeployerMemory,
        GeneMemory,
        GeneMemoryAccess,
        MemoryStore,
    )
    from .views.untrusted import write_untrusted


#: Where each public name lives.  Speed: the names load on first use (PEP 562),
#: so that importing a light module of the package (``rotifer.memory.signals``,
#: ``.errors``, ``.clock``) does not import the store, the audit log and the
#: backends with it: a good part of a command's start-up (bench/startup.py).
_HOMES = {
    "AccessPolicy": ".model",
    "AgentMemoryError": ".errors",
    "AuditLog": ".audit",
    "Category": ".model",
    "Clock": ".clock",
    "DEFAULT_QUOTA_BYTES": ".quota",
    "DataPolicy": ".model",
    "DeniedMemory": ".store",
    "DeployerMemory": ".store",
    "ErrorCode": ".errors",
    "GeneMemory": ".store",
    "GeneMemoryAccess": ".store",
    "ManualClock": ".clock",
    "MemoryEntry": ".model",
    "MemoryError": ".errors",
    "MemoryFilter": ".filters",
    "MemoryStore": ".store",
    "RetentionPolicy": ".model",
    "Scope": ".model",
    "SharePolicy": ".model",
    "SystemClock": ".clock",
    "UNSET": ".model",
    "entry_id": ".model",
    "format_time": ".clock",
    "parse_size": ".quota",
    "parse_time": ".clock",
    "telemetry_enabled": ".audit",
    "write_untrusted": ".views.untrusted",
}


__getattr__ = loader(__name__, _HOMES, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


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
