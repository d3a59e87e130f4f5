"""The store is private (issue 30, finding 12).

With the usual umask (022) ``.rotifer/`` used to be 0755 and ``playground.db``
0644: any local user read every agent's memory without running a gene.
Whatever the umask, everything rotifer makes there is now 0700 (folders) and
0600 (files), and opening a store others can reach tightens it, saying so
once.  As root, the attack itself: the user ``nobody`` reads the database of a
store opened up by hand, and cannot once any rotifer command has opened it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotifer.memory import MemoryStore
from tests.cli.helpers import add_gene, init_project, ok, ok_process, run_process, wrap

GENE = ("def express(input, ctx):\n"
        "    ctx.memory.write_memory('formatter/k', b'secret', 'CACHE')\n    return 1\n")


@pytest.fixture
def loose_umask() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def modes(dot: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(dot.stat().st_mode)}
    for path in dot.rglob("*"):
        if not path.is_symlink():
            found[str(path.relative_to(dot))] = stat.S_IMODE(path.stat().st_mode)
    return found


def open_up(dot: Path) -> None:
    for path in [dot, *dot.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def make_store(root: Path) -> Path:
    init_project(root)
    add_gene(root, "g", GENE)
    wrap(root, "g")
    ok(root, "agent", "create", "a", "--genes", "g")
    ok(root, "agent", "run", "a", "--input", "0", env={"ROTIFER_TELEMETRY": "1"})
    return root / ".rotifer"


def test_everything_rotifer_makes_is_private_whatever_the_umask(
        tmp_path: Path, loose_umask: None) -> None:
    dot = make_store(tmp_path / "proj")
    ok(dot.parent, "agent", "audit", "verify", "a")
    found = modes(dot)
    for name in ("playground.db", "audit.jsonl", "genes.json",
                 "agents/a.json"):
        assert name in found, sorted(found)
    with MemoryStore.open(dot) as store:  # -wal and -shm exist while a store is open
        store.create_agent("b", 1 << 20)
        found = modes(dot)
    assert {"playground.db-wal", "playground.db-shm"} <= set(found), sorted(found)
    wrong = {n: oct(m) for n, m in found.items()
             if m != (0o700 if (dot / n).is_dir() else 0o600)}
    assert not wrong, wrong


def test_an_open_store_is_tightened_once_and_doctor_reports_it(
        tmp_path: Path, loose_umask: None) -> None:
    dot = make_store(tmp_path / "proj")
    open_up(dot)
    doctor = ok_process(dot.parent, "doctor")
    assert f"store permissions: {dot} is readable by others" in doctor, doctor
    assert modes(dot)["."] == 0o755  # doctor reports, never changes
    done = run_process(dot.parent, "agent", "list")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("was readable by other users; made it private") == 1, done.stderr
    assert set(modes(dot).values()) <= {0o700, 0o600}, modes(dot)
    again = run_process(dot.parent, "agent", "list")
    assert "made it private" not in again.stderr
    assert "is private (0700, files 0600)" in ok_process(dot.parent, "doctor")


def as_nobody_can_read(path: Path) -> bool:
    done = subprocess.run(["cat", str(path)], capture_output=True, check=False, timeout=30,
                          user="nobody", group="nogroup" if _has_group("nogroup") else "nobody")
    return done.returncode == 0 and b"SQLite format 3" in done.stdout


def _has_group(name: str) -> bool:
    import grp

    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_reads_an_open_store_and_not_a_private_one(loose_umask: None) -> None:
    base = Path(tempfile.mkdtemp(prefix="rotifer-private-", dir="/tmp"))
    try:
        base.chmod(0o755)  # others may pass through, as a home folder often lets them
        dot = make_store(base / "proj")
        (base / "proj").chmod(0o755)
        assert not as_nobody_can_read(dot / "playground.db")
        open_up(dot)  # the store as the old umask-made one was
        assert as_nobody_can_read(dot / "playground.db")  # the attack, protection off
        ok(dot.parent, "agent", "list")
        assert not as_nobody_can_read(dot / "playground.db")
    finally:
        shutil.rmtree(base)
