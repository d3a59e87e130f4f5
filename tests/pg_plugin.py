"""The PostgreSQL and pgbouncer test plumbing, one pytest plugin for every test.

Real SQLite files and a real, throwaway PostgreSQL (and pgbouncer in front of
it).  ``tests/conftest.py`` registers this module (``pytest_plugins``), so any
test under tests/ asks for these fixtures by name -- no import, and one
session-wide server per pytest process (importing a session fixture into a
module would give that module a second one).  The classes and helpers
(``StoreFactory``, ``SchemaMaker``, ``PgServer``, ``ALL_BACKENDS``, ...) are
imported from here for type hints and parametrizing; ``tests.memory.conftest``
still answers for the old names.

Fixtures
--------

``backend`` -> ``str``
    Parametrized over ``"sqlite"`` and ``"postgres"`` (the second carries the
    ``postgres`` marker, so ``-m "not postgres"`` runs SQLite only).  A test that
    takes ``backend`` or ``store_factory`` runs once per backend.

``store_factory`` -> :class:`StoreFactory`
    ``store_factory(rotifer_dir: Path | None = None, *, clock: Clock | None = None,
    name: str = "main") -> MemoryStore``

    Opens a :class:`~rotifer.memory.MemoryStore` on this test's own database
    for the current ``backend``.  Every test starts with empty databases.
    ``name`` picks the database: calls with the same name (in one test) open
    the same database -- use that to reopen a store or to play a second worker
    -- and a new name gives a new, empty one (e.g. the other side of a move).
    ``rotifer_dir`` holds the audit log and telemetry (default
    ``tmp_path / ".rotifer"``); it does not pick the database.  Stores the
    factory opened are closed at the end of the test.
    ``store_factory.url(name="main") -> str`` is that database's memory URL
    (``sqlite:PATH`` or ``postgresql://...``), e.g. for a subprocess or
    ``ROTIFER_MEMORY_URL``; ``store_factory.backend`` is ``"sqlite"``, ``"pgbouncer"`` or
    ``"postgres"``.

``pg_url`` -> ``str`` (session)
    A database on the throwaway server, shared by the whole session.  Prefer
    ``pg_fresh_url`` or ``store_factory``, which isolate tests.

``pg_fresh_url`` -> ``str``
    A URL whose ``search_path`` is a new, empty schema, dropped after the test.

``own_pg_server`` -> :class:`PgServer`
    A server of the test's own (``.url()``), to freeze (``signal(SIGSTOP)``),
    kill (``signal(SIGKILL)``) and ``restart()`` without disturbing other tests.

``pgbouncer`` -> :class:`PgBouncer` (session)
    A real pgbouncer in front of the session's server, on 127.0.0.1:
    ``pgbouncer.url("transaction")`` / ``pgbouncer.url("session")`` reach the
    test database through a transaction-mode / session-mode pool, already
    carrying ``rotifer_pooler=...``.  Missing pgbouncer: skipped locally,
    failed under ``CI`` (``.ci/run`` installs it).

``pgb_schemas`` -> :class:`SchemaMaker` (session)
    Like ``pg_schemas``, but its URLs go through the transaction-mode
    pgbouncer and name the schema with ``rotifer_schema`` (pgbouncer refuses
    ``options``).  ``backend`` ``"pgbouncer"`` (see ``ALL_BACKENDS``) makes
    ``store_factory`` use it; a test module opts in by overriding ``backend``
    with ``ALL_BACKENDS``, so only the rule, state-machine and concurrency
    tests pay for a third run.

The server
----------

Set ``ROTIFER_TEST_PG_URL`` to use a server you run yourself (each test then
works in its own schema there).  Otherwise the first test that needs
PostgreSQL starts one for the session (a :class:`~tests.pg_servers.PgServer`:
how the server and pgbouncer processes are started, stopped and hurt is
:mod:`tests.pg_servers`; this module only hands them to tests).  The
binaries are looked up on PATH and under ``/usr/lib/postgresql/*/bin``; when
there are none the PostgreSQL tests are skipped -- except under ``CI``, where
they fail, because ``.ci/run`` installs PostgreSQL.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from rotifer.memory import Clock, MemoryStore
from tests.pg_servers import PgBouncer, PgServer, find_pg_bindir, find_pgbouncer, unprivileged

#: The processes live in tests.pg_servers; named here too, for the modules that
#: import them from the plugin (tests.memory.conftest, the network attacks).
__all__ = ["ALL_BACKENDS", "BACKENDS", "PgBouncer", "PgServer", "SchemaMaker", "StoreFactory",
           "find_pg_bindir", "find_pgbouncer", "with_rotifer_schema", "with_search_path"]

BACKENDS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
#: BACKENDS plus PostgreSQL through a transaction-mode pgbouncer.
ALL_BACKENDS = [*BACKENDS, pytest.param("pgbouncer", id="pgbouncer", marks=pytest.mark.postgres)]


def with_search_path(url: str, schema: str) -> str:
    """``url`` with its connections' search_path set to ``schema``."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={quote(f'-c search_path={schema}', safe='')}"


