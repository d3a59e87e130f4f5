"""Running one WASM gene: instantiate it in a fresh store, call express.

Every run gets its own ``Store`` (fuel, epoch deadline, memory limit, host
functions bound to the run's memory view) on the process-wide engine, so
runs are independent and may execute in parallel threads; wasmtime releases
the GIL while guest code runs.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import wasmtime

from rotifer.genes.errors import CompileFailed, GeneFailed, GeneRejected
from rotifer.memory import GeneMemoryAccess

from .abi import (
    EXPORT_ALLOC,
    EXPORT_EXPRESS,
    EXPORT_MEMORY,
    MEANING_OF_RESULT,
    AbiViolation,
    check_module,
)
from .cache import load_module
from .compile import code_to_wasm
from .engine import get_engine, get_ticker, ticks_for
from .guest import GuestMemory, as_u32
from .host import HostFunctions, LogSink
from .limits import DEFAULT_FUEL, Limits


def _trap_text(exc: Exception) -> str:
    """The one line of a wasmtime error that says what happened."""
    lines = [re.sub(r"^\d+: ", "", line.strip()) for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("wasm trap:"):
            return line
    return lines[-1] if lines else type(exc).__name__


class GeneInstance:
    """One instantiated gene with its own store and budget.

    Use as a context manager: the epoch ticker runs while it is open.  The
    budget (deadline, fuel, host calls) starts when it is created and covers
    instantiation (a start function runs then) and every call.
    """

    def __init__(self, module: wasmtime.Module, memory: GeneMemoryAccess, limits: Limits,
                 *, name: str = "gene", log_sink: LogSink | None = None) -> None:
        self.limits = limits
        self.name = name
        engine = get_engine()
        self.store = wasmtime.Store(engine)
        self.store.set_fuel(limits.fuel)
        self.store.set_limits(memory_size=limits.max_memory_bytes, instances=1, tables=4,
                              memories=1)
        self._ticker = get_ticker()
        self._ticker.acquire()
        self._closed = False
        try:
            self.store.set_epoch_deadline(ticks_for(limits.deadline_s + limits.grace_s))
            self.host = HostFunctions(memory, limits, self.store,
                                      time.monotonic() + limits.deadline_s, name=name,
                                      log_sink=log_sink)
            linker = wasmtime.Linker(engine)
            self.host.define(linker)
            self.instance = self._guard(lambda: linker.instantiate(self.store, module),
                                        "could not be instantiated")
            exports = self.instance.exports(self.store)
            exported = exports.get(EXPORT_MEMORY)
            express = exports.get(EXPORT_EXPRESS)
            if not isinstance(exported, wasmtime.Memory) or not isinstance(express, wasmtime.Func):
                raise GeneFailed(f"{name} does not export memory and express")
            self.guest = GuestMemory(exported, self.store)
            self._express = express
            alloc = exports.get(EXPORT_ALLOC)
            self._alloc = alloc if isinstance(alloc, wasmtime.Func) else None
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> GeneInstance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._ticker.release()

    def _guard(self, call: Any, what: str) -> Any:
        """Run guest code; every way it can fail becomes GeneFailed."""
        try:
            return call()
        except wasmtime.Trap as exc:
            if exc.trap_code is wasmtime.TrapCode.OUT_OF_FUEL:
                raise GeneFailed(f"{self.name} ran out of fuel ({self.limits.fuel} units)"
                                 ) from None
            if exc.trap_code is wasmtime.TrapCode.INTERRUPT:
                raise GeneFailed(
                    f"{self.name} ran past its deadline of {self.limits.deadline_s:g} s"
                ) from None
            raise GeneFailed(f"{self.name} trapped: {_trap_text(exc)}") from None
        except wasmtime.WasmtimeError as exc:
            raise GeneFailed(f"{self.name} {what}: {_trap_text(exc)}") from None

    def call(self, export: str, *args: int) -> Any:
        """Call any export (tests use this to drive the host functions directly)."""
        func = self.instance.exports(self.store).get(export)
        if not isinstance(func, wasmtime.Func):
            raise GeneFailed(f"{self.name} has no exported function {export!r}")
        return self._guard(lambda: func(self.store, *args), f"failed in {export}")

    def express(self, input: Any) -> Any:
        """The ABI's express call: input JSON in, parsed output JSON out."""
        try:
            data = json.dumps(input, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise GeneFailed(f"the input for {self.name} is not JSON: {exc}") from None
        ptr = 0
        if self._alloc is not None:
            alloc = self._alloc
            ptr = as_u32(self._guard(lambda: alloc(self.store, len(data)), "failed in alloc"))
        if not self.guest.fits(ptr, len(data)) and (
            ptr != 0 or not self.guest.grow_to(len(data))
        ):
            raise GeneFailed(
                f"the input ({len(data)} bytes at {ptr}) does not fit {self.name}'s memory")
        self.guest.write(ptr, data)
        express = self._express
        result = self._guard(lambda: express(self.store, ptr, len(data)), "failed in express")
        if not isinstance(result, int):  # pragma: no cover - the ABI check fixes the type
            raise GeneFailed(f"{self.name}'s express returned {result!r}")
        if result < 0:
            meaning = MEANING_OF_RESULT.get(result)
            raise GeneFailed(f"{self.name} returned error code {result}"
                             + (f" ({meaning})" if meaning else ""))
        return self._output(result)

    def _output(self, ptr: int) -> Any:
        raw = self.guest.read_c_string(ptr, self.limits.max_output_bytes)
        if raw is None:
            raise GeneFailed(
                f"{self.name}'s output at {ptr} is not NUL-terminated within its memory "
                f"(or is longer than {self.limits.max_output_bytes} bytes)")
        try:
            output = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise GeneFailed(f"{self.name}'s output is not UTF-8 JSON: {exc}") from None
        rejection = rejection_of(output)
        if rejection is not None:
            raise rejection
        return output


def rejection_of(output: Any) -> GeneRejected | None:
    """A lone ``{"__rotifer_error": {...}}`` output means the gene rejected its input."""
    if not (isinstance(output, dict) and list(output) == ["__rotifer_error"]):
        return None
    body = output["__rotifer_error"]
    code = body.get("code") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    return GeneRejected(code if isinstance(code, str) and code else "GENE_REJECTED",
                        message if isinstance(message, str) else "")


def prepare_code(code: bytes, file_name: str, cache_dir: Path | None = None) -> wasmtime.Module:
    """Load (from cache, or compile) and ABI-check a module from a code file's
    bytes (``file_name`` says whether it is WAT); GeneFailed if it is bad."""
    try:
        wasm = code_to_wasm(code, file_name)
    except CompileFailed as exc:
        raise GeneFailed(exc.message) from None
    try:
        module = load_module(wasm, cache_dir)
    except wasmtime.WasmtimeError as exc:
        raise GeneFailed(f"{file_name} is not a valid WebAssembly module: "
                         f"{_trap_text(exc)}") from None
    try:
        check_module(module)
    except AbiViolation as exc:
        raise GeneFailed(f"{file_name} does not follow the rotifer WASM ABI: {exc}") from None
    return module


def prepare(wasm_path: Path, cache_dir: Path | None = None) -> wasmtime.Module:
    """:func:`prepare_code` for a file on disk."""
    wasm_path = Path(wasm_path)
    try:
        code = wasm_path.read_bytes()
    except OSError as exc:
        raise GeneFailed(f"cannot read {wasm_path}: {exc.strerror or exc}") from None
    return prepare_code(code, wasm_path.name, cache_dir)


def run_wasm_code(code: bytes, file_name: str, input: Any, memory: GeneMemoryAccess, *,
                  name: str, deadline_s: float = 10.0, fuel: int | None = None,
                  cache_dir: Path | None = None) -> Any:
    """Run a gene from the bytes of its code file (``gene.wasm`` or ``gene.wat``).

    The agent runner passes ``Gene.code`` -- the bytes the gene's v2 id was
    computed from -- so the code that acts under that id is exactly the code
    that was checked, even if the file changes meanwhile.  ``name`` is used
    in messages and the gene's log lines.
    """
    limits = Limits(deadline_s=deadline_s, fuel=fuel if fuel is not None else DEFAULT_FUEL)
    module = prepare_code(code, file_name, cache_dir)
    with GeneInstance(module, memory, limits, name=name) as instance:
        return instance.express(input)


def run_wasm_gene(wasm_path: Path, input: Any, memory: GeneMemoryAccess, *,
                  deadline_s: float = 10.0, fuel: int | None = None,
                  cache_dir: Path | None = None) -> Any:
    """Run a gene that brings its own WASM (``gene.wasm`` or ``gene.wat``).

    ``memory`` is what its host calls reach: the agent's ``GeneMemory`` for
    the gene's v2 id, ``DeniedMemory`` for ``rotifer run``, the test memory
    for ``rotifer test``.  Returns the parsed output; raises GeneRejected for
    a lone ``__rotifer_error`` output and GeneFailed for everything else that
    goes wrong (bad module, trap, negative result, bad output, deadline, fuel).
    """
    path = Path(wasm_path)
    try:
        code = path.read_bytes()
    except OSError as exc:
        raise GeneFailed(f"cannot read {path}: {exc.strerror or exc}") from None
    name = path.parent.name if path.stem == "gene" and path.parent.name else path.stem
    return run_wasm_code(code, path.name, input, memory, name=name, deadline_s=deadline_s,
                         fuel=fuel, cache_dir=cache_dir)
