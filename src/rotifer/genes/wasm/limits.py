"""The budget of one WASM gene run.

A run has two hard limits that wasmtime enforces inside the guest -- fuel
(roughly one unit per instruction) and a wall-clock deadline (epoch
interruption) -- and soft limits that the host functions enforce: once the
deadline has passed, the fuel left is too little, or the run has made
``max_host_calls`` calls, every host call returns -4 and does nothing.  The
hard deadline is the soft one plus ``grace_s``, so a gene that checks for -4
still has a moment to return what it has; a gene that ignores it is stopped
anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: About two seconds of a tight loop on a current machine.
DEFAULT_FUEL: Final = 2_000_000_000
DEFAULT_DEADLINE_S: Final = 10.0
MiB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """All the numbers a run is held to; the defaults are the CLI's."""

    deadline_s: float = DEFAULT_DEADLINE_S
    fuel: int = DEFAULT_FUEL
    #: Time between the soft deadline (host calls return -4) and the trap.
    grace_s: float = 0.1
    #: Host calls per run (memory calls and log together).
    max_host_calls: int = 100_000
    #: Fuel each host call costs on top of one unit per request byte, so
    #: a gene cannot do unbounded work through the host for free.
    host_call_fuel: int = 10_000
    #: Longest request a memory call accepts; a write of a 1 MiB value is
    #: about 1.4 MiB of JSON, so this leaves room without letting a gene
    #: make the host parse hundreds of megabytes.
    max_request_bytes: int = 8 * MiB
    #: Longest NUL-terminated output express may return.
    max_output_bytes: int = 16 * MiB
    #: Cap on the gene's linear memory (memory.grow fails beyond it).
    max_memory_bytes: int = 256 * MiB
    #: Per message and per run caps on what ``log`` passes on.
    max_log_message_bytes: int = 16 * 1024
    max_log_bytes: int = 1 * MiB

    def __post_init__(self) -> None:
        if not self.deadline_s > 0:
            raise ValueError("deadline_s must be positive")
        if self.fuel <= 0:
            raise ValueError("fuel must be positive")
