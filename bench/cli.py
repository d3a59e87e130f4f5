"""Whole commands, process start included: ``rotifer agent run`` of a one-gene
agent and ``rotifer agent memory list``, against ``python -c pass``.

The project is made through the CLI itself (init, wrap, agent create) in a
temporary folder; the gene is a Python gene that reads and writes one
PREFERENCE entry, like the seed's formatter.  Telemetry is off.
"""

from __future__ import annotations

import json
import os
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


def rotifer_command() -> list[str]:
    """The console script next to this interpreter (else ``python -m rotifer.cli.main``)."""
    script = Path(sys.executable).with_name("rotifer")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "rotifer.cli.main"]  # pragma: no cover


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["ROTIFER_TELEMETRY"] = "0"
    env.pop("ROTIFER_PROJECT", None)
    env.pop("ROTIFER_MEMORY_URL", None)
    return env


def make_project(root: Path) -> list[str]:
    """A project with agent ``bench`` of one gene; returns the base command."""
    cmd = rotifer_command()
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


def wall(argv: list[str]) -> float:
    env = _env()
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    return elapsed


def run(root: Path, settings: Settings) -> list[Result]:
    base = make_project(root / "project")
    commands = {
        "python": [sys.executable, "-c", "pass"],
        "run": [*base, "agent", "run", "bench", "--input", '{"name": "bench"}'],
        "list": [*base, "agent", "memory", "list", "bench"],
    }
    for argv in commands.values():
        wall(argv)  # warm the page cache and the bytecode cache
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
