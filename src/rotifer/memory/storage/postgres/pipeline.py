"""Statements sent in one round trip, straight through libpq.

A round trip of the store is a few statements the server runs in order and
answers at once (``BEGIN``, the agent's lock and its lookup; the folded writes
and ``COMMIT``).  psycopg's own pipeline mode sends them right, but does per
statement what a round trip needs once: a cursor, a query conversion and a
flush of the socket each -- so the server woke up for every statement, and
psycopg's Python around them was most of a write's client CPU (issue 33:
half of it; the server's CPU per write fell by a third with one flush).

:func:`pipelined` does what psycopg does, on the same connection, with its
own parts: the parameters dumped by psycopg's adapters (a
:class:`~psycopg.adapt.Transformer`, as ``execute(..., binary=True)`` does:
the same types and formats), each statement an extended-protocol Bind and
Execute (and a Parse the first time), all of them written with **one
flush** and one ``Sync``, the results read back in order and the rows loaded
by the same adapters.  A statement that fails raises the error psycopg would
(:func:`psycopg.errors.error_from_result`), after the rest of the round trip
was drained: the connection is idle again, its transaction aborted, as after a
failed psycopg pipeline.

A round trip ends with a ``Sync`` (which commits an implicit transaction and
makes the connection idle again) or, with ``sync=False``, with a ``Flush``:
the server answers what it has run and waits for more, **inside the same
implicit transaction** -- the extended protocol's statements up to a ``Sync``
are one transaction without any ``BEGIN``.  A write uses that (see
:mod:`.transaction`): its first round trip ends with a ``Flush``, its last
with the ``Sync`` that commits, so it sends neither ``BEGIN`` nor ``COMMIT``.
Between the two the connection stays in pipeline mode, so nothing else can
take it for idle (:meth:`~.connection.Connections.give_back` discards a
connection left so).

Prepared statements follow psycopg's rule and limit on the connection: a
statement is prepared on its ``prepare_threshold``-th use (5), at most
:data:`MAX_PREPARED` per connection, and never when the connection was made
without (``prepare_threshold=None``: behind a pooler, where the next
transaction may run on another server session).  Their names are the store's
own (``_rotifer_N``), apart from psycopg's.
"""

from __future__ import annotations

import re
import select
import weakref
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Final

import psycopg
from psycopg import abc, pq
from psycopg.adapt import PyFormat, Transformer

Connection = psycopg.Connection[tuple[Any, ...]]
Params = tuple[Any, ...] | None
Statement = tuple[str, Params]

#: Named prepared statements kept per connection (psycopg's ``prepared_max``).
MAX_PREPARED: Final = 100
#: Statement texts counted per connection before the counts start again.
MAX_COUNTED: Final = 1000

_BINARY: Final = pq.Format.BINARY
_OK: Final = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY)
_ERROR: Final = (pq.ExecStatus.FATAL_ERROR, pq.ExecStatus.PIPELINE_ABORTED)
_SYNC: Final = pq.ExecStatus.PIPELINE_SYNC
_SEVERITY: Final = pq.DiagnosticField.SEVERITY_NONLOCALIZED
#: Severities with which the server ends the session.
_SESSION_ENDS: Final = (b"FATAL", b"PANIC")
_PLACEHOLDER: Final = re.compile(r"%(.)")


class Result:
    """One statement's answer: its rows (loaded on demand) and ``rowcount``,
    as a psycopg cursor gives them."""

    __slots__ = ("_loader", "_next", "_res", "rowcount")

    def __init__(self, res: pq.abc.PGresult, loader: abc.Transformer) -> None:
        self._res = res
        self._loader = loader
        self._next = 0
        tuples = res.command_tuples
        self.rowcount: int = -1 if tuples is None else tuples

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._next >= self._res.ntuples:
            return None
        self._loader.set_pgresult(self._res)
        row: tuple[Any, ...] = self._loader.load_row(self._next, tuple)
        self._next += 1
        return row

    def fetchall(self) -> list[tuple[Any, ...]]:
        end = self._res.ntuples
        if self._next >= end:
            return []
        self._loader.set_pgresult(self._res)
        rows: list[tuple[Any, ...]] = self._loader.load_rows(self._next, end, tuple)
        self._next = end
        return rows


class _Session:
    """What one connection's server session has: its prepared statements, how
    often each other statement ran, and the adapters of the connection."""

    __slots__ = ("counts", "made", "prepared", "threshold", "transformer")

    def __init__(self, conn: Connection) -> None:
        self.transformer: abc.Transformer = Transformer(conn)
        self.threshold: int | None = conn.prepare_threshold
        self.prepared: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
        self.counts: dict[tuple[bytes, tuple[int, ...]], int] = {}
        self.made = 0  # names given out, so none is given twice


_SESSIONS: weakref.WeakKeyDictionary[Connection, _Session] = weakref.WeakKeyDictionary()


@lru_cache(maxsize=256)
def _to_pg(sql: str) -> bytes:
    """``%s`` placeholders as ``$1``, ``$2``, ...; ``%%`` as ``%``."""
    n = 0

    def number(m: re.Match[str]) -> str:
        nonlocal n
        if m[1] == "%":
            return "%"
        if m[1] != "s":
            raise ValueError(f"only %s placeholders: {sql[:60]!r}")
        n += 1
        return f"${n}"

    return _PLACEHOLDER.sub(number, sql).encode()


