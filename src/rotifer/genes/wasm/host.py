"""The host functions a gene imports from ``rotifer``.

Each memory call runs the same steps, and every exit is a result code -- a
host function never lets an exception into wasmtime (that would turn a bad
request into a trap, and wasmtime-py passes such exceptions through one
process-wide slot, which parallel runs would race on):

1. budget: deadline passed, too little fuel, or too many calls -> -4, no body;
2. ``out`` must lie inside memory, else -10 and nothing is written;
3. the request must be at most ``max_request_bytes``, inside memory, UTF-8
   JSON of the right shape -> else -10 with an error body;
4. the memory call itself; a MemoryError maps to -2/-8/-10/-12/-13 with the
   error body, anything unexpected to -13;
5. the response is written to ``out`` (followed by a NUL when there is room,
   which the result does not count), or -1 if it does not fit.

An error body ``{"__rotifer_error": {"code", "message"}}`` is written only if
it fits in ``out_cap`` together with a terminating NUL, so a gene can find
its end; if the full message does not fit, the body with an empty message is
tried.  For -1 the body's code is MEMORY_INVALID_INPUT and its message gives
the size the response needs; a write or delete that gets -1 *was carried out*
(the message says so) -- only its response was lost.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, Final

import wasmtime

from rotifer.genes.calls import CHANGES_MEMORY, Op, invalid, probe_denied
from rotifer.memory import AgentMemoryError, ErrorCode, GeneMemoryAccess

from . import rawcall, requests
from .abi import (
    BUDGET_SPENT,
    EXPORT_MEMORY,
    IMPORT_MODULE,
    LOG_FUNCTION,
    MEMORY_FUNCTIONS,
    OUT_TOO_SMALL,
    RESULT_OF_CODE,
    log_type,
    memory_call_type,
)
from .guest import CallView, MappedView, as_u32, base_address
from .limits import Limits

logger = logging.getLogger(__name__)
gene_logger = logging.getLogger("rotifer.genes.wasm.gene")

#: ``log(level, ...)``: 0 debug, 1 info, 2 warning, 3 error; others are info.
LOG_LEVELS: Final = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}

LogSink = Callable[[int, str], None]
#: What a host function gets to find the gene's exports: wasmtime-py's Caller,
#: or the caller's address when it is called through :mod:`.rawcall`.
Caller = wasmtime.Caller | int


class _Refusal(Exception):
    """An early exit with a result code and, maybe, an error body."""

    def __init__(self, result: int, error: AgentMemoryError | None) -> None:
        super().__init__(result)
        self.result = result
        self.error = error


class HostFunctions:
    """The host side of one run: its memory view, budget and log.

    ``store`` is the run's wasmtime Store (used for fuel); ``deadline`` is the
    soft deadline on :func:`time.monotonic`.
    """

    def __init__(self, memory: GeneMemoryAccess, limits: Limits, store: wasmtime.Store,
                 deadline: float, *, name: str = "gene", log_sink: LogSink | None = None) -> None:
        self.memory = memory
        self.limits = limits
        self._store: wasmtime.Store | None = store
        self.deadline = deadline
        self.name = name
        self.log_sink = log_sink
        self.calls = 0
        self.log_bytes = 0
        self._fuel: rawcall.Fuel | None = rawcall.Fuel(store)
        # The gene's exported memory, looked up at its first host call (which may come
        # from a start function, before the instance is handed back) and kept: the
        # handle stays valid for the store's life, and caller.get() is dear.
        self._size_of: rawcall.MemorySize | None = None
        # The view of the last call.  A linear memory never shrinks and moves only
        # when it grows, so while the size is unchanged so is the base, and the view
        # serves the next call as well.
        self._mapped: MappedView | None = None

    def define(self, linker: wasmtime.Linker) -> None:
        for op in MEMORY_FUNCTIONS:
            # A partial, not a closure: one Python frame less on every call.
            call = functools.partial(self.memory_call, Op(op))
            if not rawcall.define(linker, IMPORT_MODULE, op, memory_call_type(), call):
                linker.define_func(IMPORT_MODULE, op, memory_call_type(), call,
                                   access_caller=True)
        linker.define_func(IMPORT_MODULE, LOG_FUNCTION, log_type(), self.log, access_caller=True)

    def detach(self) -> None:
        """Let go of the store: the run is over, and every later call finds its
        budget spent.

        wasmtime keeps a store's host functions -- and wasmtime-py or
        :mod:`.rawcall` their Python side, in a process-wide table -- until the
        store is dropped; while they reach the store it never is, and each run
        of a gene that imports a memory call would keep its linear memory.
        """
        self._store = self._fuel = self._size_of = self._mapped = None

    # -- budget -------------------------------------------------------------------

    @staticmethod
    def _fuel_left(fuel: rawcall.Fuel) -> int:
        try:
            return fuel.get()
        except wasmtime.WasmtimeError:  # pragma: no cover - fuel is always configured
            return 0

    def _spend(self, extra_fuel: int) -> bool:
        """Count one host call and charge its fuel; False once the budget is spent."""
        self.calls += 1
        fuel = self._fuel
        if (fuel is None or self.calls > self.limits.max_host_calls
                or time.monotonic() >= self.deadline):
            return False
        cost = self.limits.host_call_fuel + extra_fuel
        left = self._fuel_left(fuel)
        # Keep a reserve of one call's fuel so the gene can still react to -4.
        if left < cost + self.limits.host_call_fuel:
            return False
        fuel.set(left - cost)
        return True

    def _view(self, caller: Caller) -> CallView | None:
        """The gene's memory for this call, or None if it exports none."""
        size_of = self._size_of
        if size_of is None:
            store = self._store
            found = None if store is None else (
                caller.get(EXPORT_MEMORY) if isinstance(caller, wasmtime.Caller)
                else rawcall.caller_export(caller, EXPORT_MEMORY))
            if store is None or not isinstance(found, wasmtime.Memory):  # pragma: no cover
                return None  # detached, or no memory (checked at load)
            # The run's store is the caller's store; its context serves as well.
            self._size_of = size_of = rawcall.MemorySize(found, store)
        size = size_of.size()
        view = self._mapped
        if view is None or view.size != size:
            view = MappedView(size, base_address(size_of.memory, size_of.store, size))
            self._mapped = view
        return view

    # -- memory calls -------------------------------------------------------------

    def memory_call(self, op: Op, caller: Caller, req_ptr: int, req_len: int,
                    out_ptr: int, out_cap: int) -> int:
        try:
            return self._memory_call(op, caller, as_u32(req_ptr), as_u32(req_len),
                                     as_u32(out_ptr), as_u32(out_cap))
        except Exception:
            # Never reached by a known path; whatever it was, the gene gets a result.
            logger.exception("unexpected error in the %s host function", op)
            return RESULT_OF_CODE[ErrorCode.STORAGE_ERROR]

    def _memory_call(self, op: Op, caller: Caller, req_ptr: int, req_len: int,
                     out_ptr: int, out_cap: int) -> int:
        if not self._spend(min(req_len, self.limits.max_request_bytes)):
            return BUDGET_SPENT
        guest = self._view(caller)
        if guest is None:  # pragma: no cover - checked at load
            return RESULT_OF_CODE[ErrorCode.INVALID_INPUT]
        if not guest.fits(out_ptr, out_cap):
            # Nowhere to put a body; still, a refused gene hears -2 first.
            denied = probe_denied(op, self.memory)
            return RESULT_OF_CODE[ErrorCode.ACCESS_DENIED if denied else ErrorCode.INVALID_INPUT]
        try:
            request = self._request(op, guest, req_ptr, req_len)
            response = self._perform(op, request)
        except _Refusal as refusal:
            if refusal.error is not None:
                self._write_error(guest, out_ptr, out_cap, refusal.error)
            return refusal.result
        if len(response) > out_cap:
            done = " (the call was carried out)" if op in CHANGES_MEMORY else ""
            self._write_error(guest, out_ptr, out_cap, invalid(
                f"out is too small for the response{done}: it needs {len(response)} bytes, "
                f"out_cap is {out_cap}"))
            return OUT_TOO_SMALL
        guest.write(out_ptr, response + b"\x00" if len(response) < out_cap else response)
        return len(response)

    def _request(self, op: Op, guest: CallView, req_ptr: int, req_len: int) -> Any:
        try:
            if req_len > self.limits.max_request_bytes:
                raise invalid(
                    f"the request is {req_len} bytes; at most {self.limits.max_request_bytes} "
                    "are accepted")
            if not guest.fits(req_ptr, req_len):
                raise invalid(
                    f"the request [{req_ptr}, {req_ptr + req_len}) is outside the gene's "
                    f"memory of {guest.size} bytes")
            return requests.decode(guest.read(req_ptr, req_len))
        except AgentMemoryError as exc:
            raise self._refusal(op, exc) from None

    def _perform(self, op: Op, request: Any) -> bytes:
        try:
            return requests.perform(op, self.memory, request)
        except AgentMemoryError as exc:
            if exc.code is ErrorCode.INVALID_INPUT:
                raise self._refusal(op, exc) from None
            raise _Refusal(RESULT_OF_CODE[exc.code], exc) from None
        except Exception as exc:
            logger.exception("the %s host function failed", op)
            raise _Refusal(RESULT_OF_CODE[ErrorCode.STORAGE_ERROR], AgentMemoryError(
                ErrorCode.STORAGE_ERROR, f"the memory host failed: {type(exc).__name__}")
            ) from None

    def _refusal(self, op: Op, error: AgentMemoryError) -> _Refusal:
        """-10 for a bad request -- unless the memory refuses this gene anyway."""
        denied = probe_denied(op, self.memory)
        final = denied if denied is not None else error
        return _Refusal(RESULT_OF_CODE[final.code], final)

    @staticmethod
    def _write_error(guest: CallView, out_ptr: int, out_cap: int, error: AgentMemoryError) -> None:
        for message in (error.message, ""):
            body = requests.error_body(error.code.value, message) + b"\x00"
            if len(body) <= out_cap:
                guest.write(out_ptr, body)
                return

    # -- log ----------------------------------------------------------------------

    def log(self, caller: wasmtime.Caller, level: int, ptr: int, length: int) -> None:
        """Pass a gene's message on; a bad pointer or a spent budget drops it silently."""
        try:
            ptr, length = as_u32(ptr), as_u32(length)
            if not self._spend(0):
                return
            guest = self._view(caller)
            if guest is None:  # pragma: no cover - checked at load
                return
            if not guest.fits(ptr, length):
                return
            take = min(length, self.limits.max_log_message_bytes)
            text = guest.read(ptr, take).decode("utf-8", errors="replace")
            self.emit(level, text + (" …" if take < length else ""))
        except Exception:
            logger.exception("unexpected error in the log host function")

    def emit(self, level: int, text: str) -> None:
        """One line of the gene's log (from ``log``, AssemblyScript's ``trace``
        or a WASI output stream), within the run's log allowance.

        With a ``log_sink`` the line goes there -- the runner decides where a
        gene's log goes, e.g. the CLI prints ``[gene] line`` on stderr as for
        every kind of gene; without one it goes to the Python logger
        ``rotifer.genes.wasm.gene``.
        """
        try:
            room = self.limits.max_log_bytes - self.log_bytes
            cap = min(self.limits.max_log_message_bytes, room)
            if cap <= 0:
                return
            data = text.encode("utf-8", errors="replace")
            if len(data) > cap:
                text = data[:cap].decode("utf-8", errors="ignore") + " …"
            self.log_bytes += min(len(data), cap)
            if self.log_sink is not None:
                self.log_sink(level, text)
            else:
                gene_logger.log(LOG_LEVELS.get(level, logging.INFO), "[%s] %s", self.name, text)
        except Exception:
            logger.exception("unexpected error passing on a gene's log line")
