"""The hostile-gene suite, the network part: TCP to the real test PostgreSQL
server and the real pgbouncer (refused contained, answered when trusted), and
``agent create --allow-tcp GENE:PORT`` end to end (that one port connects,
another does not, ``agent list`` shows the grant).

Each gene probes a map ``name -> [port, speaks_postgres]``: a PostgreSQL
port gets an SSLRequest and the first byte of the answer ('N' or 'S'), so a
trusted run shows the real server (or pgbouncer) answered, not only that
something accepted.  Every probe is caught inside the gene and reported as
``answered X``, ``ok`` or ``refused <why>``.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.cli.helpers import add_gene, init_project, ok, ok_process, run_process, wrap
from tests.pg_plugin import PgBouncer

PY_PROBE = r'''
import socket

SSL_REQUEST = bytes([0, 0, 0, 8, 4, 210, 22, 47])

def probe(port, pg):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
    except OSError as e:
        return "refused " + type(e).__name__
    try:
        if not pg:
            return "ok"
        s.sendall(SSL_REQUEST)
        return "answered " + s.recv(1).decode("latin-1")
    finally:
        s.close()

def express(input, ctx):
    return {name: probe(port, pg) for name, (port, pg) in input.items()}
'''

NODE_PROBE = r'''
const net = require("net");
function probe(port, pg) {
  return new Promise((resolve) => {
    let s = null;
    const timer = setTimeout(() => { if (s) s.destroy(); resolve("refused timeout"); }, 30000);
    const done = (v) => { clearTimeout(timer); if (s) s.destroy(); resolve(v); };
    try {
      s = net.connect(port, "127.0.0.1", () => {
        if (!pg) return done("ok");
        s.write(Buffer.from([0, 0, 0, 8, 4, 210, 22, 47]));
      });
      s.on("data", (d) => done("answered " + d.toString("latin1", 0, 1)));
      s.on("error", (e) => done("refused " + (e.code || e.name)));
    } catch (e) { done("refused " + (e.code || e.name)); }
  });
}
exports.express = async (input) => {
  const out = {};
  for (const [name, [port, pg]] of Object.entries(input)) out[name] = await probe(port, pg);
  return out;
};
'''

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None, url
    return port


def probe_project(tmp_path: Path, kind: str) -> Path:
    root = init_project(tmp_path / "proj")
    if kind == "python":
        add_gene(root, "probe", PY_PROBE, domain="other")
    else:
        add_gene(root, "probe", NODE_PROBE, domain="other", file="index.js")
    wrap(root, "probe")
    return root


@pytest.fixture
def two_listeners() -> Iterator[tuple[int, int]]:
    """Two loopback TCP listeners: one port to grant, one not."""
    granted = socket.create_server(("127.0.0.1", 0))
    other = socket.create_server(("127.0.0.1", 0))
    try:
        yield granted.getsockname()[1], other.getsockname()[1]
    finally:
        granted.close()
        other.close()


@needs_node
@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["python", "node"])
@pytest.mark.parametrize("trust", [False, True], ids=["contained", "trusted"])
def test_tcp_to_the_real_postgres_and_pgbouncer_is_refused_unless_trusted(
        tmp_path: Path, pg_url: str, pgbouncer: PgBouncer, kind: str, trust: bool) -> None:
    root = probe_project(tmp_path, kind)
    ok_process(root, "agent", "create", "a", "--genes", "probe", *(["--trust", "probe"] if trust else []))
    targets = {"postgres": [port_of(pg_url), True], "pgbouncer": [pgbouncer.port, True]}
    done = run_process(root, "agent", "run", "a", "--input", json.dumps(targets))
    assert done.returncode == 0, done
    report: dict[str, Any] = json.loads(done.stdout)
    if trust:  # the real servers answer an SSLRequest with 'N' (or 'S')
        assert set(report) == {"postgres", "pgbouncer"}, report
        assert all(r in ("answered N", "answered S") for r in report.values()), report
        return
    assert all(r.startswith("refused ") for r in report.values()), report
    ok_process(root, "agent", "audit", "verify", "a")


@needs_node
@pytest.mark.parametrize("kind", ["python", "node"])
def test_allow_tcp_grants_that_port_and_no_other(tmp_path: Path, kind: str,
                                                 two_listeners: tuple[int, int]) -> None:
    granted, other = two_listeners
    root = probe_project(tmp_path, kind)
    ok_process(root, "agent", "create", "a", "--genes", "probe", "--allow-tcp", f"probe:{granted}")
    listing = ok(root, "agent", "list")
    assert "CONTAINMENT" in listing and f"tcp probe:{granted}" in listing, listing
    spec = json.loads((root / ".rotifer" / "agents" / "a.json").read_text())
    assert spec["containment"]["allowTcp"] == {"probe": [granted]}, spec
    targets = {"granted": [granted, False], "other": [other, False]}
    done = run_process(root, "agent", "run", "a", "--input", json.dumps(targets))
    assert done.returncode == 0, done
    assert "runs uncontained" not in done.stderr
    report = json.loads(done.stdout)
    assert report["granted"] == "ok", report
    # Landlock refuses the connect (EACCES), not seccomp's socket() (EPERM):
    # the gene has its TCP socket, only the port is not its.
    assert report["other"] in ("refused PermissionError", "refused EACCES"), report
