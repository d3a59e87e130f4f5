"""Bounds-checked access to a gene's linear memory.

Every pointer and length a gene hands the host is untrusted.  wasmtime's
``Memory.read``/``write`` follow Python slice rules (negative offsets count
from the end, reads are silently clipped), so they are never called with a
range that has not been checked here against the memory's *current* size --
the gene may have grown it since the last call.
"""

from __future__ import annotations

import ctypes
from typing import Any

import wasmtime

from .abi import U32_MASK

CHUNK = 64 * 1024


def as_u32(value: int) -> int:
    """wasm32 pointers and lengths are unsigned; wasmtime hands them over signed."""
    return value & U32_MASK


def inside(ptr: int, length: int, size: int) -> bool:
    """Whether ``[ptr, ptr + length)`` lies inside a memory of ``size`` bytes."""
    return ptr >= 0 and length >= 0 and ptr + length <= size


class GuestMemory:
    """One gene memory as seen through a store (or a host call's caller)."""

    def __init__(self, memory: wasmtime.Memory, store: Any) -> None:
        self.memory = memory
        self.store = store

    def size(self) -> int:
        return int(self.memory.data_len(self.store))

    def view(self) -> CallView:
        """The memory as it is now; valid until the guest runs (and may grow it) again."""
        size = self.size()
        return CallView(size, base_address(self.memory, self.store, size))

    def fits(self, ptr: int, length: int) -> bool:
        """Whether ``[ptr, ptr + length)`` lies inside the memory."""
        return inside(ptr, length, self.size())

    def read(self, ptr: int, length: int) -> bytes:
        return self.view().read(ptr, length)

    def write(self, ptr: int, data: bytes) -> None:
        self.view().write(ptr, data)

    def read_c_string(self, ptr: int, limit: int) -> bytes | None:
        """The bytes from ``ptr`` up to the first NUL, or None if there is no
        NUL before the end of memory or within ``limit`` bytes."""
        size = self.size()
        if not 0 <= ptr < size:
            return None
        end = min(size, ptr + limit + 1)
        parts: list[bytes] = []
        pos = ptr
        while pos < end:
            chunk = bytes(self.memory.read(self.store, pos, min(pos + CHUNK, end)))
            nul = chunk.find(b"\x00")
            if nul >= 0:
                parts.append(chunk[:nul])
                return b"".join(parts)
            parts.append(chunk)
            pos += len(chunk)
        return None

    def grow_to(self, size: int) -> bool:
        """Grow the memory so it holds at least ``size`` bytes; False if it cannot."""
        current = self.size()
        if size <= current:
            return True
        page = int(self.memory.page_size(self.store))
        pages = -(-(size - current) // page)
        try:
            self.memory.grow(self.store, pages)
        except wasmtime.WasmtimeError:
            return False
        return self.size() >= size


class CallView:
    """The gene's memory for the length of one host call.

    While a host function runs the guest cannot, so its memory can neither
    grow nor move: ``size`` and the ``base`` address are taken once per call
    (not before every access, an FFI round trip each).  Every access is
    checked here against ``size`` and then copied with ctypes;
    :class:`GuestMemory` reads and writes through a fresh view.  A view must
    not outlive the host call (or, outside one, the moment) it was made for.
    """

    __slots__ = ("_base", "size")

    def __init__(self, size: int, base: int) -> None:
        self.size = size
        self._base = base

    def fits(self, ptr: int, length: int) -> bool:
        """Whether ``[ptr, ptr + length)`` lies inside the memory."""
        return inside(ptr, length, self.size)

    def read(self, ptr: int, length: int) -> bytes:
        if not self.fits(ptr, length):
            raise IndexError(f"[{ptr}, {ptr + length}) is outside the gene's memory")
        return ctypes.string_at(self._base + ptr, length) if length else b""

    def write(self, ptr: int, data: bytes) -> None:
        if not self.fits(ptr, len(data)):
            raise IndexError(f"[{ptr}, {ptr + len(data)}) is outside the gene's memory")
        if data:
            ctypes.memmove(self._base + ptr, data, len(data))


def base_address(memory: wasmtime.Memory, store: Any, size: int) -> int:
    """Where the memory's bytes start now; ``size`` is its current size (an empty
    memory has no bytes to point at: 0)."""
    return ctypes.addressof(memory.data_ptr(store).contents) if size else 0


class MappedView(CallView):
    """A :class:`CallView` that copies through a memoryview of the whole memory.

    ``ctypes.string_at`` and ``ctypes.memmove`` are foreign calls, dearer
    than slicing a memoryview.  Making the memoryview costs about as
    much as it saves once, so the host keeps one and makes a new one only when
    the memory's size changes -- the only time its base can move.  The bounds
    checks are :class:`CallView`'s.
    """

    __slots__ = ("_bytes",)

    def __init__(self, size: int, base: int) -> None:
        super().__init__(size, base)
        self._bytes = (memoryview((ctypes.c_ubyte * size).from_address(base)).cast("B")
                       if size else memoryview(bytearray()))

    def read(self, ptr: int, length: int) -> bytes:
        if not self.fits(ptr, length):
            raise IndexError(f"[{ptr}, {ptr + length}) is outside the gene's memory")
        return self._bytes[ptr:ptr + length].tobytes()

    def write(self, ptr: int, data: bytes) -> None:
        if not self.fits(ptr, len(data)):
            raise IndexError(f"[{ptr}, {ptr + len(data)}) is outside the gene's memory")
        self._bytes[ptr:ptr + len(data)] = data
