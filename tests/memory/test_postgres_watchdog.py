"""The watchdog's thread wakes for every deadline, however it was armed.

Arming wakes the thread only when the new deadline comes before the one it
sleeps until (issue 33: it was woken on every call, a thread switch per
call).  So a deadline sooner than every other must wake it, and a later one
must still be kept when the thread wakes for a deadline that was disarmed
meanwhile.  Real connections to the test server, cut by the real thread; the
waits are generous bounds, not speed checks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from rotifer.memory.storage.postgres.watchdog import Watchdog

pytestmark = pytest.mark.postgres

Connection = psycopg.Connection[tuple[Any, ...]]
PATIENCE_S = 30.0


@pytest.fixture
def connections(pg_url: str) -> Iterator[list[Connection]]:
    conns = [psycopg.connect(pg_url, autocommit=True) for _ in range(3)]
    yield conns
    for conn in conns:
        conn.close()


def _cut_off(conn: Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


def _fired(watchdog: Watchdog, conn: Connection) -> bool:
    """Wait (up to :data:`PATIENCE_S`) for the watchdog to cut ``conn`` off."""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if id(conn) in watchdog._fired:
            return True
        time.sleep(0.02)
    return False


def test_a_sooner_deadline_wakes_the_thread(connections: list[Connection]) -> None:
    far, near, _ = connections
    watchdog = Watchdog()
    watchdog.arm(far, time.monotonic() + 3600)  # the thread sleeps for an hour
    time.sleep(0.1)
    watchdog.arm(near, time.monotonic() + 0.2)  # sooner: must wake it
    assert _fired(watchdog, near)
    assert watchdog.disarm(near) and _cut_off(near)
    assert not watchdog.disarm(far) and not _cut_off(far)


def test_a_later_deadline_is_kept_past_a_disarmed_one(connections: list[Connection]) -> None:
    first, second, _ = connections
    watchdog = Watchdog()
    watchdog.arm(first, time.monotonic() + 0.3)
    time.sleep(0.1)  # the thread sleeps until the first deadline
    assert not watchdog.disarm(first)
    watchdog.arm(second, time.monotonic() + 0.5)  # later: the thread is not woken now
    assert _fired(watchdog, second)
    assert watchdog.disarm(second) and _cut_off(second)
    assert not _cut_off(first)
