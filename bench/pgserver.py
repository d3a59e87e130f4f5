"""A throwaway PostgreSQL server for the benchmarks, on 127.0.0.1 only.

The same recipe as the test suite's server (``tests/pg_servers.py``):
``initdb`` in a temporary directory, trust authentication for loopback only,
``fsync=off`` (the data is thrown away), run as ``nobody`` when we are root.
It is repeated here rather than imported because the bench must not depend on
pytest fixtures; the benchmarks need none of the fault-injection parts.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg


def find_bindir() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres, or None."""
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    found = glob.glob("/usr/lib/postgresql/*/bin")
    found.sort(key=lambda p: tuple(int(n) for n in re.findall(r"\d+", p)), reverse=True)
    candidates += [Path(p) for p in found]
    for folder in candidates:
        if all((folder / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


MISSING = ("PostgreSQL skipped: no server binaries (initdb, pg_ctl, postgres) on PATH or "
           "under /usr/lib/postgresql/*/bin")


class Server:
    """``with Server(bindir) as s: s.url()``; stopped and deleted on exit."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="rotifer-bench-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self.run_as: dict[str, Any] = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self.run_as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        self.started = False
        self.version = "?"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C",
               "HOME": str(self.root)}
        return subprocess.run(list(args), capture_output=True, text=True, cwd=self.root,
                              env=env, timeout=120, check=False, **self.run_as)

    def __enter__(self) -> Server:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        done = self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "rotifer",
                         "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
                         "--no-instructions")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr or done.stdout}")
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\nhost all all 127.0.0.1/32 trust\n")
        last = ""
        for _ in range(5):  # a free port can be taken between probing and binding
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            options = (f"-c listen_addresses=127.0.0.1 -p {self.port} "
                       f"-c unix_socket_directories={self.root} -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off "
                       "-c max_connections=200 -c shared_buffers=64MB")
            done = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l",
                             str(self.root / "server.log"), "-w", "-t", "60", "-o", options,
                             "start")
            if done.returncode == 0:
                self.started = True
                break
            last = done.stderr + done.stdout
        else:
            raise RuntimeError(f"PostgreSQL did not start: {last}")
        with psycopg.connect(self.url("postgres")) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            self.version = str(row[0]).split()[0] if row else "?"

    def database(self, name: str) -> str:
        """A new, empty database; its URL."""
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def url(self, dbname: str) -> str:
        return f"postgresql://rotifer@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        if self.started:
            self.started = False
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
