"""The audit log file kept open between appends (audit_file.py).

The descriptor and the end of the file as this process left it are reused,
so every test here changes the file behind the log's back -- another writer,
another thread, a forked child, a rename, a roll-over by someone else, a torn
line -- and checks that the next append still lands in the file at the path,
whole and chained to the line really before it.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from rotifer.memory.audit import AuditLog
from rotifer.memory.audit.text import line_hash
from rotifer.memory.audit.verify import read_chained


def _line(n: int, agent: str = "a", seq: int | None = None) -> dict[str, Any]:
    return {"ts": f"2026-01-01T00:00:00.{n:06d}Z", "agent": agent, "action": "write",
            "key": f"k{n}", "category": "CACHE", "actor": "g", "bytes": n, "entryId": None,
            "seq": n if seq is None else seq}


def _chained(path: Path) -> list[dict[str, Any]]:
    """The log's lines, after checking every ``prev`` names the line before it."""
    lines, legacy = read_chained(path)
    assert legacy == 0
    return [logged.line for logged in lines]


def test_an_append_after_another_writer_links_to_that_writers_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    mine, theirs = AuditLog(path), AuditLog(path)  # two descriptors: two processes' worth
    mine.write([_line(1)])
    theirs.write([_line(2)])
    mine.write([_line(3)])  # its remembered end is stale: it must read the tail
    theirs.write([_line(4)])
    assert [x["seq"] for x in _chained(path)] == [1, 2, 3, 4]


def test_a_moved_log_is_left_alone_and_a_new_one_started(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1)])
    moved = tmp_path / "moved.jsonl"
    path.rename(moved)
    before = moved.read_bytes()
    log.write([_line(2)])
    assert moved.read_bytes() == before  # never written around to the old file
    assert [json.loads(x)["seq"] for x in path.read_bytes().splitlines()] == [2]


def test_a_replaced_log_gets_the_next_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1)])
    old = path.read_bytes()
    path.unlink()
    path.write_bytes(old)  # same content, another file
    log.write([_line(2)])
    assert [x["seq"] for x in _chained(path)] == [1, 2]


def test_a_log_replaced_by_a_file_of_the_same_mode_and_size_gets_the_next_line(
        tmp_path: Path) -> None:
    """Only the inode tells this replacement apart: same content, size and mode."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1)])
    old, mode = path.read_bytes(), path.stat().st_mode
    path.unlink()
    path.write_bytes(old)
    path.chmod(mode)
    log.write([_line(2)])
    assert [x["seq"] for x in _chained(path)] == [1, 2]


def test_a_torn_line_left_by_another_writer_is_cut_first(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1)])
    with path.open("ab") as f:
        f.write(b'{"ts":"half a li')
    log.write([_line(2)])
    assert [x["seq"] for x in _chained(path)] == [1, 2]


def test_a_phantom_is_found_from_the_remembered_last_line(tmp_path: Path) -> None:
    """The line before is this process's own, remembered rather than read: a
    change numbered like it is still preceded by a rolled_back line."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1, seq=7)])
    log.write([_line(2, seq=7)])  # the same number again: 7 was never committed
    lines = _chained(path)
    assert [(x["action"], x["seq"]) for x in lines] == [
        ("write", 7), ("rolled_back", 7), ("write", 7)]
    log.write([_line(3, agent="b", seq=8)])
    log.write([_line(4, agent="a", seq=8)])  # another agent's 8: no phantom
    assert [x["action"] for x in _chained(path)][3:] == ["write", "write"]


def test_threads_sharing_one_log_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)

    def work(t: int) -> None:
        for i in range(40):
            log.write([_line(i, agent=f"t{t}"), _line(i, agent=f"t{t}")])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = _chained(path)
    assert len(lines) == 6 * 40 * 2
    for a, b in zip(lines[::2], lines[1::2], strict=True):  # a change's lines stay together
        assert (a["agent"], a["seq"]) == (b["agent"], b["seq"])


def test_a_forked_child_appends_through_its_own_descriptor(tmp_path: Path) -> None:
    """A child inherits the kept descriptor; sharing it would share the lock
    (flock belongs to the open file), so parent and child must not both use it."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(0)])
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            for i in range(200):
                log.write([_line(i, agent="child"), _line(i, agent="child")])
        except BaseException:
            code = 1
        os._exit(code)
    for i in range(200):
        log.write([_line(i, agent="parent"), _line(i, agent="parent")])
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    lines = _chained(path)
    assert len(lines) == 1 + 2 * 200 * 2
    for a, b in zip(lines[1::2], lines[2::2], strict=True):
        assert (a["agent"], a["seq"]) == (b["agent"], b["seq"])


def test_a_roll_over_by_another_writer_is_followed(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    mine = AuditLog(path)
    mine.write([_line(1)])
    roller = AuditLog(path, max_bytes=path.stat().st_size + 10)
    roller.write([_line(2)])  # too big for the file: it becomes audit.jsonl.1
    assert (tmp_path / "audit.jsonl.1").exists()
    kept = (tmp_path / "audit.jsonl.1").read_bytes()
    mine.write([_line(3)])  # must go to the new file, not the one kept open before
    assert (tmp_path / "audit.jsonl.1").read_bytes() == kept
    assert [x["seq"] for x in _chained(path)] == [1, 2, 3]
    first_of_new = path.read_bytes().splitlines()[0]
    assert json.loads(first_of_new)["prev"] == line_hash(kept.splitlines()[-1])


def test_close_then_write_opens_again(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1)])
    log.close()
    log.write([_line(2)])
    assert [x["seq"] for x in _chained(path)] == [1, 2]


def test_a_log_emptied_by_someone_else_is_not_chained_to_its_old_end(tmp_path: Path) -> None:
    """The kept file's size comes from the one ``stat`` of every append: a log cut
    back (here emptied in place, same inode and mode) must be read again, not
    taken for the end this process left, so the next line starts a new chain."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1)])
    log.write([_line(2)])
    with path.open("r+b") as f:
        f.truncate(0)
    log.write([_line(3)])
    lines = _chained(path)
    assert [x["seq"] for x in lines] == [3]
    assert lines[0]["prev"] is None


def test_a_log_cut_back_to_an_earlier_line_chains_to_that_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1)])
    first = path.stat().st_size
    log.write([_line(2)])
    os.truncate(path, first)
    log.write([_line(3)])
    assert [x["seq"] for x in _chained(path)] == [1, 3]


def test_a_log_moved_and_moved_back_is_the_same_file(tmp_path: Path) -> None:
    """Same device and inode again: the kept descriptor is still the log's."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write([_line(1)])
    path.rename(tmp_path / "away.jsonl")
    (tmp_path / "away.jsonl").rename(path)
    log.write([_line(2)])
    assert [x["seq"] for x in _chained(path)] == [1, 2]
