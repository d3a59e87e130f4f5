"""Subprocess side of the audit-fault tests: faults a test process cannot give itself.

Run as ``python faultproc.py MODE DIR``; prints one JSON object (the
observations) on stdout.  Modes:

``readonly``
    The audit log is made read-only (``chmod 0444``).  As root, file modes do
    not bind, so the script first drops CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH from its capability bounding set and re-executes
    itself: the new image runs as uid 0 without them, and the mode bites.
``fsize``
    A file-size limit (``RLIMIT_FSIZE``, ``SIGXFSZ`` ignored) set a few bytes
    past the audit log's end: the next append writes part of its line and
    then fails with ``EFBIG`` -- a full disk in miniature.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
GENE = "v2:" + "a" * 64


def drop_dac_and_reexec() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            print(json.dumps({"skip": f"cannot drop capability {cap}: errno "
                                      f"{ctypes.get_errno()}"}))
            sys.exit(0)
    os.environ["ROTIFER_FAULTPROC_DROPPED"] = "1"
    os.execv(sys.executable, [sys.executable, *sys.argv])


def attempt(fn: Any) -> str:
    try:
        fn()
    except AgentMemoryError as exc:
        return exc.code.value
    return "ok"


def state(store: MemoryStore) -> list[Any]:
    with store.backend.read() as tx:
        rows = [(r.key, r.category.value, r.value.hex()) for r in tx.iter_newest("a")]
        record = tx.get_agent("a")
    return [rows, None if record is None else record.used_bytes]


def main(mode: str, root: Path) -> dict[str, Any]:
    rot = root / ".rotifer"
    store = MemoryStore.open(rot, url=f"sqlite:{root / 'memory.db'}")
    if not store.has_agent("a"):
        store.create_agent("a", quota_bytes=64)
    g = store.for_gene("a", GENE, "d")
    g.write_memory("keep", b"v" * 10, "CACHE")
    g.write_memory("old", b"o" * 20, "CACHE")
    audit = rot / "audit.jsonl"
    before_state, before_audit = state(store), audit.read_bytes()
    calls = {
        "write": lambda: g.write_memory("new", b"n", "CACHE"),
        "update": lambda: g.write_memory("keep", b"changed", "CACHE"),
        "evicting write": lambda: g.write_memory("big", b"b" * 40, "CACHE"),
        "delete": lambda: g.delete_memory("keep"),
        "deployer delete": lambda: store.deployer("a").delete_key("keep"),
    }
    results: dict[str, Any] = {}
    if mode == "readonly":
        audit.chmod(0o444)
        try:
            for name, call in calls.items():
                results[name] = attempt(call)
        finally:
            audit.chmod(0o600)
    elif mode == "fsize":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        limit = audit.stat().st_size + 40
        for name, call in calls.items():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
            try:
                results[name] = attempt(call)
            finally:
                resource.setrlimit(resource.RLIMIT_FSIZE,
                                   (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    else:
        raise SystemExit(f"unknown mode {mode}")
    after_state, after_audit = state(store), audit.read_bytes()
    # the log is writable again: the next change must be made and readable
    g.write_memory("after", b"x", "CACHE")
    store.close()
    return {
        "results": results, "state_unchanged": before_state == after_state,
        "audit_unchanged": before_audit == after_audit,
        "expected": ErrorCode.STORAGE_ERROR.value,
    }


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    if mode == "readonly" and os.geteuid() == 0 and not os.environ.get(
            "ROTIFER_FAULTPROC_DROPPED"):
        drop_dac_and_reexec()
    print(json.dumps(main(mode, folder)))
