"""Running the real ``rotifer`` command line on temporary projects.

Two ways, the same code and the same clean environment (no ``ROTIFER_PROJECT``,
``ROTIFER_MEMORY_URL`` or ``ROTIFER_DEBUG`` from the caller, telemetry off), in
the working folder the test chooses:

* :func:`run`, :func:`ok`, :func:`refused` (the default): in this process,
  through the CLI's own entry point (``rotifer.cli.main.run``: its error
  handling and exit statuses) under click's ``CliRunner`` isolation, as
  sqlite-utils and llm test their CLIs.  No interpreter start-up per command
  (about a second each on a loaded machine).
* :func:`run_process`, :func:`ok_process`, :func:`refused_process`: the
  ``rotifer`` console script in a fresh process.  For what only a process
  shows: exit statuses on signals and interrupts, terminal escaping, what
  reaches file descriptors 1 and 2 (a gene's ``os.write(1, ...)``), a killed
  run, and whatever a hostile gene does to the process that runs it (the
  containment tests use these, so a gene that attacks "rotifer" attacks a
  rotifer process, never the test runner).

:func:`refused` checks what every refusal must look like: the right exit
status, no traceback, and a last stderr line ``CODE: message``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from rotifer.cli.main import run as cli_run
from rotifer.memory import MemoryStore
from tests.audit_reading import project_audit as audit
from tests.genes.helpers import write_gene, write_wat_gene

#: What the last stderr line of every refusal looks like.
ERROR_LINE = re.compile(r"^[A-Z_]+: \S")
V2_LINE = re.compile(r"^Gene ID \(v2\): (v2:[0-9a-f]{64})$", re.MULTILINE)


def rotifer_command() -> list[str]:
    script = Path(sys.executable).with_name("rotifer")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from rotifer.cli.main import main; main()"]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the caller's rotifer settings, telemetry off."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("ROTIFER_MEMORY_URL", "ROTIFER_PROJECT", "ROTIFER_DEBUG")}
    base["ROTIFER_TELEMETRY"] = "0"
    base.update(extra or {})
    return base


def run_process(cwd: Path, *args: str, env: dict[str, str] | None = None,
                stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``rotifer ARGS`` in a fresh process (see the module docstring)."""
    return subprocess.run([*rotifer_command(), *args], cwd=cwd, env=clean_env(env),
                          capture_output=True, text=True, timeout=120, check=False,
                          input=stdin if stdin is not None else "")


def run(cwd: Path, *args: str, env: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``rotifer ARGS`` in this process (see the module docstring): the same result."""
    environment: dict[str, str | None] = dict.fromkeys(
        ("ROTIFER_MEMORY_URL", "ROTIFER_PROJECT", "ROTIFER_DEBUG"))
    environment["ROTIFER_TELEMETRY"] = "0"
    environment.update(env or {})
    before = os.getcwd()
    os.chdir(cwd)
    try:
        with CliRunner().isolation(input=stdin or "", env=environment) as (out, err, _):
            status = cli_run(list(args))
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(["rotifer", *args], status,
                                       out.getvalue().decode(), err.getvalue().decode())


Runner = Callable[..., subprocess.CompletedProcess[str]]


def ok(cwd: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None,
       runner: Runner = run) -> str:
    done = runner(cwd, *args, env=env, stdin=stdin)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def ok_process(cwd: Path, *args: str, env: dict[str, str] | None = None,
               stdin: str | None = None) -> str:
    """:func:`ok` in a fresh process."""
    return ok(cwd, *args, env=env, stdin=stdin, runner=run_process)


def refused(cwd: Path, code: str, *args: str, env: dict[str, str] | None = None,
            stdin: str | None = None, runner: Runner = run) -> str:
    """Run a command that must fail with ``code``; its stderr.

    Exit status 2 for a wrong command line (USAGE_ERROR), else 1; never a
    traceback; the last stderr line is ``CODE: message``."""
    done = runner(cwd, *args, env=env, stdin=stdin)
    expected = 2 if code == "USAGE_ERROR" else 1
    assert done.returncode == expected, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines, (args, done.stdout)
    assert ERROR_LINE.match(lines[-1]), done.stderr
    assert lines[-1].startswith(f"{code}: "), done.stderr
    return done.stderr


def refused_process(cwd: Path, code: str, *args: str, env: dict[str, str] | None = None,
                    stdin: str | None = None) -> str:
    """:func:`refused` in a fresh process."""
    return refused(cwd, code, *args, env=env, stdin=stdin, runner=run_process)


def last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


def init_project(root: Path) -> Path:
    """``rotifer init ROOT`` (run from ROOT's parent); returns ROOT."""
    ok(root.parent, "init", str(root))
    return root


def add_gene(root: Path, name: str, code: str | bytes, *, file: str = "gene.py",
             domain: str = "formatter", **extra: Any) -> Path:
    """Write ``genes/NAME`` (phenotype and one code file) into the project at ROOT."""
    return write_gene(root / "genes", name, code, file=file, domain=domain, **extra)


def add_wat_gene(root: Path, name: str, fixture: str, *, domain: str = "formatter") -> Path:
    """``genes/NAME/gene.wat``, a copy of tests/wasm/genes/FIXTURE.wat."""
    return write_wat_gene(root / "genes", name, fixture, domain=domain)


def v2_of(stdout: str) -> str:
    """The id in the ``Gene ID (v2): v2:<64 hex>`` line (exactly one such line)."""
    found = V2_LINE.findall(stdout)
    assert len(found) == 1, stdout
    return str(found[0])


def wrap(root: Path, name: str) -> str:
    """``rotifer wrap NAME``; the v2 id it printed."""
    return v2_of(ok(root, "wrap", name))


def spec_path(root: Path, name: str) -> Path:
    return root / ".rotifer" / "agents" / f"{name}.json"


def copy_spec(source: Path, destination: Path, name: str = "bot") -> None:
    """Copy an agent's spec file, as the docs tell a user to before an import."""
    (destination / ".rotifer" / "agents").mkdir(exist_ok=True)
    shutil.copy(spec_path(source, name), destination / ".rotifer" / "agents")


def agent_list(root: Path) -> list[dict[str, Any]]:
    """``rotifer agent list --json``."""
    data: list[dict[str, Any]] = json.loads(ok(root, "agent", "list", "--json"))
    return data


def store_agents(root: Path, url: str | None = None) -> list[str]:
    """The agents that have a memory in the project's store, read straight from it."""
    with MemoryStore.open(root / ".rotifer", url) as store:
        return store.agents()


def assert_not_created(root: Path, name: str, *, listing: bool = True) -> None:
    """No trace of agent NAME: no spec file, no memory, no audit line, and (with
    ``listing``, one more command) not in ``rotifer agent list``."""
    if listing:
        assert name not in [a["name"] for a in agent_list(root)]
    assert not spec_path(root, name).exists()
    assert name not in store_agents(root)
    assert not [line for line in audit(root) if line.get("agent") == name]
