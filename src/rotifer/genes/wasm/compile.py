"""Turning a gene's code file into wasm bytes, and ``gene.wat`` into ``gene.wasm``."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import wasmtime

from rotifer.genes.errors import CompileFailed

from .abi import AbiViolation, check_module
from .engine import get_engine
from .imports import COMPONENT_FIX, COMPONENT_HEADER


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CompileFailed(f"cannot read {path}: {exc.strerror or exc}") from None


def wat_bytes_to_wasm(code: bytes, file_name: str) -> bytes:
    """Parse WAT source; CompileFailed with wasmtime's message if it is bad."""
    try:
        text = code.decode("utf-8")
    except UnicodeDecodeError:
        raise CompileFailed(f"{file_name} is not UTF-8 text") from None
    try:
        return bytes(wasmtime.wat2wasm(text))
    except wasmtime.WasmtimeError as exc:
        raise CompileFailed(f"{file_name} is not valid WAT: {_first_lines(exc)}") from None


def wat_to_wasm(wat_path: Path) -> bytes:
    """Parse a ``.wat`` file."""
    return wat_bytes_to_wasm(_read(wat_path), wat_path.name)


def code_to_wasm(code: bytes, file_name: str) -> bytes:
    """Module bytes from a code file's contents: ``*.wat`` is parsed, anything
    else is taken as a binary module."""
    return wat_bytes_to_wasm(code, file_name) if file_name.endswith(".wat") else code


def read_wasm(path: Path) -> bytes:
    """The module bytes of a ``.wasm`` file, or of a ``.wat`` file parsed now."""
    return code_to_wasm(_read(path), path.name)


def check_wasm(wasm: bytes, name: str) -> wasmtime.Module:
    """Validate and compile ``wasm`` and check it against the ABI."""
    if wasm.startswith(COMPONENT_HEADER):
        raise CompileFailed(f"{name} {COMPONENT_FIX}")
    try:
        module = wasmtime.Module(get_engine(), wasm)
    except wasmtime.WasmtimeError as exc:
        raise CompileFailed(f"{name} is not a valid WebAssembly module: {_first_lines(exc)}"
                            ) from None
    try:
        check_module(module)
    except AbiViolation as exc:
        raise CompileFailed(f"{name} does not follow the rotifer WASM ABI: {exc}") from None
    return module


def compile_wat(wat_path: Path, out_path: Path) -> None:
    """``rotifer compile``: write ``out_path`` from ``wat_path``, or raise CompileFailed.

    The module is validated and checked against the ABI first, so a gene that
    compiles is one the runtime can load; ``out_path`` is replaced atomically
    and left untouched on failure.
    """
    wat_path, out_path = Path(wat_path), Path(out_path)
    wasm = wat_to_wasm(wat_path)
    check_wasm(wasm, wat_path.name)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".wasm", dir=out_path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(wasm)
            os.replace(tmp, out_path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise CompileFailed(f"cannot write {out_path}: {exc.strerror or exc}") from None


def _first_lines(exc: Exception, limit: int = 6) -> str:
    lines = [line.rstrip() for line in str(exc).strip().splitlines() if line.strip()]
    return "\n".join(lines[:limit])
