"""The one wasmtime Engine of the process, and the clock that interrupts it.

One engine is shared by every run because compiled modules belong to the
engine that compiled (or deserialized) them: sharing it is what lets a
module be compiled once and instantiated by many runs, in parallel too.

Deadlines use epoch interruption: a daemon thread bumps the engine's epoch
every ``TICK_S`` while at least one run is active, and each run's store traps
once the epoch has moved ``ceil(deadline / TICK_S)`` ticks past the value it
had when the run started.  The thread sleeps when nothing runs.
"""

from __future__ import annotations

import math
import platform
import threading
import time
from importlib import metadata
from typing import Final

import wasmtime

TICK_S: Final = 0.01

#: Everything in the engine's configuration that changes generated code; part
#: of the module cache's key together with the wasmtime version and the CPU.
CONFIG_TAG: Final = "fuel+epoch/v1"

_lock = threading.Lock()
_engine: wasmtime.Engine | None = None


def wasmtime_version() -> str:
    try:
        return metadata.version("wasmtime")
    except metadata.PackageNotFoundError:  # pragma: no cover - vendored installs
        return "unknown"


def engine_fingerprint() -> str:
    """What a serialized module must have been compiled under to be reused."""
    return f"wasmtime {wasmtime_version()}; {CONFIG_TAG}; {platform.machine()}"


def get_engine() -> wasmtime.Engine:
    global _engine
    with _lock:
        if _engine is None:
            config = wasmtime.Config()
            config.consume_fuel = True
            config.epoch_interruption = True
            _engine = wasmtime.Engine(config)
        return _engine


def ticks_for(seconds: float) -> int:
    """Epoch ticks that cover ``seconds`` (at least one)."""
    return max(1, math.ceil(seconds / TICK_S))


class EpochTicker:
    """Moves an engine's epoch forward while any run holds it."""

    def __init__(self, engine: wasmtime.Engine) -> None:
        self.engine = engine
        self._cond = threading.Condition()
        self._active = 0
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        with self._cond:
            self._active += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="rotifer-wasm-epoch", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            self._active = max(0, self._active - 1)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._active == 0:
                    self._cond.wait()
            # Sleep outside the lock: a notify must never shorten a tick.
            time.sleep(TICK_S)
            self.engine.increment_epoch()


_ticker: EpochTicker | None = None


def get_ticker() -> EpochTicker:
    global _ticker
    engine = get_engine()
    with _lock:
        if _ticker is None:
            _ticker = EpochTicker(engine)
        return _ticker
