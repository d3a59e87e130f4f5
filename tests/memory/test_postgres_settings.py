"""The rotifer_* parameters of a PostgreSQL memory URL (no server needed)."""

from __future__ import annotations

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode
from rotifer.memory.storage.postgres.settings import POOL_SIZE, TIMEOUT_S, parse, split_url


def test_rotifer_parameters_are_taken_out_and_the_rest_kept() -> None:
    url = ("postgresql://u@h:5/d?sslmode=disable&rotifer_pooler=transaction"
           "&application_name=x&rotifer_schema=s%201&rotifer_timeout=2.5&rotifer_pool_size=3")
    assert split_url(url) == ("postgresql://u@h:5/d?sslmode=disable&application_name=x",
                              {"rotifer_pooler": "transaction", "rotifer_schema": "s 1",
                               "rotifer_timeout": "2.5", "rotifer_pool_size": "3"})
    settings = parse(url)
    assert (settings.pooler, settings.schema, settings.timeout_s, settings.pool_size) == (
        "transaction", "s 1", 2.5, 3)
    assert "rotifer_" not in settings.conninfo
    assert "sslmode=disable" in settings.conninfo and "application_name=x" in settings.conninfo
    assert not settings.session_state
    assert settings.settings_sql("LOCAL ") == (
        'SET LOCAL statement_timeout = 2500; SET LOCAL lock_timeout = 2500; '
        'SET LOCAL search_path = "s 1"')
    assert settings.local_settings_sql() == (
        "SELECT set_config('statement_timeout', '2500', true), "
        "set_config('lock_timeout', '2500', true), set_config('search_path', '\"s 1\"', true)")
    assert parse(url.replace("s%201", "it%27s")).local_settings_sql().endswith(
        "set_config('search_path', '\"it''s\"', true)")


def test_defaults() -> None:
    settings = parse("postgresql://u@h/d")
    assert (settings.pooler, settings.schema, settings.timeout_s, settings.pool_size) == (
        "none", None, TIMEOUT_S, POOL_SIZE)
    assert settings.session_state
    for part in ("connect_timeout=30", "tcp_user_timeout=30000", "keepalives=1"):
        assert part in settings.conninfo
    # The URL's own connection parameters win over ours.
    assert "connect_timeout=4" in parse("postgresql://u@h/d?connect_timeout=4").conninfo


@pytest.mark.parametrize("query", [
    "rotifer_pooler=statement", "rotifer_timeout=0", "rotifer_timeout=-1",
    "rotifer_timeout=soon", "rotifer_timeout=nan", "rotifer_pool_size=0",
    "rotifer_pool_size=2.5", "rotifer_nosuch=1", "rotifer_schema=",
])
def test_bad_rotifer_parameters_are_storage_errors(query: str) -> None:
    with pytest.raises(AgentMemoryError) as info:
        parse(f"postgresql://u:secret@h/d?{query}")
    assert info.value.code is ErrorCode.STORAGE_ERROR
    assert "secret" not in str(info.value)


def test_a_multi_host_url_is_shown_host_by_host_without_its_password() -> None:
    """libpq's multi-host form (a primary and its standbys) was shown with its
    hosts and ports jumbled (``127.0.0.1,127.0.0.1:P1,P2``)."""
    from rotifer.memory.storage.postgres import describe_url
    from rotifer.memory.storage.postgres.settings import parse

    url = "postgresql://u:secret@10.0.0.1:5433,10.0.0.2:5434/db?target_session_attrs=read-write"
    assert describe_url(url) == "10.0.0.1:5433,10.0.0.2:5434/db"
    assert "secret" not in describe_url(url)
    assert describe_url("postgresql://u@h1,h2:6000/db") == "h1:5432,h2:6000/db"
    assert describe_url("postgresql://u@h1,h2/db?port=7000") == "h1:7000,h2:7000/db"
    assert parse(url).awaits_failover
    assert parse("postgresql://u@h:1/db?target_session_attrs=read-write").awaits_failover
    assert not parse("postgresql://u@h:1/db").awaits_failover


@pytest.mark.postgres
def test_a_stale_sync_warning_never_marks_a_later_commit(pg_fresh_url: str) -> None:
    """The WARNING that a COMMIT's wait for its synchronous standby was cancelled
    belongs to the statement it came with: a connection handed back and taken
    again starts with no such mark (else the next, confirmed COMMIT on it would
    be reported as unconfirmed)."""
    import time as _time

    from rotifer.memory.storage.postgres.connection import Connections
    from rotifer.memory.storage.postgres.health import unconfirmed

    pool = Connections.acquire(pg_fresh_url)
    try:
        conn = pool.take(_time.monotonic() + 30)
        conn.execute("DO $$ BEGIN RAISE WARNING 'canceling wait for synchronous "
                     "replication due to user request'; END $$")
        pool.give_back(conn)
        again = pool.take(_time.monotonic() + 30)
        assert again is conn  # the pool's idle connection, reused
        assert not unconfirmed(again)
        again.execute("DO $$ BEGIN RAISE WARNING 'canceling wait for synchronous "
                      "replication due to user request'; END $$")
        assert unconfirmed(again)  # noted when it comes with the statement just run
        pool.give_back(again)
    finally:
        pool.release()
