"""The PostgreSQL server and pgbouncer processes the tests run against.

Starting, stopping and hurting them (the fixtures that hand them to tests are
in :mod:`tests.pg_plugin`):

* :class:`PgServer`: ``initdb`` in a temporary directory, a free port on
  127.0.0.1 only, trust authentication for 127.0.0.1 only, ``fsync=off`` (the
  data is thrown away), stopped and deleted at the end; for a server of a
  test's own, ``signal()`` (freeze, kill) and ``restart()``.
* :class:`PgBouncer`: a pgbouncer on 127.0.0.1 in front of such a server, with
  a transaction-mode and a session-mode pool.
* :func:`find_pg_bindir`, :func:`find_pgbouncer`: the binaries, on PATH and
  under ``/usr/lib/postgresql/*/bin`` (``/usr/sbin`` for pgbouncer), or None.

As root both run as the unprivileged user ``nobody`` (:func:`unprivileged`):
initdb and pgbouncer refuse root.  ``bench/pgserver.py`` builds on :class:`PgServer`
(this module imports nothing of pytest).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg


def unprivileged() -> dict[str, Any]:
    """What ``subprocess`` needs to run a server as ``nobody`` when we are root
    (initdb and pgbouncer refuse root); nothing otherwise."""
    if os.geteuid() != 0:
        return {}
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        raise RuntimeError("running as root and there is no user 'nobody' to run "
                           "PostgreSQL and pgbouncer as (both refuse root)") from None
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


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


def free_port() -> int:
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
        self.run_as = unprivileged()
        if self.run_as:
            os.chown(self.root, self.run_as["user"], self.run_as["group"])
        self.started = False

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C",
               "HOME": str(self.root)}
        return subprocess.run(list(args), capture_output=True, text=True, cwd=self.root,
                              env=env, timeout=120, check=False, **self.run_as)

    def initdb(self, hba: str = "local all all trust\nhost all all 127.0.0.1/32 trust\n"
               ) -> None:
        """A new cluster that trusts only loopback TCP (and the socket inside our
        private directory), or the ``pg_hba.conf`` lines given."""
        done = self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "rotifer",
                         "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
                         "--no-instructions")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr or done.stdout}")
        (self.data / "pg_hba.conf").write_text(hba)

    def start(self) -> None:
        self.initdb()
        last = ""
        for _ in range(5):  # a free port can be taken between probing and binding
            self.port = free_port()
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
            self.port = free_port()
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
