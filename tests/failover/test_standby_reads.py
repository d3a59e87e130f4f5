"""Reading a hot standby: the deployer's view may, a gene's never.

A deployer who asks for a standby in the URL (``target_session_attrs=standby``
or ``prefer-standby``) gets its read-only commands and pages served there,
told how far behind it is; every change, and every gene, needs the primary.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, ManualClock, MemoryStore
from rotifer.memory.model import RetentionPolicy
from tests.pg_failover import PgPair

from .test_failover import _pair
from .worker import GENE

pytestmark = pytest.mark.postgres

DAY_US = 86_400 * 1_000_000


@pytest.fixture
def pair() -> Iterator[PgPair]:
    yield from _pair(sync=True)


def test_the_deployer_reads_a_standby_and_is_told_how_far_behind(
        pair: PgPair, tmp_path: Path) -> None:
    clock = ManualClock()
    primary = MemoryStore.open(tmp_path / ".rotifer", pair.url(), clock=clock)
    primary.create_agent("a")
    gene = primary.for_gene("a", GENE, "failover")
    gene.write_memory("kept", b"1", "CONTEXT")
    gene.write_memory("short", b"2", "CONTEXT", retention_policy=RetentionPolicy(1))
    assert not primary.backend.read_only and primary.replay_delay() is None

    later = ManualClock(clock.now_us() + 2 * DAY_US)  # "short" has expired by now
    pair.wait_replayed()  # else the standby may not have the schema yet: an open would refuse
    standby = MemoryStore.open(tmp_path / ".rotifer", pair.url(attrs="standby"), clock=later)
    assert standby.backend.read_only
    deadline = time.monotonic() + 30
    while not standby.has_agent("a") and time.monotonic() < deadline:
        time.sleep(0.05)  # synchronous_commit=on: flushed there, replayed soon after
    delay = standby.replay_delay()
    assert delay is not None and delay >= 0
    deployer = standby.deployer("a")
    while time.monotonic() < deadline and len(deployer.list()) < 1:
        time.sleep(0.05)
    # The expired entry is invisible and nothing tries to purge it on the standby.
    assert [e.key for e in deployer.list()] == ["kept"]
    entry = deployer.read("kept")
    assert entry is not None and entry.value == b"1"

    with pytest.raises(AgentMemoryError) as refused:
        standby.for_gene("a", GENE, "failover")
    assert refused.value.code is ErrorCode.STORAGE_ERROR
    assert "read-only standby" in str(refused.value)
    with pytest.raises(AgentMemoryError) as change:
        deployer.delete_key("kept")
    assert change.value.code is ErrorCode.STORAGE_ERROR
    assert "read-only standby" in str(change.value)

    # The primary purges what expired on its next call; the standby follows.
    later_primary = MemoryStore.open(tmp_path / ".rotifer", pair.url(), clock=later)
    assert [e.key for e in later_primary.deployer("a").list()] == ["kept"]
    for store in (later_primary, standby, primary):
        store.close()


def test_the_cli_lists_from_a_standby_says_so_and_runs_genes_on_the_primary_only(
        pair: PgPair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ROTIFER_MEMORY_URL`` asking for a standby: `agent memory list` reads it
    and says how far behind it is; `agent run` is refused (a gene must read what
    it wrote); the primary's URL runs it."""
    from tests.cli.helpers import (
        add_gene,
        init_project,
        ok_process,
        refused_process,
        run_process,
        wrap,
    )

    root = init_project(tmp_path / "proj")
    add_gene(root, "keeper", "def express(input, ctx):\n"
                            "    ctx.memory.write_memory('k', b'v', 'CONTEXT')\n"
                            "    return {}\n")
    wrap(root, "keeper")
    primary = {"ROTIFER_MEMORY_URL": pair.url()}
    standby = {"ROTIFER_MEMORY_URL": pair.url(attrs="standby")}
    ok_process(root, "agent", "create", "bot", "--genes", "keeper", env=primary)
    ok_process(root, "agent", "run", "bot", "--input", "{}", env=primary)
    deadline = time.monotonic() + 30
    while True:
        done = run_process(root, "agent", "memory", "list", "bot", env=standby)
        if (done.returncode == 0 and "k " in done.stdout) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert done.returncode == 0, done.stderr
    assert "CONTEXT" in done.stdout
    assert "note: reading a hot standby" in done.stderr
    assert "note: reading a hot standby" not in run_process(
        root, "agent", "memory", "list", "bot", env=primary).stderr
    # The other read-only commands read the standby too.
    assert "bot" in ok_process(root, "agent", "list", env=standby)
    assert "keeper" in ok_process(root, "agent", "show", "bot", env=standby)
    assert "write" in ok_process(root, "agent", "audit", "show", "bot", env=standby)
    line = refused_process(root, "MEMORY_STORAGE_ERROR", "agent", "run", "bot", "--input", "{}",
                           env=standby)
    assert "read-only standby" in line and "genes run on the primary only" in line

    # The console the deployer starts with the standby's URL says so on the agent page.
    from rotifer.agents.project import Project
    from tests.console.helpers import Served

    for env, shown in ((standby, True), (primary, False)):
        monkeypatch.setenv("ROTIFER_MEMORY_URL", env["ROTIFER_MEMORY_URL"])
        served = Served(Project(root))
        try:
            page = served.get("/agents/bot")
        finally:
            served.stop()
        assert page.status == 200 and "CONTEXT" in page.text
        assert ('id="standby"' in page.text) is shown


def test_a_standby_that_has_not_replayed_the_schema_yet_says_so(
        pair: PgPair, tmp_path: Path) -> None:
    """The primary made rotifer's schema, the standby has not replayed it yet (its
    replay paused, so this is no race): opening the standby says the schema is not
    there yet and what to do (wait, or open the primary) -- not that changes need
    the primary, which is no help to a reader.  Once replayed, the open works."""
    standby_node = pair.node(pair.standby)
    standby_node.sql("SELECT pg_wal_replay_pause()")
    try:
        deadline = time.monotonic() + 30
        while standby_node.sql("SELECT pg_get_wal_replay_pause_state()") != [("paused",)]:
            assert time.monotonic() < deadline, "the standby's replay did not pause"
            time.sleep(0.05)
        MemoryStore.open(tmp_path / ".rotifer", pair.url()).close()  # makes the schema
        with pytest.raises(AgentMemoryError) as refused:
            MemoryStore.open(tmp_path / ".rotifer", pair.url(attrs="standby"))
        message = str(refused.value)
        assert refused.value.code is ErrorCode.STORAGE_ERROR
        assert "schema" in message and "not replayed" in message, message
        assert "wait" in message and "primary" in message, message
        assert "changes need the primary" not in message, message
    finally:
        standby_node.sql("SELECT pg_wal_replay_resume()")
    pair.wait_replayed()
    standby = MemoryStore.open(tmp_path / ".rotifer", pair.url(attrs="standby"))
    assert standby.backend.read_only
    standby.close()