def with_rotifer_schema(url: str, schema: str) -> str:
    """``url`` with rotifer's own schema parameter (set per transaction; works
    through pgbouncer, which refuses ``options``)."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}rotifer_schema={schema}"


class SchemaMaker:
    """Makes (and later drops) empty schemas in one database.

    ``via``: the URL stores use to reach the database (e.g. through pgbouncer);
    the schema is then named with ``rotifer_schema``."""

    def __init__(self, url: str, via: str | None = None) -> None:
        self.url = url
        self.via = via
        self.conn = psycopg.connect(url, autocommit=True)

    def new(self) -> tuple[str, str]:
        schema = "t_" + uuid.uuid4().hex[:16]
        self.conn.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
        if self.via is not None:
            return schema, with_rotifer_schema(self.via, schema)
        return schema, with_search_path(self.url, schema)

    def drop(self, schema: str) -> None:
        self.conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    external = os.environ.get("ROTIFER_TEST_PG_URL")
    if external:
        yield external
        return
    bindir = find_pg_bindir()
    if bindir is None:
        reason = ("no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH or under "
                  "/usr/lib/postgresql/*/bin; install PostgreSQL or set ROTIFER_TEST_PG_URL")
        if os.environ.get("CI"):
            pytest.fail(reason + " (CI must run the PostgreSQL tests)")
        pytest.skip(reason)
    server = PgServer(bindir)
    atexit.register(server.stop)  # even if the session dies before teardown
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    yield server.url()
    server.stop()


@pytest.fixture
def own_pg_server(pg_url: str) -> Iterator[PgServer]:
    """A PostgreSQL server of this test's own, to freeze, kill and restart."""
    if os.environ.get("ROTIFER_TEST_PG_URL"):
        pytest.skip("needs the PostgreSQL binaries to start a server of its own")
    bindir = find_pg_bindir()
    assert bindir is not None  # pg_url found them
    server = PgServer(bindir, crash_safe=True)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    yield server
    server.signal(signal.SIGCONT)  # a frozen server cannot be stopped
    server.stop()


@pytest.fixture(scope="session")
def pg_schemas(pg_url: str) -> Iterator[SchemaMaker]:
    maker = SchemaMaker(pg_url)
    yield maker
    maker.close()


@pytest.fixture
def pg_fresh_url(pg_schemas: SchemaMaker) -> Iterator[str]:
    schema, url = pg_schemas.new()
    yield url
    pg_schemas.drop(schema)


@pytest.fixture(scope="session")
def pgbouncer(pg_url: str) -> Iterator[PgBouncer]:
    binary = find_pgbouncer()
    if binary is None:
        reason = "no pgbouncer binary on PATH or in /usr/sbin; install pgbouncer"
        if os.environ.get("CI"):
            pytest.fail(reason + " (CI must run the pgbouncer tests)")
        pytest.skip(reason)
    if os.environ.get("ROTIFER_TEST_PG_URL"):
        pytest.skip("pgbouncer tests need the throwaway server (ROTIFER_TEST_PG_URL is set)")
    port = int(pg_url.rsplit(":", 1)[1].split("/", 1)[0])
    bouncer = PgBouncer(binary, port, unprivileged())
    atexit.register(bouncer.stop)
    try:
        bouncer.start()
    except BaseException:
        bouncer.stop()
        raise
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="session")
def pgb_schemas(pg_url: str, pgbouncer: PgBouncer) -> Iterator[SchemaMaker]:
    maker = SchemaMaker(pg_url, via=pgbouncer.url("transaction"))
    yield maker
    maker.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


class StoreFactory:
    """Opens MemoryStores on this test's databases; see the module docstring."""

    def __init__(self, backend: str, tmp_path: Path, schemas: SchemaMaker | None) -> None:
        self.backend = backend
        self.tmp_path = tmp_path
        self._schemas = schemas
        self._urls: dict[str, str] = {}
        self._made: list[str] = []
        self._stores: list[MemoryStore] = []

    def url(self, name: str = "main") -> str:
        if name not in self._urls:
            if self._schemas is None:
                folder = self.tmp_path / "memory-dbs"
                folder.mkdir(exist_ok=True)
                self._urls[name] = f"sqlite:{folder / (name + '.db')}"
            else:
                schema, url = self._schemas.new()
                self._made.append(schema)
                self._urls[name] = url
        return self._urls[name]

    def __call__(self, rotifer_dir: Path | None = None, *, clock: Clock | None = None,
                 name: str = "main") -> MemoryStore:
        store = MemoryStore.open(rotifer_dir or self.tmp_path / ".rotifer", url=self.url(name),
                                 clock=clock)
        self._stores.append(store)
        return store

    def finish(self) -> None:
        for store in self._stores:
            with contextlib.suppress(Exception):
                store.close()
        if self._schemas is not None:
            for schema in self._made:
                self._schemas.drop(schema)


@pytest.fixture
def store_factory(backend: str, tmp_path: Path,
                  request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    schemas: SchemaMaker | None = None
    if backend == "postgres":
        schemas = request.getfixturevalue("pg_schemas")
    elif backend == "pgbouncer":
        schemas = request.getfixturevalue("pgb_schemas")
    factory = StoreFactory(backend, tmp_path, schemas)
    yield factory
    factory.finish()
