"""Small helpers shared by the memory tests (genes ids, audit reading, codes)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, ManualClock, MemoryStore
from rotifer.memory.model import EVICTION_ORDER
from tests.audit_reading import audit_lines


def gene_id(name: str) -> str:
    return "v2:" + hashlib.sha256(name.encode()).hexdigest()


def code_of(fn: Callable[[], object]) -> ErrorCode:
    """The code of the AgentMemoryError ``fn()`` raises (it must raise one)."""
    with pytest.raises(AgentMemoryError) as info:
        fn()
    return info.value.code


def actions(rotifer_dir: Path) -> list[tuple[str, str | None]]:
    return [(line["action"], line["key"]) for line in audit_lines(rotifer_dir)]


RETAIN_1_DAY = {"maxRetentionDays": 1, "autoDeleteOnTermination": False,
                "anonymizationSupported": False}


@dataclass
class Live:
    """An entry as a replay of the audit log sees it."""

    category: str
    size: int
    order: tuple[int, int]  # (updated_us, write order): the cleanup order


def cleanup_victims(live: dict[str, Live], key: str, need: int) -> tuple[list[str], int]:
    """What the rules evict to free ``need`` bytes for a write of ``key``: CACHE,
    PATTERN, CONTEXT, each oldest first, never PREFERENCE or ``key`` itself.
    Returns (the victims, the bytes all evictable entries would free)."""
    candidates = [k for cat in EVICTION_ORDER
                  for k in sorted((k for k, e in live.items()
                                   if e.category == cat.value and k != key),
                                  key=lambda k: live[k].order)]
    victims: list[str] = []
    for k in candidates:
        if need - sum(live[v].size for v in victims) <= 0:
            break
        victims.append(k)
    return victims, sum(live[k].size for k in candidates)


def crowded(factory: Callable[..., MemoryStore], root: Path, others: int = 300
            ) -> tuple[MemoryStore, Path]:
    """Agent ``a`` with 12 changes among ``others`` changes of agent ``b``."""
    clock = ManualClock("2026-03-01T12:00:00Z")
    store = factory(root / ".rotifer", clock=clock)
    store.create_agent("a")
    store.create_agent("b")
    a = store.for_gene("a", gene_id("ga"), "d")
    b = store.for_gene("b", gene_id("gb"), "d")
    for i in range(others):
        clock.advance(seconds=1)
        b.write_memory(f"d/k{i % 40}", b"w" * (10 + i % 50), "CONTEXT")
        if i % 25 == 0:
            a.write_memory(f"d/k{i % 3}", b"v" * (20 + i % 7), "PATTERN")
    return store, root / ".rotifer" / "audit.jsonl"


def rows_of(log: Path, agent: str) -> list[int]:
    """The line numbers (0-based) of ``agent``'s lines."""
    return [n for n, raw in enumerate(log.read_bytes().splitlines())
            if json.loads(raw)["agent"] == agent]
