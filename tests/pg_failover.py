"""A primary and a streaming standby on loopback, and failing over between them.

:class:`PgPair` starts two real PostgreSQL servers: ``node(0)`` a primary,
``node(1)`` a hot standby made from it with ``pg_basebackup -R`` and fed by
streaming replication, synchronous (``synchronous_standby_names``,
``synchronous_commit=on``: a commit returns only once the standby has the
WAL on disk) or asynchronous.  :meth:`PgPair.url` is one libpq multi-host URL
naming both (``target_session_attrs=read-write``), as a deployer writes it.

:meth:`PgPair.fail_over` does what an operator (or pg_auto_failover) does
when the primary's machine dies: SIGKILL the primary's every process, promote
the standby with ``pg_ctl promote``, then rebuild the dead node as a standby
of the new primary (a fresh ``pg_basebackup``).  Until the rebuilt standby
streams, the new primary commits alone (``synchronous_standby_names`` empty),
as pg_auto_failover's ``wait_primary`` state does: a primary that waited for a
standby that does not exist yet would stop every write; then replication is
made synchronous again.

Ports stay fixed across failovers, so the one URL keeps naming both nodes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from pathlib import Path

import psycopg

from tests.pg_servers import PgServer, free_port

#: The standby's name in ``synchronous_standby_names`` (its ``application_name``).
STANDBY_NAME = "standby"


class _Node(PgServer):
    """One server of a pair: its own port, its role decided by its data directory."""

    def __init__(self, bindir: Path, port: int, *, sync: bool) -> None:
        super().__init__(bindir, crash_safe=True)
        self.port = port
        self.sync = sync

    def _options(self) -> str:
        # synchronous_standby_names is set with ALTER SYSTEM once a standby
        # streams (PgPair.start), never here: a command-line setting would win.
        return (super()._options()
                + " -c wal_level=replica -c max_wal_senders=5 -c hot_standby=on"
                + " -c wal_keep_size=64MB -c wal_sender_timeout=5s"
                + " -c wal_receiver_status_interval=1s")

    def start_with_port(self) -> None:
        """initdb and start on this node's fixed port (as ``PgServer.start``)."""
        self.initdb("local all all trust\nhost all all 127.0.0.1/32 trust\n"
                    "host replication all 127.0.0.1/32 trust\n")
        self.restart()
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE rotifer")

    def clone_from(self, primary: _Node) -> None:
        """Make this node a streaming standby of ``primary`` (a fresh base backup)."""
        self.started = False
        shutil.rmtree(self.data, ignore_errors=True)
        done = self._run(str(self.bindir / "pg_basebackup"), "-D", str(self.data),
                         "-h", "127.0.0.1", "-p", str(primary.port), "-U", "rotifer",
                         "-X", "stream", "-R", "--no-sync", "-c", "fast",
                         "-d", f"application_name={STANDBY_NAME}")
        if done.returncode != 0:
            raise RuntimeError(f"pg_basebackup failed: {done.stderr or done.stdout}")
        self.restart()

    def promote(self) -> None:
        done = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                         "promote")
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl promote failed: {done.stderr or done.stdout}")

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend, as a dying machine would."""
        self.signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while self.pids() and time.monotonic() < deadline:
            alive = []
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, ChildProcessError):
                    os.kill(pid, 0)
                    alive.append(pid)
            if not alive:
                break
            time.sleep(0.05)
        self.started = False

    def sql(self, statement: str) -> list[tuple[object, ...]]:
        with psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(statement)
            return cur.fetchall() if cur.description else []


class PgPair:
    """A primary and its streaming standby on loopback (see the module's docstring)."""

    def __init__(self, bindir: Path, *, sync: bool = True) -> None:
        if shutil.which("pg_basebackup", path=str(bindir)) is None \
                and not (bindir / "pg_basebackup").exists():
            raise RuntimeError(f"no pg_basebackup in {bindir}")
        ports = [free_port(), free_port()]
        while ports[1] == ports[0]:
            ports[1] = free_port()
        self.sync = sync
        self.nodes = [_Node(bindir, port, sync=sync) for port in ports]
        self.primary = 0
        self.failovers = 0

    def node(self, index: int) -> _Node:
        return self.nodes[index]

    @property
    def standby(self) -> int:
        return 1 - self.primary

    def start(self) -> None:
        self.nodes[0].start_with_port()
        self.nodes[1].clone_from(self.nodes[0])
        self._synchronous(self.sync)
        self.wait_streaming()

    def _synchronous(self, on: bool) -> None:
        """Make the primary's commits wait for the standby (or not)."""
        names = STANDBY_NAME if on else ""
        primary = self.nodes[self.primary]
        primary.sql(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        primary.sql("SELECT pg_reload_conf()")

    def url(self, dbname: str = "rotifer", *, attrs: str = "read-write", **params: str) -> str:
        """Both nodes in one libpq URL; ``attrs`` is its ``target_session_attrs``
        (``read-write``: the primary; ``standby``, ``prefer-standby``: a standby)."""
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        query = "&".join([f"target_session_attrs={attrs}",
                          *(f"{k}={v}" for k, v in params.items())])
        return f"postgresql://rotifer@{hosts}/{dbname}?{query}"

    def wait_streaming(self, timeout: float = 60) -> None:
        """Until the primary sees its standby streaming (and, if sync, synchronous)."""
        want = "sync" if self.sync else "async"
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                last = self.nodes[self.primary].sql(
                    "SELECT state, sync_state FROM pg_stat_replication")
                if last == [("streaming", want)]:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"the standby did not stream ({want}): {last!r}")

    def wait_replayed(self, timeout: float = 60) -> None:
        """Until the standby has replayed everything the primary has written so
        far.  A synchronous commit waits for the standby's flush, not its
        replay: right after one, the standby may not show it yet (not even the
        schema a first open made there)."""
        lsn = self.nodes[self.primary].sql("SELECT pg_current_wal_lsn()::text")[0][0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                done = self.nodes[self.standby].sql(
                    f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")
                if done == [(True,)]:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"the standby did not replay up to {lsn}")

    def fail_over(self) -> None:
        """Kill the primary, promote the standby, rebuild the dead node as its standby."""
        old, new = self.nodes[self.primary], self.nodes[self.standby]
        old.kill()
        new.promote()
        self.primary = self.standby
        self.failovers += 1
        if self.sync:
            self._synchronous(False)  # alone for now (pg_auto_failover's wait_primary)
        old.clone_from(new)
        if self.sync:
            self._synchronous(True)
        self.wait_streaming()

    def walreceiver_pids(self) -> list[int]:
        """The standby's WAL receiver process (to pause replication with SIGSTOP)."""
        found = []
        for pid in self.nodes[self.standby].pids():
            with contextlib.suppress(OSError):
                if b"walreceiver" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
        return found

    def stop(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop()
