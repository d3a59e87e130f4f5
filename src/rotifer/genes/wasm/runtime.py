"""Running one WASM gene: instantiate it in a fresh store, call express.

Every run gets its own ``Store`` (fuel, epoch deadline, memory limit, host
functions bound to the run's memory view) on the process-wide engine, so
runs are independent and may execute in parallel threads; wasmtime releases
the GIL while guest code runs.
"""

from __future__ import annotations

import json
import re
import threading
import time
import weakref
from pathlib import Path
from typing import Any, NamedTuple

import wasmtime

from rotifer.genes.errors import CompileFailed, GeneFailed, rejection_of
from rotifer.memory import GeneMemoryAccess

from .abi import (
    EXPORT_ALLOC,
    EXPORT_EXPRESS,
    EXPORT_INITIALIZE,
    EXPORT_MEMORY,
    EXPORT_START,
    MEANING_OF_RESULT,
    AbiViolation,
    GeneShape,
    check_module,
)
from .assemblyscript import EnvFunctions
from .cache import load_module
from .compile import code_to_wasm
from .engine import get_engine, get_ticker, ticks_for
from .guest import GuestMemory, as_u32
from .host import HostFunctions, LogSink
from .imports import COMPONENT_FIX, COMPONENT_HEADER, ENV_MODULE, WASI_MODULE
from .limits import DEFAULT_FUEL, Limits
from .streams import OutputStream
from .wasi import STDERR_TAIL, Wasi


