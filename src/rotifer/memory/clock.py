"""Clocks, injected into the store so tests can move time without patching globals.

Time is kept as integer microseconds since the Unix epoch (UTC): exact to
compare, cheap to index, and what RFC 3339 strings with six fractional digits
round-trip to.
"""

from __future__ import annotations

import functools
import threading
import time
from datetime import UTC, datetime
from typing import Protocol

MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND


class Clock(Protocol):
    """Anything that tells the current time in microseconds since the epoch."""

    def now_us(self) -> int: ...


class SystemClock:
    """The real wall clock."""

    def now_us(self) -> int:
        return time.time_ns() // 1000


class ManualClock:
    """A clock that only moves when told to; for tests and simulations."""

    def __init__(self, start: str | int = "2026-01-01T00:00:00Z") -> None:
        self._lock = threading.Lock()
        self._now = start if isinstance(start, int) else parse_time(start)

    def now_us(self) -> int:
        with self._lock:
            return self._now

    def advance(self, *, days: float = 0, hours: float = 0, seconds: float = 0,
                micros: int = 0) -> None:
        delta = round((days * 86_400 + hours * 3600 + seconds) * MICROS_PER_SECOND) + micros
        with self._lock:
            self._now += delta

    def set(self, when: str | int) -> None:
        with self._lock:
            self._now = when if isinstance(when, int) else parse_time(when)


@functools.lru_cache(maxsize=8192)
def format_time(us: int) -> str:
    """RFC 3339, UTC, ``Z`` suffix, microseconds kept."""
    seconds, micros = divmod(us, MICROS_PER_SECOND)
    return f"{_second(seconds)}.{micros:06d}Z"


@functools.lru_cache(maxsize=4096)
def _second(seconds: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a whole second (cached: entries written close
    together share their second, and strftime is the slow part of formatting)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def parse_time(text: str) -> int:
    """Parse an RFC 3339 timestamp (any offset) to epoch microseconds.

    Raises ``ValueError`` for anything that is not a full date-time with an
    offset; callers turn that into MEMORY_INVALID_INPUT.
    """
    if not isinstance(text, str) or len(text) < 20 or text[10] not in "Tt ":
        raise ValueError(f"not an RFC 3339 date-time: {text!r}")
    normalized = text[:-1] + "+00:00" if text[-1] in "Zz" else text
    dt = datetime.fromisoformat(normalized)
    if dt.tzinfo is None:
        raise ValueError(f"RFC 3339 date-time needs an offset: {text!r}")
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * MICROS_PER_SECOND + delta.microseconds
