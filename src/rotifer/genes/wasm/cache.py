"""Compiled modules, cached by content so a gene is compiled once.

Two levels:

* in the process, a small LRU of ``Module`` objects keyed by the SHA-256 of
  the wasm bytes (a composition or ``rotifer test`` runs a gene many times);
* on disk, ``<cache_dir>/<sha256 of wasm>-<engine tag>.cwasm``: wasmtime's
  serialized module behind a header with the SHA-256 of the payload.  The
  engine tag hashes the wasmtime version, the engine settings and the CPU
  architecture, so an upgrade never loads code compiled by another version.

A serialized module is native code: wasmtime checks that it was made by the
same version and configuration, but not that it is intact, so the header's
hash is verified before every load.  A file that fails any check is deleted
and the module compiled again -- a broken cache entry is never an error.
Files are written to a temporary name and renamed, so concurrent runs never
see half a file.  (Whoever can write the cache directory can run code as the
user, exactly like whoever can write the project's genes.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import wasmtime

from rotifer.memory.private import private_dir

from .engine import engine_fingerprint, get_engine

MAGIC: Final = b"rotifer-cwasm/1\n"
MEMORY_SLOTS: Final = 64


@dataclass
class CacheStats:
    """Counters for tests and measurements: what each load actually did."""

    compiled: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    disk_rejected: int = 0


stats = CacheStats()
_lock = threading.Lock()
_memory: OrderedDict[str, wasmtime.Module] = OrderedDict()


def engine_tag() -> str:
    return hashlib.sha256(engine_fingerprint().encode()).hexdigest()[:16]


def cache_path(cache_dir: Path, digest: str) -> Path:
    return cache_dir / f"{digest}-{engine_tag()}.cwasm"


def clear_memory_cache() -> None:
    """Forget the in-process modules (so a test can exercise the disk cache)."""
    with _lock:
        _memory.clear()


def _remember(digest: str, module: wasmtime.Module) -> None:
    with _lock:
        _memory[digest] = module
        _memory.move_to_end(digest)
        while len(_memory) > MEMORY_SLOTS:
            _memory.popitem(last=False)


def _load_disk(path: Path) -> wasmtime.Module | None:
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(MAGIC) + 32
    payload = blob[head:]
    ok = blob[: len(MAGIC)] == MAGIC and blob[len(MAGIC):head] == hashlib.sha256(payload).digest()
    if ok:
        try:
            module = wasmtime.Module.deserialize(get_engine(), payload)
        except wasmtime.WasmtimeError:
            module = None
        if module is not None:
            return module
    stats.disk_rejected += 1
    with contextlib.suppress(OSError):
        path.unlink()
    return None


def _store_disk(path: Path, module: wasmtime.Module) -> None:
    """Best effort: a cache that cannot be written only costs a compile."""
    try:
        payload = bytes(module.serialize())
        private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".cwasm", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except (OSError, wasmtime.WasmtimeError):
        return


def load_module(wasm: bytes, cache_dir: Path | None = None) -> wasmtime.Module:
    """The compiled module for ``wasm``: from memory, from disk, or compiled now.

    Raises ``wasmtime.WasmtimeError`` if the bytes are not a valid module.
    """
    digest = hashlib.sha256(wasm).hexdigest()
    path = cache_path(cache_dir, digest) if cache_dir is not None else None
    with _lock:
        module = _memory.get(digest)
        if module is not None:
            _memory.move_to_end(digest)
            stats.memory_hits += 1
    if module is not None:
        if path is not None and not path.exists():
            _store_disk(path, module)  # known here, but new to this cache directory
        return module
    if path is not None:
        module = _load_disk(path)
        if module is not None:
            stats.disk_hits += 1
            _remember(digest, module)
            return module
    module = wasmtime.Module(get_engine(), wasm)
    stats.compiled += 1
    if path is not None:
        _store_disk(path, module)
    _remember(digest, module)
    return module
