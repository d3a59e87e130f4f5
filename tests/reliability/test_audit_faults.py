"""Faults in the audit log: if the line cannot be written, the change is not made.

The seed: "The line is written before the change is saved; if it cannot be
written, the change is not made."  Each fault below is a real one -- the
audit path is a symlink to ``/dev/full`` (every write fails with ENOSPC), a
directory, or in a folder that was removed; the file is read-only; a file
size limit cuts an append off half-way -- and each kind of change is tried
under it: the call fails with MEMORY_STORAGE_ERROR, the stored entries and
byte total are exactly as before, the audit log gained nothing, and once the
fault is gone the same call works and is audited.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, ManualClock, MemoryStore
from tests.memory.conftest import StoreFactory

from .helpers import audit_lines, gene_id, parse_audit

A = gene_id("writer")
B = gene_id("other")
AGENT = "agent"
DAY_US = 86_400 * 1_000_000
ONE_DAY = {"maxRetentionDays": 1, "autoDeleteOnTermination": False,
           "anonymizationSupported": False}
HERE = Path(__file__).parent


# -- the faults -----------------------------------------------------------------

def fault_dev_full(rot: Path) -> Callable[[], None]:
    audit = rot / "audit.jsonl"
    saved = audit.read_bytes()
    audit.unlink()
    audit.symlink_to("/dev/full")

    def undo() -> None:
        audit.unlink()
        audit.write_bytes(saved)
        audit.chmod(0o600)
    return undo


def fault_directory(rot: Path) -> Callable[[], None]:
    audit = rot / "audit.jsonl"
    saved = audit.read_bytes()
    audit.unlink()
    audit.mkdir()

    def undo() -> None:
        audit.rmdir()
        audit.write_bytes(saved)
        audit.chmod(0o600)
    return undo


def fault_folder_removed(rot: Path) -> Callable[[], None]:
    saved = rot.with_name("saved-rotifer")
    rot.rename(saved)

    def undo() -> None:
        saved.rename(rot)
    return undo


FAULTS = {
    "dev-full": fault_dev_full,
    "directory": fault_directory,
    "folder-removed": fault_folder_removed,
}


# -- the changes ----------------------------------------------------------------

class Scene:
    """An agent with a few entries, on the backend under test."""

    def __init__(self, store: MemoryStore, rot: Path, clock: ManualClock) -> None:
        self.store, self.rot, self.clock = store, rot, clock
        store.create_agent(AGENT, quota_bytes=100)
        self.g = store.for_gene(AGENT, A, "d")
        self.other = store.for_gene(AGENT, B, "elsewhere")
        self.g.write_memory("pref", b"p" * 10, "PREFERENCE")
        self.g.write_memory("cache", b"c" * 20, "CACHE")
        self.g.write_memory("ctx", b"x" * 20, "CONTEXT", retention_policy=ONE_DAY)
        self.g.write_memory("secret", b"s" * 5, "PATTERN",
                            access_policy={"readScope": "CREATOR_GENE_ONLY",
                                           "writeScope": "CREATOR_GENE_ONLY",
                                           "sharePolicy": "PRIVATE"})

    def snapshot(self) -> Any:
        """Every stored row and the byte total, read below the rules (no purge, no audit)."""
        with self.store.backend.read() as tx:
            rows = sorted((r.key, r.category.value, r.value, r.updated_us, r.last_accessed_by)
                          for r in tx.iter_newest(AGENT))
            record = tx.get_agent(AGENT)
        return rows, None if record is None else record.used_bytes


def _expire(s: Scene) -> object:
    s.clock.advance(days=2)
    return s.g.read_memory("pref")  # the read purges "ctx" first, which needs its line


CHANGES: dict[str, Callable[[Scene], object]] = {
    "write": lambda s: s.g.write_memory("new", b"n", "CACHE"),
    "update": lambda s: s.g.write_memory("pref", b"changed", "PREFERENCE"),
    "evicting-write": lambda s: s.g.write_memory("big", b"b" * 60, "CACHE"),
    "delete": lambda s: s.g.delete_memory("cache"),
    "deployer-delete-key": lambda s: s.store.deployer(AGENT).delete_key("pref"),
    "deployer-delete-category": lambda s: s.store.deployer(AGENT).delete_category("CACHE"),
    "expiry": _expire,
    "drop-agent": lambda s: s.store.drop_agent(AGENT),
    "refused-access": lambda s: s.other.read_memory("secret"),
}

#: What the same call does once the audit log is writable again.
AFTERWARDS: dict[str, str] = {
    "write": "write", "update": "update", "evicting-write": "evict", "delete": "delete",
    "deployer-delete-key": "deployer_delete", "deployer-delete-category": "deployer_delete",
    "expiry": "expire", "drop-agent": "drop_agent", "refused-access": "access_denied",
}


@pytest.fixture
def scene(store_factory: StoreFactory, tmp_path: Path) -> Iterator[Scene]:
    rot = tmp_path / ".rotifer"
    clock = ManualClock("2026-03-01T12:00:00Z")
    yield Scene(store_factory(rot, clock=clock), rot, clock)


@pytest.mark.reliability(
    "Faults", "Audit log cannot be written (ENOSPC via /dev/full, a directory in the way, "
    "its folder removed)",
    "MEMORY_STORAGE_ERROR; entries, byte total and audit log exactly as before; the same "
    "call works and is audited once the fault is gone")
@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("fault", list(FAULTS))
def test_unwritable_audit_log_means_no_change(scene: Scene, fault: str, change: str) -> None:
    """Every kind of change (write, update, evicting write, delete, deployer deletes, expiry
    purge, drop, refused access) is attempted with the audit path broken, on SQLite and
    PostgreSQL; then the fault is undone and the call repeated."""
    audit = scene.rot / "audit.jsonl"
    log_before = audit.read_bytes()
    before = scene.snapshot()
    undo = FAULTS[fault](scene.rot)
    try:
        with pytest.raises(AgentMemoryError) as info:
            CHANGES[change](scene)
        assert info.value.code is ErrorCode.STORAGE_ERROR, str(info.value)
        assert "audit log" in info.value.message
        assert scene.snapshot() == before
    finally:
        undo()
    assert audit.read_bytes() == log_before
    # The fault is gone: the same call goes through and leaves its line.
    try:
        CHANGES[change](scene)
    except AgentMemoryError as exc:
        assert change == "refused-access" and exc.code is ErrorCode.ACCESS_DENIED
    lines = audit_lines(scene.rot)
    assert AFTERWARDS[change] in {line["action"] for line in lines[len(log_before.splitlines()):]}


def _run_faultproc(mode: str, folder: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(HERE / "faultproc.py"), mode, str(folder)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    return result


@pytest.mark.reliability(
    "Faults", "Audit log made read-only (chmod 0444; as root with CAP_DAC_OVERRIDE dropped)",
    "MEMORY_STORAGE_ERROR for every change; entries and audit log unchanged")
def test_read_only_audit_log(tmp_path: Path) -> None:
    """A subprocess makes the audit log read-only and tries a write, an update, an evicting
    write, a delete and a deployer delete (SQLite); as root it first drops the capabilities
    that let root write anyway, so the file mode really binds."""
    result = _run_faultproc("readonly", tmp_path)
    assert set(result["results"].values()) == {result["expected"]}, result
    assert result["state_unchanged"] and result["audit_unchanged"], result
    lines = audit_lines(tmp_path / ".rotifer")
    assert lines[-1]["key"] == "after"


@pytest.mark.reliability(
    "Faults", "Disk fills up in the middle of an audit line (RLIMIT_FSIZE: part of the "
    "line written, then EFBIG)",
    "the change is not made, the half line is cut off, and the next change's line is "
    "whole (regression: it used to be glued to the torn half)")
def test_audit_append_cut_off_half_way(tmp_path: Path) -> None:
    """A subprocess sets a file-size limit 40 bytes past the end of the audit log, so each
    append writes part of its line and then fails; every change must fail with
    MEMORY_STORAGE_ERROR and leave the log byte for byte as it was, and after the limit is
    lifted the next change must have a parseable line of its own."""
    result = _run_faultproc("fsize", tmp_path)
    assert set(result["results"].values()) == {result["expected"]}, result
    assert result["state_unchanged"] and result["audit_unchanged"], result
    lines = audit_lines(tmp_path / ".rotifer")  # every line parses, none is torn
    assert [line["key"] for line in lines] == ["keep", "old", "after"]


@pytest.mark.reliability(
    "Faults", "A writer died in the middle of an audit line (the log ends in half a line)",
    "the next append cuts the torn half off, so every line is one JSON object and the "
    "next change is audited (regression)")
def test_torn_last_line_is_cut_before_the_next_append(tmp_path: Path) -> None:
    """The audit log is left ending in half a line, as a writer killed inside a long
    write(2) leaves it; the next change must remove the fragment (its change was never
    committed) and append a whole line."""
    rot = tmp_path / ".rotifer"
    with MemoryStore.open(rot) as store:
        store.create_agent(AGENT)
        g = store.for_gene(AGENT, A, "d")
        g.write_memory("a", b"1", "CACHE")
        with (rot / "audit.jsonl").open("ab") as f:
            f.write(b'{"ts":"2026-03-01T12:00:00.000000Z","agent":"agent","action":"wri')
        assert parse_audit((rot / "audit.jsonl").read_bytes()).torn
        g.write_memory("b", b"2", "CACHE")
    assert [line["key"] for line in audit_lines(rot)] == ["a", "b"]


def test_dev_full_is_really_full() -> None:
    """Guard for the fault above: /dev/full must refuse writes on this machine."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    fd = os.open("/dev/full", os.O_WRONLY)
    try:
        with pytest.raises(OSError):
            os.write(fd, b"x")
    finally:
        os.close(fd)
