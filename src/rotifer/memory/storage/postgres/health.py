"""What a connection's state says, without a round trip: a commit its
synchronous standby did not confirm, a server that hung up on an idle
connection, a failure worth beginning again on another connection.

Apart from :mod:`.connection` (how connections are opened, pooled and handed
out), which asks these questions of every connection it hands out or takes
back, as the backend does of every commit and every failed begin.
"""

from __future__ import annotations

import select
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors as pg_errors

Connection = psycopg.Connection[tuple[Any, ...]]

#: Connections (by ``id``) whose last COMMIT stopped waiting for the
#: synchronous standby: the server says so in a WARNING and reports success.
UNCONFIRMED: set[int] = set()


def watch_sync_wait(conn_id: int) -> Callable[[psycopg.errors.Diagnostic], None]:
    """A notice handler that notes a COMMIT the synchronous standby never confirmed.

    When a COMMIT waiting for its synchronous standby is cancelled
    (``statement_timeout``, ``pg_cancel_backend``), PostgreSQL keeps the
    transaction, committed on the primary alone, and tells the client only in a
    WARNING ("canceling wait for synchronous replication ..."): a failover
    now would lose it.  Such a commit must not be reported as done."""
    def handler(diag: psycopg.errors.Diagnostic) -> None:
        if "synchronous replication" in (diag.message_primary or ""):
            UNCONFIRMED.add(conn_id)
    return handler


def unconfirmed(conn: Connection) -> bool:
    """Did ``conn``'s last COMMIT stop waiting for its synchronous standby?  (Clears it.)"""
    if id(conn) in UNCONFIRMED:
        UNCONFIRMED.discard(id(conn))
        return True
    return False


def poller_of(conn: Connection) -> select.poll:
    """A ``poll`` object watching ``conn``'s socket for input, made once per
    connection (a new one per take cost ~2,000 instructions)."""
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN)
    return poller


def hung_up(poller: select.poll) -> bool:
    """Has the server of an idle connection closed it (or said why it will)?

    An idle connection has nothing to read unless the server went away (EOF:
    it was killed, restarted, or a standby was promoted and the old primary is
    gone) or sent a last message before doing so.  One ``poll`` of the socket,
    no round trip: so the first call after a failover takes a new connection
    instead of failing on the dead one.  (A descriptor closed meanwhile answers
    POLLNVAL: hung up too.)"""
    try:
        return bool(poller.poll(0))
    except OSError:
        return True


def retryable(exc: psycopg.Error, conn: Connection) -> bool:
    """Worth another attempt at *beginning* a transaction?"""
    return isinstance(exc, pg_errors.TransactionRollback) or conn.broken or conn.closed
