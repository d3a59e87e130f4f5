"""``rotifer agent delete``: it says what goes and asks (or ``--yes``), removes
every entry audited as the deployer and the spec last, can be run again after
an interrupt, and frees the name of a memory whose spec is gone.  And the
advice of every refusal about a memory in the way is a command that works:
the tests run the command the message names.  Real subprocesses throughout."""

from __future__ import annotations

import json
import random
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rotifer.memory import MemoryStore

from .helpers import (
    audit,
    clean_env,
    last_line,
    rotifer_command,
    spec_path,
    store_agents,
)
from .helpers import (
    ok_here as ok,
)
from .helpers import (
    refused_here as refused,
)
from .test_transfer_cli import KEYS, WRITES, make_project

FILLER = '''
def express(input, ctx):
    for i in range(input["n"]):
        ctx.memory.write_memory("fill/%05d" % i, b"v" * 10, ("PREFERENCE", "CONTEXT")[i % 2])
    return input["n"]
'''


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """Agent ``bot`` with one entry per category (110 bytes of keys and values)."""
    root = make_project(tmp_path / "proj")
    ok(root, "agent", "create", "bot", "--genes", "memo")
    ok(root, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES}))
    return root


def advice(stderr: str) -> list[str]:
    """The commands a refusal's last line names (between backticks) that remove something."""
    return [shlex.split(cmd) for cmd in re.findall(r"`(rotifer agent delete [^`]*)`",
                                                   last_line(stderr))]


def test_delete_asks_and_a_no_or_no_answer_keeps_everything(proj: Path) -> None:
    for answer in ("n\n", "", "whatever\n"):
        err = refused(proj, "NOT_CONFIRMED", "agent", "delete", "bot", stdin=answer)
        question = err.splitlines()[0]
        assert "Delete agent 'bot': 4 entries (110 bytes) in sqlite:" in question, question
        assert str(spec_path(proj, "bot")) in question and question.rstrip().endswith("[y/N]")
        assert spec_path(proj, "bot").is_file() and "bot" in store_agents(proj)


def test_delete_removes_every_entry_audited_then_the_spec(proj: Path) -> None:
    before = len(audit(proj))
    out = ok(proj, "agent", "delete", "bot", stdin="y\n")
    assert "Deleted agent 'bot'" in out and "4 entries (110 bytes)" in out
    assert not spec_path(proj, "bot").exists()
    assert "bot" not in store_agents(proj)
    lines = audit(proj)[before:]
    deleted = sorted(line["key"] for line in lines if line["action"] == "deployer_delete")
    assert deleted == sorted(KEYS)
    assert [line["action"] for line in lines][-1] == "drop_agent"
    assert {line["actor"] for line in lines} == {"deployer"}
    refused(proj, "AGENT_NOT_FOUND", "agent", "delete", "bot", "--yes")
    # The name is free again.
    ok(proj, "agent", "create", "bot", "--genes", "memo")


def test_a_memory_whose_spec_was_deleted_no_longer_blocks_its_name(proj: Path) -> None:
    spec_path(proj, "bot").unlink()
    err = refused(proj, "AGENT_EXISTS", "agent", "create", "bot", "--genes", "memo")
    [command] = advice(err)
    assert command == ["rotifer", "agent", "delete", "bot"]
    out = ok(proj, *command[1:], "--yes")
    assert "Deleted the memory of agent 'bot': 4 entries" in out
    ok(proj, "agent", "create", "bot", "--genes", "memo")
    assert json.loads(ok(proj, "agent", "memory", "list", "bot", "--json"))["entries"] == []


def test_the_advice_of_an_import_in_the_way_works(proj: Path, tmp_path: Path) -> None:
    ok(proj, "agent", "export", "bot", str(tmp_path / "bot.export"), "--keep-cache")
    err = refused(proj, "MEMORY_INVALID_INPUT", "agent", "import", str(tmp_path / "bot.export"))
    assert "never merges" in last_line(err)
    [command] = advice(err)
    assert command == ["rotifer", "agent", "delete", "bot", "--memory-only"]
    ok(proj, *command[1:], "--yes")
    assert spec_path(proj, "bot").is_file()  # --memory-only keeps the spec
    ok(proj, "agent", "import", str(tmp_path / "bot.export"))
    assert len(json.loads(ok(proj, "agent", "memory", "list", "bot", "--json"))["entries"]) == 4


