"""The hostile-gene suite run by an unprivileged user.

Root and an ordinary user take different kernel paths: root holds
CAP_SYS_PTRACE, CAP_DAC_OVERRIDE and CAP_NET_RAW (a file it cannot open as
nobody it still could as root, were it not for Landlock), while an ordinary
user may only install a seccomp filter after ``no_new_privs``.  So the same
attack genes as :mod:`tests.containment.test_hostile` run through ``rotifer
agent run`` as ``nobody`` (``setpriv --reuid --regid --clear-groups``), in a
project that user owns: every attack refused when contained; with
``--trust`` the representative ones (read the store, TCP connect, write
outside, ...) succeed, so the test bites as nobody too.

Only root can become nobody: as anyone else the test is skipped.  As root it
also needs nobody to reach this Python: one under /root (pyenv) is not, and
then the test is skipped -- failed under ``CI``, where ``.ci/run`` runs
``.ci/let-nobody-run-python``, which grants the least that lets it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.cli.helpers import clean_env, rotifer_command
from tests.containment.test_hostile import PYTHON_ONLY, open_listeners, project

#: What a trusted gene can do as nobody too.  Left out: what reaches the
#: parent (a trusted Python gene runs inside ``rotifer``, whose parent is this
#: root pytest process) -- a refusal an ordinary user gets from the kernel
#: whatever rotifer does.
SUCCEED_TRUSTED = ["read playground.db", "read audit.jsonl", "read agents/*.json",
                   "read another gene", "read ~/.ssh", "credentials in env",
                   "write audit.jsonl", "write outside", "tcp connect", "udp send",
                   "unix socket", "start a process", "inherited db descriptor"]


def reachable_by_others(path: Path) -> bool:
    """Every folder from / to ``path`` lets others in (nobody can run the venv)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def chown_tree(top: Path, uid: int, gid: int) -> None:
    os.chown(top, uid, gid)
    for folder, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


def cannot(reason: str) -> NoReturn:
    """Skip (as root, fail under CI: ``.ci/run`` makes it possible) saying why."""
    if os.environ.get("CI"):
        pytest.fail(reason + " (CI must run the suite as nobody too: .ci/run calls "
                    ".ci/let-nobody-run-python)")
    pytest.skip(reason)


@pytest.fixture
def nobody_dir() -> Iterator[tuple[Path, pwd.struct_passwd]]:
    """A folder nobody owns (pytest's tmp_path is root's alone, 0700)."""
    if os.geteuid() != 0:
        pytest.skip("only root can run the suite as another user")
    if shutil.which("setpriv") is None:
        cannot("setpriv (util-linux) is not installed")
    for path in (Path(sys.executable), Path(os.path.realpath(sys.executable)),
                 Path(__file__).resolve()):
        if not reachable_by_others(path.parent):
            cannot(f"{path.parent} is not reachable by other users (a Python under /root, "
                   "e.g. pyenv): nobody could not run rotifer; as root, "
                   ".ci/let-nobody-run-python lets it")
    user = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="rotifer-nobody-"))
    # Set up as root, whose contained genes run as nobody (agent create loads them).
    base.chmod(0o711)
    try:
        yield base, user
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("kind", ["python", "node"])
@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_the_attacks_as_an_unprivileged_user(
        nobody_dir: tuple[Path, pwd.struct_passwd], kind: str, trust: bool) -> None:
    base, user = nobody_dir
    root, env = project(base, kind, trust)
    with open_listeners(base) as listeners:
        chown_tree(base, user.pw_uid, user.pw_gid)
        value = {"root": str(root), "ssh": str(base / "home" / ".ssh" / "id_rsa"), **listeners}
        done = subprocess.run(
            ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
             *rotifer_command(), "agent", "run", "a", "--input", json.dumps(value)],
            cwd=root, env=clean_env(env), capture_output=True, text=True, timeout=120,
            check=False)
    assert done.returncode == 0, done
    report: dict[str, Any] = json.loads(done.stdout)
    attacks = [a for a in report if not (kind == "node" and a in PYTHON_ONLY)]
    if trust:
        wanted = [a for a in SUCCEED_TRUSTED if a in attacks]
        assert {a: report[a] for a in wanted} == dict.fromkeys(wanted, "ok"), report
        assert (root / "pwned").stat().st_uid == user.pw_uid  # it really ran as nobody
        return
    assert "runs uncontained" not in done.stderr
    assert not [a for a in attacks if report[a] == "ok"], report
    assert not (root / "pwned").exists()
    assert not (root / ".rotifer" / "audit.jsonl.pwned").exists()
