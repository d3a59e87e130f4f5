"""A throwaway PostgreSQL server for the benchmarks, on 127.0.0.1 only.

The test suite's server (:class:`tests.pg_servers.PgServer`: ``initdb`` in a
temporary directory, trust authentication for loopback only, ``fsync=off``
and ``synchronous_commit=off``, run as ``nobody`` when we are root), with what
the benchmarks add: a ``with`` block, the server's version for the tables, and
one fresh database per store compared.
"""

from __future__ import annotations

import psycopg

from tests.pg_servers import PgServer
from tests.pg_servers import find_pg_bindir as find_bindir

__all__ = ["MISSING", "Server", "find_bindir"]

MISSING = ("PostgreSQL skipped: no server binaries (initdb, pg_ctl, postgres) on PATH or "
           "under /usr/lib/postgresql/*/bin")


class Server(PgServer):
    """``with Server(bindir) as s: s.database("name")``; stopped and deleted on exit."""

    version = "?"

    def __enter__(self) -> Server:
        try:
            self.start()
            with psycopg.connect(self.url("postgres")) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                self.version = str(row[0]).split()[0] if row else "?"
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def database(self, name: str) -> str:
        """A new, empty database; its URL."""
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)