def test_the_advice_of_a_move_in_the_way_works(proj: Path, tmp_path: Path) -> None:
    dest = f"sqlite:{tmp_path / 'dest.db'}"
    with MemoryStore.open(tmp_path / "dest-rot", dest) as store:
        store.create_agent("bot")
    err = refused(proj, "MEMORY_INVALID_INPUT", "agent", "move", "bot", "--to", dest)
    [command] = advice(err)
    assert command[:4] == ["rotifer", "agent", "delete", "bot"] and "--store" in command
    ok(proj, *command[1:], "--yes")
    assert "bot" in store_agents(proj)  # only the memory in the way went
    ok(proj, "agent", "move", "bot", "--to", dest)
    assert "bot" in store_agents(proj, dest) and "bot" not in store_agents(proj)


def test_a_move_to_the_store_the_agent_is_in_refuses_without_deletion_advice(
        proj: Path, tmp_path: Path) -> None:
    here = f"sqlite:{proj / '.rotifer' / 'playground.db'}"
    for to in (here, "sqlite:.rotifer/playground.db"):
        line = last_line(refused(proj, "MEMORY_INVALID_INPUT", "agent", "move", "bot",
                                 "--to", to))
        assert "already uses" in line and "nothing to move" in line, line
        assert "delete" not in line and "remove" not in line, line
    dest = f"sqlite:{tmp_path / 'dest.db'}"
    ok(proj, "agent", "move", "bot", "--to", dest)
    line = last_line(refused(proj, "MEMORY_INVALID_INPUT", "agent", "move", "bot", "--to", dest))
    assert "already uses" in line and "delete" not in line, line
    assert "bot" in store_agents(proj, dest)


def _delete_interrupted(root: Path, name: str, delay: float) -> int:
    proc = subprocess.Popen([*rotifer_command(), "agent", "delete", name, "--yes"], cwd=root,
                            env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)  # (what Ctrl-C prints: test_interrupt_startup_cli.py)
    return proc.returncode


@pytest.mark.slow  # ~17 s: four agents of 1,400 entries
def test_an_interrupted_delete_keeps_the_spec_until_the_end_and_can_be_rerun(
        tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    (root / "genes" / "memo" / "gene.py").write_text(FILLER)
    ok(root, "wrap", "memo")
    n = 1400  # three transactions of entries, then the agent, then the spec
    names = [f"a{i}" for i in range(4)]
    for name in names:
        ok(root, "agent", "create", name, "--genes", "memo")
        ok(root, "agent", "run", name, "--input", json.dumps({"n": n}))
    started = time.monotonic()
    ok(root, "agent", "delete", names[0], "--yes")
    whole = time.monotonic() - started
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for i, name in enumerate(names[1:]):
        delay = whole * (i + rng.random()) / 3  # one moment in each third of a delete
        status = _delete_interrupted(root, name, delay)
        assert status in (0, 130, -signal.SIGINT), (seed, delay, status)
        if name in store_agents(root):  # the memory is still (partly) there: so is the spec
            assert spec_path(root, name).is_file(), (seed, delay)
        if spec_path(root, name).exists() or name in store_agents(root):
            ok(root, "agent", "delete", name, "--yes")  # run again: it finishes the job
        assert not spec_path(root, name).exists() and name not in store_agents(root)
        removed = {line["key"] for line in audit(root)
                   if line["agent"] == name and line["action"] == "deployer_delete"}
        assert len(removed) == n, (seed, delay)  # every entry's removal is in the log
    refused(root, "AGENT_NOT_FOUND", "agent", "delete", names[1], "--yes")
