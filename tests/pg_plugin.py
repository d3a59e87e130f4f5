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
PostgreSQL starts one for the session: ``initdb`` in a temporary directory, a
free port on 127.0.0.1 only, trust authentication for 127.0.0.1 only,
``fsync=off`` (the data is thrown away), stopped and deleted at the end.  As
root it runs as the unprivileged user ``nobody`` (initdb refuses root).  The
binaries are looked up on PATH and under ``/usr/lib/postgresql/*/bin``; when
there are none the PostgreSQL tests are skipped -- except under ``CI``, where
they fail, because ``.ci/run`` installs PostgreSQL.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from rotifer.memory import Clock, MemoryStore

BACKENDS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
#: BACKENDS plus PostgreSQL through a transaction-mode pgbouncer.
ALL_BACKENDS = [*BACKENDS, pytest.param("pgbouncer", id="pgbouncer", marks=pytest.mark.postgres)]


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path)) or (0,)


def find_pg_bindir() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres, or None."""
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    for found in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True):
        candidates.append(Path(found))
    for folder in candidates:
        if all((folder / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PgServer:
    """A PostgreSQL cluster in a temporary directory, on 127.0.0.1 only."""

    def __init__(self, bindir: Path, *, crash_safe: bool = False) -> None:
        self.bindir = bindir
        #: A server the test kills must keep what it acknowledged: with
        #: synchronous_commit=off a commit is confirmed before its WAL is written,
        #: so a SIGKILL loses the last ones.  (fsync=off is fine either way: a
        #: killed process leaves the kernel's page cache intact.)
        self.crash_safe = crash_safe
        self.root = Path(tempfile.mkdtemp(prefix="rotifer-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self.run_as: dict[str, Any] = {}
        if os.geteuid() == 0:
            try:
                nobody = pwd.getpwnam("nobody")
            except KeyError:
                raise RuntimeError("running as root and there is no user 'nobody' to run "
                                   "PostgreSQL as (initdb refuses root)") from None
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self.run_as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        self.started = False

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C",
               "HOME": str(self.root)}
        return subprocess.run(list(args), capture_output=True, text=True, cwd=self.root,
                              env=env, timeout=120, check=False, **self.run_as)

    def start(self) -> None:
        done = self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "rotifer",
                         "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
                         "--no-instructions")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr or done.stdout}")
        # Trust only loopback TCP (and the socket inside our private directory).
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\nhost all all 127.0.0.1/32 trust\n")
        last = ""
        for _ in range(5):  # a free port can be taken between probing and binding
            self.port = _free_port()
            done = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l",
                             str(self.root / "server.log"), "-w", "-t", "60", "-o",
                             self._options(), "start")
            if done.returncode == 0:
                self.started = True
                break
            last = done.stderr + done.stdout
            with contextlib.suppress(OSError):
                last += (self.root / "server.log").read_text()[-2000:]
        else:
            raise RuntimeError(f"PostgreSQL did not start: {last}")
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE rotifer")

    def _options(self) -> str:
        commit = "on" if self.crash_safe else "off"
        return (f"-c listen_addresses=127.0.0.1 -p {self.port} "
                f"-c unix_socket_directories={self.root} -c fsync=off "
                f"-c synchronous_commit={commit} -c full_page_writes=off "
                "-c max_connections=200 -c shared_buffers=64MB")

    def url(self, dbname: str = "rotifer") -> str:
        return f"postgresql://rotifer@127.0.0.1:{self.port}/{dbname}"

    # -- faults (for a server of the test's own; never the shared session server) --

    def pids(self) -> list[int]:
        """The postmaster and every process it started."""
        try:
            master = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        found = [master]
        for stat in glob.glob("/proc/[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == master:
                    found.append(int(stat.split("/")[2]))
        return found

    def signal(self, sig: int) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def restart(self) -> None:
        """Start the server again on the same port (after a crash or a stop)."""
        # A killed postmaster leaves its lock files, and may linger as an unreaped
        # zombie that still "exists" for the stale-lock check.
        for stale in (self.data / "postmaster.pid", self.root / f".s.PGSQL.{self.port}.lock"):
            with contextlib.suppress(OSError):
                stale.unlink()
        done = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l",
                         str(self.root / "server.log"), "-w", "-t", "60", "-o", self._options(), "start")
        if done.returncode != 0:
            log = ""
            with contextlib.suppress(OSError):
                log = (self.root / "server.log").read_text()[-1500:]
            raise RuntimeError(f"PostgreSQL did not restart: {done.stderr or done.stdout}{log}")
        self.started = True

    def stop(self) -> None:
        if self.started:
            self.started = False
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


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


def find_pgbouncer() -> str | None:
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(p)), None)


class PgBouncer:
    """A pgbouncer on 127.0.0.1 in front of a PostgreSQL server, in a temporary folder.

    Two pools on one listener: database ``rotifer_tx`` (pool_mode=transaction)
    and ``rotifer_session`` (pool_mode=session), both the server's ``rotifer``.
    Trust authentication (loopback only); the user list names ``rotifer``.
    """

    def __init__(self, binary: str, server_port: int, run_as: dict[str, Any]) -> None:
        self.binary = binary
        self.server_port = server_port
        self.run_as = run_as
        self.root = Path(tempfile.mkdtemp(prefix="rotifer-pgb-"))
        if run_as:
            os.chown(self.root, run_as["user"], run_as["group"])
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def _config(self) -> str:
        server = f"host=127.0.0.1 port={self.server_port} dbname=rotifer"
        return (
            "[databases]\n"
            f"rotifer_tx = {server} pool_mode=transaction\n"
            f"rotifer_session = {server} pool_mode=session\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.root / 'users.txt'}\n"
            f"logfile = {self.root / 'pgbouncer.log'}\npidfile = {self.root / 'pgbouncer.pid'}\n"
            "max_client_conn = 2000\ndefault_pool_size = 40\nserver_reset_query = DISCARD ALL\n"
            # Try the server again 1 s after a failed login (default 15 s), so that
            # clients recover quickly after the server restarts.
            "server_login_retry = 1\nlog_connections = 0\nlog_disconnections = 0\n"
            "admin_users = rotifer\n")

    def start(self) -> None:
        (self.root / "users.txt").write_text('"rotifer" ""\n')
        last = ""
        for _ in range(5):  # a free port can be taken between probing and binding
            self.port = _free_port()
            ini = self.root / "pgbouncer.ini"
            ini.write_text(self._config())
            self.proc = subprocess.Popen([self.binary, str(ini)], cwd=self.root,
                                         # Not a pipe: nobody reads it, and pgbouncer
                                         # blocks once 64 KB of log fill one.
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         **self.run_as)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with psycopg.connect(self.url_for("rotifer_session"), connect_timeout=2):
                        return
                except psycopg.Error as exc:
                    last = str(exc)
                    time.sleep(0.1)
            self.stop(keep=True)
            with contextlib.suppress(OSError):
                last += (self.root / "pgbouncer.log").read_text()[-2000:]
        raise RuntimeError(f"pgbouncer did not start: {last}")

    def url_for(self, dbname: str) -> str:
        return f"postgresql://rotifer@127.0.0.1:{self.port}/{dbname}"

    def url(self, mode: str = "transaction") -> str:
        """The test database through the ``mode`` pool, with rotifer told so."""
        dbname = "rotifer_tx" if mode == "transaction" else "rotifer_session"
        return f"{self.url_for(dbname)}?rotifer_pooler={mode}"

    def stop(self, keep: bool = False) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)


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
    run_as: dict[str, Any] = {}
    if os.geteuid() == 0:  # pgbouncer refuses to run as root
        nobody = pwd.getpwnam("nobody")
        run_as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    bouncer = PgBouncer(binary, port, run_as)
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
