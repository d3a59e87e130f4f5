"""The failover register test through pg_auto_failover: nobody promotes by hand.

A pg_auto_failover monitor and two data nodes on loopback
(:mod:`tests.pg_autofailover`), the second a synchronous standby as
pg_auto_failover sets it up by default; worker processes write and delete
through one multi-host URL (:mod:`tests.failover.register`) while the
primary's machine dies (its keeper and its PostgreSQL SIGKILLed) at random
moments.  The monitor notices and has the other node's keeper promote it; the
dead node's keeper, started again, rejoins as the standby.  Afterwards every
acknowledged change is there, every value there was written by some call, and
``audit verify`` passes on every agent.

Each failover takes seconds and the formation's start longer, so the test is
in the slow set (``make test-slow``).  It needs ``pg_autoctl`` and the
monitor's extension (Debian's ``pg-auto-failover-cli`` and
``postgresql-<major>-auto-failover``): skipped without them, failed under CI.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_autofailover import AutoFailover, find_pg_autoctl
from tests.pg_servers import find_pg_bindir

from .register import run_register

pytestmark = pytest.mark.postgres

#: As many as the hand-promoted slow test (each takes the monitor's detection,
#: the promotion and the dead node's rejoin: about 15-20 s here).
FAILOVERS = 10


def _missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI must run the pg_auto_failover test)")
    pytest.skip(what)


@pytest.fixture
def formation() -> Iterator[AutoFailover]:
    if os.environ.get("ROTIFER_TEST_PG_URL"):
        pytest.skip("needs the PostgreSQL binaries to start servers of its own")
    bindir = find_pg_bindir()
    if bindir is None:
        _missing("no PostgreSQL server binaries")
        return
    if find_pg_autoctl(bindir) is None:
        _missing(f"no pg_autoctl, or no pgautofailover extension for PostgreSQL {bindir.parent.name}")
        return
    cluster = AutoFailover(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.slow
def test_register_across_pg_auto_failover_failovers(
        formation: AutoFailover, tmp_path: Path) -> None:
    # The URL the test uses is the one pg_auto_failover hands out, with the
    # user named (and without its sslmode=prefer: no TLS on loopback here).
    handed_out = formation.show_uri()
    assert handed_out.split("://", 1)[1].startswith(formation.url().split("@", 1)[1])
    figures = run_register(formation, tmp_path, failovers=FAILOVERS)
    print("pg_auto_failover register:", figures,
          "promoted after (s):", [round(s, 1) for s in formation.promotion_seconds],
          "healthy again after (s):", [round(s, 1) for s in formation.recovery_seconds])
    assert figures["failovers"] == FAILOVERS and figures["acknowledged"] > 0
    # Each failover was a promotion (pg_auto_failover's: nothing here promotes).
    assert formation.timeline() == 1 + FAILOVERS