def pipelined(conn: Connection, statements: Sequence[Statement], *, sync: bool = True
              ) -> list[Result]:
    """Send ``statements`` in order and wait once: one round trip (one ``Sync``,
    or with ``sync=False`` one ``Flush``), written to the socket at once.

    The first that fails raises (the server skips the rest), and an open
    transaction is then aborted: nothing after the failure ran.  After a
    ``Flush`` the connection is still in pipeline mode and its transaction
    open (aborted, after a failure) until a round trip ends with a ``Sync``."""
    session = _SESSIONS.get(conn)
    if session is None:
        session = _SESSIONS[conn] = _Session(conn)
    pgconn = conn.pgconn
    tx = session.transformer
    # Everything that may fail on the client (a placeholder, a value psycopg
    # cannot adapt) before the first message is queued.
    dumped: list[tuple[bytes, Sequence[abc.Buffer | None] | None, tuple[int, ...],
                       Sequence[pq.Format] | None]] = []
    for sql, params in statements:
        query = _to_pg(sql)
        if params:
            dumped.append((query, tx.dump_sequence(params, [PyFormat.AUTO] * len(params)),
                           tuple(tx.types or ()), tx.formats))
        else:
            dumped.append((query, None, (), None))
    pgconn.enter_pipeline_mode()
    # Per result, in order: the statement it answers (-1: a Parse) and, for a
    # Parse, the key it prepares.
    expected: list[tuple[int, tuple[bytes, tuple[int, ...]] | None]] = []
    for i, (query, params_out, types, formats) in enumerate(dumped):
        key = (query, types)
        name = session.prepared.get(key)
        if name is None and session.threshold is not None:
            count = session.counts.get(key, 0) + 1
            if count >= session.threshold and len(session.prepared) < MAX_PREPARED:
                name = f"_rotifer_{session.made}".encode()
                session.made += 1
                pgconn.send_prepare(name, query, types)
                expected.append((-1, key))
                session.counts.pop(key, None)
                session.prepared[key] = name  # undone below unless the server says OK
            else:
                if len(session.counts) >= MAX_COUNTED:
                    session.counts.clear()
                session.counts[key] = count
        if name is not None:
            pgconn.send_query_prepared(name, params_out, formats, _BINARY)
        else:
            pgconn.send_query_params(query, params_out, types or None, formats, _BINARY)
        expected.append((i, None))
    if sync:
        pgconn.pipeline_sync()
    else:
        pgconn.send_flush_request()
    _send(pgconn)
    return _receive(conn, session, expected, sync)


def _send(pgconn: pq.abc.PGconn) -> None:
    """Write what libpq holds (one flush, unless the socket is full)."""
    while pgconn.flush():  # 1: more to send; read meanwhile, or the server may block
        readable, _, _ = select.select([pgconn.socket], [pgconn.socket], [])
        if readable:
            pgconn.consume_input()


def _receive(conn: Connection, session: _Session,
             expected: list[tuple[int, tuple[bytes, tuple[int, ...]] | None]],
             sync: bool = True) -> list[Result]:
    """Each statement's result, in order, up to the ``Sync`` (or, without one,
    the end of the last statement's results); the first error raised once all
    of them are in."""
    pgconn = conn.pgconn
    fd = pgconn.socket
    results: list[Result] = []
    error: pq.abc.PGresult | None = None
    at = 0
    nones = 0  # None: the end of a statement's results; two in a row: nothing yet
    pgconn.consume_input()
    while True:
        # get_result() only when libpq holds a whole result: called busy, it
        # waits for the server itself, holding the GIL -- no other thread of
        # the process (the watchdog that would cut a frozen server off) runs.
        while pgconn.is_busy():
            select.select([fd], [], [])
            pgconn.consume_input()
        if nones > 1:
            select.select([fd], [], [], 0.05)
            pgconn.consume_input()
            if pgconn.is_busy():
                continue
        res = pgconn.get_result()
        if res is None:
            if pgconn.status == pq.ConnStatus.BAD:
                raise _lost(pgconn, error)
            if not sync and at == len(expected):
                break  # the last statement's results have ended: no Sync to wait for
            nones += 1
            continue
        nones = 0
        status = res.status
        if status == _SYNC:
            break
        if at == len(expected):
            # An answer to nothing this round trip sent: the connection's
            # protocol state is lost (seen behind pgbouncer while its server was
            # killed), and every later answer would be misread.
            conn.close()
            raise psycopg.OperationalError(
                "the server sent more answers than the round trip had statements; "
                "the connection was closed")
        which, prepares = expected[at]
        at += 1
        if status in _ERROR:
            if prepares is not None:  # not made: made again next time
                del session.prepared[prepares]
                session.counts[prepares] = (session.threshold or 1) - 1
            if error is None and status == pq.ExecStatus.FATAL_ERROR:
                error = res
            continue
        if status not in _OK:
            raise psycopg.NotSupportedError(
                f"unexpected result in a pipeline: {pq.ExecStatus(status).name}")
        if which >= 0:
            results.append(Result(res, session.transformer))
    if sync:
        pgconn.exit_pipeline_mode()
    if error is not None:
        exc = psycopg.errors.error_from_result(error, encoding=conn.info.encoding)
        if error.error_field(_SEVERITY) in _SESSION_ENDS:
            # The server ends the session (e.g. pg_terminate_backend): after a
            # Flush the answer can come before the connection's end is read, so
            # it is closed here, and beginning a change again takes another.
            conn.close()
        raise exc
    return results


def _lost(pgconn: pq.abc.PGconn, error: pq.abc.PGresult | None) -> psycopg.Error:
    """The connection ended under the round trip (the server went away, or the
    watchdog cut it off): the server's last error if it sent one (e.g.
    ``AdminShutdown``), else psycopg's ``OperationalError`` with libpq's word."""
    if error is not None:
        return psycopg.errors.error_from_result(error, encoding="utf-8")
    return psycopg.OperationalError(pgconn.get_error_message("utf-8")
                                    or "the server closed the connection")
