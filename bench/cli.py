"""Whole commands, process start included: ``rotifer agent run`` of a one-gene
agent and ``rotifer agent memory list``, against ``python -c pass``.

The project is made through the CLI itself (init, wrap, agent create) in a
temporary folder; the gene is a Python gene that reads and writes one
PREFERENCE entry, like the seed's formatter.  Telemetry is off.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .report import Result
from .timing import Settings

GENE_PY = '''\
def express(input, ctx):
    saved = ctx.memory.read_memory("greeter/name", "PREFERENCE")
    if "name" in input:
        ctx.memory.write_memory("greeter/name", input["name"].encode(), "PREFERENCE")
        name = input["name"]
    else:
        name = saved.value.decode() if saved else "world"
    return {"greeting": "hello " + name}
'''

PHENOTYPE = {
    "name": "greeter", "domain": "greeter", "version": "1.0.0", "fidelity": "Wrapped",
    "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    "outputSchema": {"type": "object", "properties": {"greeting": {"type": "string"}}},
}


def rotifer_command() -> list[str] | None:
    """The ``rotifer`` console script next to this interpreter, else the one on PATH."""
    script = Path(sys.executable).with_name("rotifer")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("rotifer")
    return [found] if found else None


class Unavailable(Exception):
    """The commands cannot be measured here (no ``rotifer``, or it fails)."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["ROTIFER_TELEMETRY"] = "0"
    env.pop("ROTIFER_PROJECT", None)
    env.pop("ROTIFER_MEMORY_URL", None)
    # Measure rotifer as installed: pip byte-compiles a package when it installs it.
    # With PYTHONDONTWRITEBYTECODE set (some CI images set it) an editable install
    # compiles rotifer's modules from source on every start, ~50 ms more here.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def make_project(root: Path) -> list[str]:
    """A project with agent ``bench`` of one gene; returns the base command."""
    cmd = rotifer_command()
    if cmd is None:
        raise Unavailable("no `rotifer` command next to the interpreter or on PATH")
    env = _env()
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([*cmd, "init", str(root)], check=True, capture_output=True, env=env)
    gene = root / "genes" / "greeter"
    gene.mkdir(parents=True, exist_ok=True)
    (gene / "gene.py").write_text(GENE_PY)
    (gene / "phenotype.json").write_text(json.dumps(PHENOTYPE, indent=2))
    base = [*cmd, "--project", str(root)]
    for args in (["wrap", "greeter"], ["agent", "create", "bench", "--genes", "greeter"]):
        subprocess.run([*base, *args], check=True, capture_output=True, env=env)
    return base


def _failure(exc: Exception) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        err = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        return f"`{' '.join(map(str, exc.cmd[1:]))}` failed: {err[-1] if err else exc}"
    return str(exc)


def wall(argv: list[str]) -> float:
    env = _env()
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"`{' '.join(argv[1:4])} ...` failed: "
                           f"{lines[-1] if lines else f'exit status {done.returncode}'}")
    return elapsed


def unavailable(reason: str) -> list[Result]:
    return [Result("cli", f"commands not available: {reason}", 0.0, None, "", "info", None)]


def run(root: Path, settings: Settings) -> list[Result]:
    try:
        base = make_project(root / "project")
    except (Unavailable, OSError, subprocess.CalledProcessError) as exc:
        return unavailable(_failure(exc))
    commands = {
        "python": [sys.executable, "-c", "pass"],
        "run": [*base, "agent", "run", "bench", "--input", '{"name": "bench"}'],
        "list": [*base, "agent", "memory", "list", "bench"],
    }
    try:
        for argv in commands.values():
            wall(argv)  # warm the page cache and the bytecode cache
    except (OSError, RuntimeError) as exc:
        return unavailable(str(exc))
    samples: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for r in range(settings.cli_rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(wall(commands[name]))
    med = {name: sorted(v)[len(v) // 2] for name, v in samples.items()}
    return [
        Result("cli", "`python -c pass` (process start)", med["python"], None, "", "info",
               None),
        Result("cli", "`rotifer agent run` (one Python gene, read + write)", med["run"], None,
               "", "abs", 0.3),
        Result("cli", "`rotifer agent memory list`", med["list"], None, "", "abs", 0.15),
    ]
