"""A pg_auto_failover formation on loopback: a monitor and two data nodes.

:class:`AutoFailover` starts, with pg_auto_failover's own ``pg_autoctl``, a
monitor and two PostgreSQL nodes on 127.0.0.1 (``pg_autoctl create monitor``
and ``pg_autoctl create postgres ... --run``): the first node becomes the
primary, the second is cloned from it by pg_autoctl and becomes its
synchronous standby (pg_auto_failover's default: ``number_sync_standbys`` 0
and ``replication-quorum`` true, so the primary's
``synchronous_standby_names`` names the standby while it is healthy, and the
primary commits alone in ``wait_primary`` while it is not).

:meth:`AutoFailover.fail_over` does what a machine's death does: SIGKILL the
primary's keeper (``pg_autoctl`` and its services) and its every PostgreSQL
process.  Nothing here promotes anything: the monitor notices the dead node
(its health checks, made fast here: a failover takes seconds, not the default
30 s and more) and has the keeper of the other node promote it.  Then the dead
node's keeper is started again (``pg_autoctl run``, as a rebooted machine's
service manager would): the monitor has it rejoin as a standby (pg_rewind),
and ``fail_over`` returns once the formation is ``primary`` + ``secondary``
again, replicating synchronously, so the next kill finds a healthy pair.

As root everything runs as ``nobody`` (:func:`tests.pg_servers.unprivileged`);
each process has its own ``HOME`` (pg_autoctl keeps its configuration and
state under it), and all share one Unix socket directory (the Debian default,
/var/run/postgresql, is not nobody's).  Trust authentication, for loopback
only: the data directories are made with ``initdb`` here, with our own
pg_hba.conf, and pg_autoctl is told ``--skip-pg-hba``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import psycopg

from tests.pg_servers import free_port, unprivileged

#: The monitor's health checks, made fast (defaults: 5 s period, 20 s before a
#: node that stopped reporting counts as unhealthy, 30 s to demote).
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    "pgautofailover.primary_demote_timeout": "5000",
    "pgautofailover.startup_grace_period": "3000",
}

#: Only loopback, trusted (the sockets sit in our private directory).
PG_HBA = ("local all all trust\nhost all all 127.0.0.1/32 trust\n"
          "host replication all 127.0.0.1/32 trust\n")


def find_pg_autoctl(bindir: Path) -> str | None:
    """``pg_autoctl``, if it and the monitor's extension for ``bindir``'s
    PostgreSQL are installed; else None."""
    binary = shutil.which("pg_autoctl")
    if binary is None:
        return None
    if not (bindir.parent / "lib" / "pgautofailover.so").exists():
        return None
    return binary


class _Keeper:
    """One ``pg_autoctl`` process (monitor or node) and its PostgreSQL."""

    def __init__(self, owner: AutoFailover, name: str, port: int) -> None:
        self.owner = owner
        self.name = name
        self.port = port
        self.home = owner.root / name
        self.data = self.home / "data"
        self.home.mkdir()
        owner.chown(self.home)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def env(self) -> dict[str, str]:
        path = f"{self.owner.bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return {"PATH": path, "LC_ALL": "C", "HOME": str(self.home),
                "XDG_CONFIG_HOME": str(self.home / "config"),
                "XDG_DATA_HOME": str(self.home / "share"),
                "XDG_RUNTIME_DIR": str(self.home / "run"),
                "PGHOST": str(self.owner.sockets), "PGPORT": str(self.port)}

    def initdb(self, user: str, settings: dict[str, str]) -> None:
        done = subprocess.run(
            [str(self.owner.bindir / "initdb"), "-D", str(self.data), "-U", user, "-A", "trust",
             "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
            capture_output=True, text=True, cwd=self.home, env=self.env(), timeout=120,
            check=False, **self.owner.run_as)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr or done.stdout}")
        (self.data / "pg_hba.conf").write_text(PG_HBA)
        # (A standby's configuration is copied from its primary's, sockets too.)
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"unix_socket_directories = '{self.owner.sockets}'\n")
            for name, value in settings.items():
                conf.write(f"{name} = {value}\n")

    def spawn(self, *args: str) -> None:
        """Start ``pg_autoctl ARGS`` (in a session of its own, to be killed whole)."""
        self._log = (self.home / "pg_autoctl.log").open("ab")
        self.proc = subprocess.Popen(
            ["pg_autoctl", *args], cwd=self.home, env=self.env(), stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            **self.owner.run_as)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.home / "pg_autoctl.log").read_text(errors="replace")[-3000:]
        return ""

    def postgres_pids(self) -> list[int]:
        try:
            master = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        found = [master]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == master:
                    found.append(int(stat.parent.name))
        return found

    def kill(self) -> None:
        """SIGKILL the keeper's process group and every PostgreSQL process."""
        pids = self.postgres_pids()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.05)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(20)
        self.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class AutoFailover:
    """A pg_auto_failover monitor and two nodes on loopback (see the module)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.run_as = unprivileged()
        self.root = Path(tempfile.mkdtemp(prefix="rotifer-paf-"))
        self.chown(self.root)
        self.sockets = self.root / "sockets"
        self.sockets.mkdir()
        self.chown(self.sockets)
        ports: list[int] = []
        while len(ports) < 3:
            port = free_port()
            if port not in ports:
                ports.append(port)
        self.monitor = _Keeper(self, "monitor", ports[0])
        self.nodes = [_Keeper(self, f"node{n + 1}", ports[n + 1]) for n in range(2)]
        self.failovers = 0
        self.superuser = ""
        #: Seconds from each kill until the other node was primary (wait_primary).
        self.promotion_seconds: list[float] = []
        #: Seconds from each kill until the formation was healthy again.
        self.recovery_seconds: list[float] = []

    def chown(self, path: Path) -> None:
        if self.run_as:
            os.chown(path, self.run_as["user"], self.run_as["group"])

    # -- starting -------------------------------------------------------------

    def monitor_url(self) -> str:
        return f"postgresql://autoctl_node@127.0.0.1:{self.monitor.port}/pg_auto_failover"

    def start(self) -> None:
        # pg_autoctl connects as the operating system's user for what needs a
        # superuser (creating its roles and the database); so does this harness.
        self.superuser = superuser = pwd.getpwuid(
            self.run_as["user"] if self.run_as else os.geteuid()).pw_name
        self.monitor.initdb(superuser, MONITOR_SETTINGS)
        self.monitor.spawn("create", "monitor", "--pgdata", str(self.monitor.data),
                           "--pgport", str(self.monitor.port), "--hostname", "127.0.0.1",
                           # (--listen is missing from its --help, but taken: the
                           # default is every address)
                           "--listen", "127.0.0.1", "--skip-pg-hba", "--no-ssl", "--run")
        self._wait(lambda: self._monitor_sql("SELECT 1") == [(1,)], "the monitor to start",
                   self.monitor)
        first = self.nodes[0]
        # fsync off: the data is thrown away, and a SIGKILL leaves the kernel's
        # page cache intact.  full_page_writes stays on: pg_rewind, with which
        # a dead primary rejoins, refuses a source without it.  A short
        # checkpoint_timeout: pg_autoctl's pg_basebackup waits for a spread
        # checkpoint (over 90 s by default).
        first.initdb(superuser, {"fsync": "off", "max_connections": "200",
                                 "shared_buffers": "64MB",
                                 "checkpoint_timeout": "'30s'",
                                 "checkpoint_completion_target": "0.1"})
        self._create_node(first)
        self._wait(lambda: self._states() == {first.port: ("single", "single")},
                   "the first node to be a single primary", first)
        # rotifer's own role: not a superuser (pg_autoctl's --username would make
        # one), the owner of the database pg_autoctl made (--dbname).
        with psycopg.connect(self._node_url(first, "postgres"), autocommit=True,
                             connect_timeout=5) as conn:
            conn.execute("CREATE ROLE rotifer LOGIN")
            conn.execute("ALTER DATABASE rotifer OWNER TO rotifer")
        self._create_node(self.nodes[1])
        self.wait_healthy()

    def _create_node(self, node: _Keeper) -> None:
        node.spawn("create", "postgres", "--pgdata", str(node.data), "--pgport", str(node.port),
                   "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--name", node.name,
                   "--dbname", "rotifer", "--skip-pg-hba", "--no-ssl", "--monitor", self.monitor_url(), "--run")

    # -- what the monitor says -------------------------------------------------

    def _monitor_sql(self, statement: str) -> list[tuple[object, ...]]:
        try:
            with psycopg.connect(self.monitor_url(), autocommit=True, connect_timeout=3) as conn:
                cur = conn.execute(statement)
                return cur.fetchall() if cur.description else []
        except psycopg.Error:
            return []

    def _states(self) -> dict[int, tuple[str, str]]:
        """Each node's port: (reported state, goal state), as the monitor has them."""
        rows = self._monitor_sql(
            "SELECT nodeport, reportedstate::text, goalstate::text FROM pgautofailover.node")
        return {int(str(p)): (str(r), str(g)) for p, r, g in rows}

    def primary(self) -> _Keeper | None:
        for node in self.nodes:
            if self._states().get(node.port, ("", ""))[0] in ("primary", "wait_primary"):
                return node
        return None

    def _autoctl(self, *args: str) -> str:
        done: subprocess.CompletedProcess[str] = subprocess.run(
            ["pg_autoctl", *args, "--monitor", self.monitor_url()], capture_output=True,
            text=True, env=self.monitor.env(), timeout=30, check=False, **self.run_as)
        return done.stdout + done.stderr

    def show_state(self) -> str:
        """``pg_autoctl show state``: the formation as the monitor has it."""
        return self._autoctl("show", "state")

    def show_uri(self) -> str:
        """``pg_autoctl show uri``: the URL pg_auto_failover hands to applications."""
        return self._autoctl("show", "uri", "--formation", "default").strip()

    def _healthy(self) -> bool:
        states = self._states()
        roles = sorted(states.values())
        if roles != [("primary", "primary"), ("secondary", "secondary")]:
            return False
        primary = self.primary()
        if primary is None:
            return False
        try:
            with psycopg.connect(self._node_url(primary, "postgres"), autocommit=True,
                                 connect_timeout=3) as conn:
                rows = conn.execute("SELECT state, sync_state FROM pg_stat_replication"
                                    ).fetchall()
                names = conn.execute("SHOW synchronous_standby_names").fetchone()
        except psycopg.Error:
            return False
        # A commit waits for the standby: the primary names it, and it streams.
        return rows == [("streaming", "quorum")] and names is not None and bool(names[0])

    def wait_healthy(self, timeout: float = 180) -> None:
        self._wait(self._healthy, "a primary and a synchronous secondary", None, timeout)

    def _wait(self, ready: Callable[[], bool], what: str, keeper: _Keeper | None,
              timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            for k in (self.monitor, *self.nodes):
                if k.proc is not None and k.proc.poll() is not None:
                    raise RuntimeError(f"pg_autoctl ({k.name}) exited while waiting for "
                                       f"{what}:\n{k.log_tail()}")
            time.sleep(0.2)
        logs = "\n".join(f"--- {k.name}\n{k.log_tail()}"
                         for k in ([keeper] if keeper else [self.monitor, *self.nodes]))
        raise RuntimeError(f"timed out waiting for {what}:\n{self.show_state()}\n{logs}")

    def timeline(self) -> int:
        """The primary's timeline: one more with every promotion."""
        primary = self.primary()
        if primary is None:
            raise RuntimeError(f"no primary: {self._states()}")
        with psycopg.connect(self._node_url(primary, "postgres"), autocommit=True,
                             connect_timeout=5) as conn:
            row = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()
        assert row is not None
        return int(str(row[0])[:8], 16)

    # -- URLs --------------------------------------------------------------------

    def _node_url(self, node: _Keeper, dbname: str) -> str:
        """One node, as the superuser (pg_stat_replication's details are its)."""
        return f"postgresql://{self.superuser}@127.0.0.1:{node.port}/{dbname}"

    def url(self, dbname: str = "rotifer", **params: str) -> str:
        """Both nodes in one multi-host URL that finds the primary (as
        ``pg_autoctl show uri`` gives it, without sslmode: no TLS on loopback)."""
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        query = "&".join(["target_session_attrs=read-write",
                          *(f"{k}={v}" for k, v in params.items())])
        return f"postgresql://rotifer@{hosts}/{dbname}?{query}"

    # -- failing over --------------------------------------------------------------

    def fail_over(self) -> None:
        """Kill the primary's machine (keeper and PostgreSQL), let the monitor
        promote the other node, restart the dead node's keeper, and wait until
        it is a synchronous secondary again."""
        old = self.primary()
        if old is None:
            raise RuntimeError(f"no primary to kill: {self._states()}")
        new = self.nodes[1 - self.nodes.index(old)]
        killed = time.monotonic()
        old.kill()
        self._wait(lambda: self._states().get(new.port, ("", ""))[0]
                   in ("wait_primary", "primary"), f"{new.name} to be promoted", new)
        self.promotion_seconds.append(time.monotonic() - killed)
        self.failovers += 1
        old.spawn("run", "--pgdata", str(old.data))
        self.wait_healthy()
        self.recovery_seconds.append(time.monotonic() - killed)

    def stop(self) -> None:
        for keeper in (*self.nodes, self.monitor):
            with contextlib.suppress(Exception):
                keeper.stop()
        shutil.rmtree(self.root, ignore_errors=True)