def _trap_text(exc: Exception) -> str:
    """The one line of a wasmtime error that says what happened."""
    lines = [re.sub(r"^\d+: ", "", line.strip()) for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("wasm trap:"):
            return line
    return lines[-1] if lines else type(exc).__name__


def encode_input(input: Any, name: str) -> bytes:
    """The input as compact UTF-8 JSON, as every WASM gene receives it."""
    try:
        return json.dumps(input, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise GeneFailed(f"the input for {name} is not JSON: {exc}") from None


class ModuleInfo(NamedTuple):
    """What a run needs to know of a compiled module before instantiating it."""

    shape: GeneShape
    #: The modules it imports from (``rotifer``, WASI, AssemblyScript's ``env``).
    imported: frozenset[str]


#: Per compiled module, its :class:`ModuleInfo`.  Reading a module's imports
#: and exports builds Python objects for each, so it is done once per module,
#: not once per run.
_module_info: weakref.WeakKeyDictionary[wasmtime.Module, ModuleInfo] = (
    weakref.WeakKeyDictionary())
_module_info_lock = threading.Lock()


def _info(module: wasmtime.Module) -> ModuleInfo:
    with _module_info_lock:
        found = _module_info.get(module)
    if found is None:
        names = {exp.name for exp in module.exports}
        shape: GeneShape = ("command" if EXPORT_EXPRESS not in names and EXPORT_START in names
                            else "express")
        found = ModuleInfo(shape=shape,
                           imported=frozenset(imp.module for imp in module.imports))
        with _module_info_lock:
            _module_info[module] = found
    return found


def shape_of(module: wasmtime.Module) -> GeneShape:
    """``command`` for a module that exports ``_start`` and no ``express``."""
    return _info(module).shape


class GeneInstance:
    """One instantiated gene with its own store and budget.

    Use as a context manager: the epoch ticker runs while it is open.  The
    budget (deadline, fuel, host calls) starts when it is created and covers
    instantiation (a start function runs then), ``_initialize`` and every call.

    An express gene is driven with :meth:`express`; a WASI command gene (see
    :func:`shape_of`) gets its input as ``stdin`` here and is run with
    :meth:`start`.
    """

    def __init__(self, module: wasmtime.Module, memory: GeneMemoryAccess, limits: Limits,
                 *, name: str = "gene", log_sink: LogSink | None = None,
                 stdin: bytes = b"") -> None:
        self.limits = limits
        self.name = name
        info = _info(module)
        self.shape, imported = info.shape, info.imported
        engine = get_engine()
        self.store = wasmtime.Store(engine)
        self.store.set_fuel(limits.fuel)
        self.store.set_limits(memory_size=limits.max_memory_bytes, instances=1, tables=4,
                              memories=1)
        command = self.shape == "command"
        self.stdout = OutputStream(keep=command, cap=limits.max_output_bytes, emit=None)
        self.stderr = OutputStream(keep=False, cap=0, emit=None, tail=STDERR_TAIL)
        self._ticker = get_ticker()
        self._ticker.acquire()
        self._closed = False
        try:
            self.store.set_epoch_deadline(ticks_for(limits.deadline_s + limits.grace_s))
            self.host = HostFunctions(memory, limits, self.store,
                                      time.monotonic() + limits.deadline_s, name=name,
                                      log_sink=log_sink)
            self.env = EnvFunctions(self.host.emit)
            # A command gene's stdout is its output; every other stream is its log.
            self.stdout.emit = None if command else self.host.emit
            self.stderr.emit = self.host.emit
            linker = wasmtime.Linker(engine)
            self.host.define(linker)
            if ENV_MODULE in imported:
                self.env.define(linker)
            self.wasi: Wasi | None = None
            if WASI_MODULE in imported:
                self.wasi = Wasi(name=name, stdin=stdin, stdout=self.stdout, stderr=self.stderr)
                self.store.set_limits(memory_size=limits.max_memory_bytes,
                                      instances=Wasi.instances_needed, tables=4, memories=1)
                self.wasi.define(linker, self.store)
            self.instance = self._guard(lambda: linker.instantiate(self.store, module),
                                        "could not be instantiated")
            exports = self.instance.exports(self.store)
            exported = exports.get(EXPORT_MEMORY)
            self.guest = GuestMemory(exported, self.store) if isinstance(
                exported, wasmtime.Memory) else None
            if command:
                self._entry = exports.get(EXPORT_START)
            else:
                self._entry = exports.get(EXPORT_EXPRESS)
                if self.guest is None or not isinstance(self._entry, wasmtime.Func):
                    raise GeneFailed(f"{name} does not export memory and express")
                alloc = exports.get(EXPORT_ALLOC)
                self._alloc = alloc if isinstance(alloc, wasmtime.Func) else None
                initialize = exports.get(EXPORT_INITIALIZE)
                if isinstance(initialize, wasmtime.Func):
                    self._guard(lambda: initialize(self.store), f"failed in {EXPORT_INITIALIZE}")
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
            self.stdout.flush()
            self.stderr.flush()
            # wasmtime keeps the WASI host functions (in a process-wide table)
            # until the store is dropped; they reach the streams, whose emit
            # reaches the store: cut that cycle, or no such store would be freed.
            self.stdout.detach()
            self.stderr.detach()
            # Likewise the memory host functions reach the store themselves
            # (there are none yet if the constructor failed before making them).
            host: HostFunctions | None = getattr(self, "host", None)
            if host is not None:
                host.detach()

    def _stderr_note(self) -> str:
        tail = self.stderr.tail_text()
        return f"; stderr: {tail}" if tail else ""

    def _guard(self, call: Any, what: str, *, exit_ok: bool = False) -> Any:
        """Run guest code; every way it can fail becomes GeneFailed.  An
        ``abort`` the gene called wins over the trap that follows it; a WASI
        exit with code 0 is a normal return when ``exit_ok``."""
        try:
            result = call()
        except wasmtime.Trap as exc:
            self._check_abort()
            code = self.wasi.exit_code(self.store) if self.wasi is not None else None
            if code is not None:
                if code == 0 and exit_ok:
                    return None
                raise GeneFailed(f"{self.name} exited with code {code}"
                                 + ("" if exit_ok else " (an express gene must return, not exit)")
                                 + self._stderr_note()) from None
            if exc.trap_code is wasmtime.TrapCode.OUT_OF_FUEL:
                raise GeneFailed(f"{self.name} ran out of fuel ({self.limits.fuel} units)"
                                 + self._stderr_note()) from None
            if exc.trap_code is wasmtime.TrapCode.INTERRUPT:
                raise GeneFailed(
                    f"{self.name} ran past its deadline of {self.limits.deadline_s:g} s"
                    + self._stderr_note()) from None
            raise GeneFailed(f"{self.name} trapped: {_trap_text(exc)}"
                             + self._stderr_note()) from None
        except wasmtime.WasmtimeError as exc:
            self._check_abort()
            raise GeneFailed(f"{self.name} {what}: {_trap_text(exc)}"
                             + self._stderr_note()) from None
        self._check_abort()
        return result

    def _check_abort(self) -> None:
        aborted = self.env.aborted
        if aborted is not None:
            raise GeneFailed(f"{self.name} {aborted.describe()}") from None

    def call(self, export: str, *args: int) -> Any:
        """Call any export (tests use this to drive the host functions directly)."""
        func = self.instance.exports(self.store).get(export)
        if not isinstance(func, wasmtime.Func):
            raise GeneFailed(f"{self.name} has no exported function {export!r}")
        return self._guard(lambda: func(self.store, *args), f"failed in {export}")

    def _memory(self) -> GuestMemory:
        if self.guest is None:  # pragma: no cover - checked when instantiated
            raise GeneFailed(f"{self.name} does not export memory")
        return self.guest

    def express(self, input: Any) -> Any:
        """The ABI's express call: input JSON in, parsed output JSON out."""
        if self.shape != "express":
            raise GeneFailed(f"{self.name} is a WASI command gene; run it with start()")
        data = encode_input(input, self.name)
        guest = self._memory()
        ptr = 0
        if self._alloc is not None:
            alloc = self._alloc
            ptr = as_u32(self._guard(lambda: alloc(self.store, len(data)), "failed in alloc"))
        if not guest.fits(ptr, len(data)) and (ptr != 0 or not guest.grow_to(len(data))):
            raise GeneFailed(
                f"the input ({len(data)} bytes at {ptr}) does not fit {self.name}'s memory")
        guest.write(ptr, data)
        express = self._entry
        result = self._guard(lambda: express(self.store, ptr, len(data)), "failed in express")
        if not isinstance(result, int):  # pragma: no cover - the ABI check fixes the type
            raise GeneFailed(f"{self.name}'s express returned {result!r}")
        if result < 0:
            meaning = MEANING_OF_RESULT.get(result)
            raise GeneFailed(f"{self.name} returned error code {result}"
                             + (f" ({meaning})" if meaning else ""))
        raw = guest.read_c_string(result, self.limits.max_output_bytes)
        if raw is None:
            raise GeneFailed(
                f"{self.name}'s output at {result} is not NUL-terminated within its memory "
                f"(or is longer than {self.limits.max_output_bytes} bytes)")
        return self._parse(raw, "output")

    def start(self) -> Any:
        """Run a WASI command gene: ``_start`` with the input on stdin; its
        stdout is the output."""
        if self.shape != "command":
            raise GeneFailed(f"{self.name} is not a WASI command gene")
        entry = self._entry
        try:
            self._guard(lambda: entry(self.store), "failed in _start", exit_ok=True)
        except GeneFailed:
            if self.stdout.overflowed:
                raise self._overflow() from None
            raise
        if self.stdout.overflowed:
            raise self._overflow()
        raw = self.stdout.data()
        if not raw.strip():
            raise GeneFailed(f"{self.name} wrote nothing to stdout; a WASI command gene "
                             "writes its output JSON there" + self._stderr_note())
        return self._parse(raw, "output on stdout")

    def _overflow(self) -> GeneFailed:
        return GeneFailed(f"{self.name} wrote more than {self.limits.max_output_bytes} bytes "
                          "to stdout (the most a WASI command gene's output may be)")

    def _parse(self, raw: bytes, what: str) -> Any:
        try:
            output = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise GeneFailed(f"{self.name}'s {what} is not UTF-8 JSON: {exc}") from None
        rejection = rejection_of(output)
        if rejection is not None:
            raise rejection
        return output


def prepare_code(code: bytes, file_name: str, cache_dir: Path | None = None) -> wasmtime.Module:
    """Load (from cache, or compile) and ABI-check a module from a code file's
    bytes (``file_name`` says whether it is WAT); GeneFailed if it is bad."""
    try:
        wasm = code_to_wasm(code, file_name)
    except CompileFailed as exc:
        raise GeneFailed(exc.message) from None
    if wasm.startswith(COMPONENT_HEADER):
        raise GeneFailed(f"{file_name} {COMPONENT_FIX}")
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
                  cache_dir: Path | None = None, log_sink: LogSink | None = None) -> Any:
    """Run a gene from the bytes of its code file (``gene.wasm`` or ``gene.wat``).

    The agent runner passes ``Gene.code`` -- the bytes the gene's v2 id was
    computed from -- so the code that acts under that id is exactly the code
    that was checked, even if the file changes meanwhile.  ``name`` is used
    in messages and the gene's log lines; ``log_sink(level, line)`` receives
    the gene's log (else it goes to the logger ``rotifer.genes.wasm.gene``).
    A WASI command gene gets the input on stdin and its stdout is the output.
    """
    limits = Limits(deadline_s=deadline_s, fuel=fuel if fuel is not None else DEFAULT_FUEL)
    module = prepare_code(code, file_name, cache_dir)
    if shape_of(module) == "command":
        data = encode_input(input, name)
        with GeneInstance(module, memory, limits, name=name, log_sink=log_sink,
                          stdin=data) as command:
            return command.start()
    with GeneInstance(module, memory, limits, name=name, log_sink=log_sink) as instance:
        return instance.express(input)


def run_wasm_gene(wasm_path: Path, input: Any, memory: GeneMemoryAccess, *,
                  deadline_s: float = 10.0, fuel: int | None = None,
                  cache_dir: Path | None = None, log_sink: LogSink | None = None) -> Any:
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
                         fuel=fuel, cache_dir=cache_dir, log_sink=log_sink)
