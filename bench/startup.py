"""Start-up: whole ``rotifer`` commands beside ``python -c 'import click, sqlite3, json'``.

The floor is the interpreter plus the three modules every command needs; each
command's figure is its median wall time over that floor's median, all runs
interleaved in one process (the order rotates each round), so that a busy
machine slows both alike.  The commands: ``rotifer --help``, ``rotifer agent
list`` and ``rotifer agent run`` of a one-gene agent whose Python gene returns
``{}``, contained and trusted.  The targets (issue 33): at most 2x for the runs,
1.5x for ``--help`` and ``agent list``.  ``python -m bench.startup [ROUNDS]``
prints the table alone.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .cli import Unavailable, _env, rotifer_command
from .timing import Settings

GENE_PY = "def express(input, ctx):\n    return {}\n"
PHENOTYPE = {"name": "empty", "domain": "empty", "version": "1.0.0", "fidelity": "Wrapped",
             "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}
FLOOR = "python -c 'import click, sqlite3, json'"
#: (label, target ratio over the floor) per command; the floor first.
TARGETS = {FLOOR: None, "rotifer --help": 1.5, "rotifer agent list": 1.5,
           "rotifer agent run (contained)": 2.0, "rotifer agent run (trusted)": 2.0}


def make_project(root: Path) -> list[str]:
    """A project with agents ``contained`` and ``trusted`` of the gene ``empty``."""
    cmd = rotifer_command()
    if cmd is None:
        raise Unavailable("no `rotifer` command next to the interpreter or on PATH")
    env = _env()
    subprocess.run([*cmd, "init", str(root)], check=True, capture_output=True, env=env)
    gene = root / "genes" / "empty"
    gene.mkdir(parents=True, exist_ok=True)
    (gene / "gene.py").write_text(GENE_PY)
    (gene / "phenotype.json").write_text(json.dumps(PHENOTYPE))
    base = [*cmd, "--project", str(root)]
    for args in (["wrap", "empty"], ["agent", "create", "contained", "--genes", "empty"],
                 ["agent", "create", "trusted", "--genes", "empty", "--trust", "empty"]):
        subprocess.run([*base, *args], check=True, capture_output=True, env=env)
    return base


def commands(base: list[str]) -> dict[str, list[str]]:
    return {
        FLOOR: [sys.executable, "-c", "import click, sqlite3, json"],
        "rotifer --help": [*base, "--help"],
        "rotifer agent list": [*base, "agent", "list"],
        "rotifer agent run (contained)": [*base, "agent", "run", "contained", "--input", "{}"],
        "rotifer agent run (trusted)": [*base, "agent", "run", "trusted", "--input", "{}"],
    }


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _wall(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run: the CPU time of the command and of every
    process it waited for (the fork server, and the gene's process the server reaped)."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv[-4:])}` failed: {done.stderr.decode()[-300:]}")
    return elapsed, _cpu() - cpu


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def measure(base: list[str], rounds: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds per command, ``rounds`` interleaved rounds."""
    env = _env()
    cmds = commands(base)
    for argv in cmds.values():
        _wall(argv, env)  # warm the page cache and the bytecode cache
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    names = list(cmds)
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(_wall(cmds[name], env))
    return {name: (_median([w for w, _ in v]), _median([c for _, c in v]))
            for name, v in samples.items()}


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def render(med: dict[str, tuple[float, float]], rounds: int, load_before: str,
           load_after: str) -> str:
    floor, floor_cpu = med[FLOOR]
    lines = [f"Start-up, medians of {rounds} interleaved runs (load average before "
             f"{load_before}, after {load_after}); CPU is the command's and its "
             "children's (the fork server, the gene's process):", "",
             "| command | wall | x floor | target (wall) | CPU | x floor |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, (seconds, cpu) in med.items():
        target = TARGETS[name]
        ratio = seconds / floor
        verdict = "floor" if target is None else (
            f"<= {target}x {'ok' if ratio <= target else 'MISSED'}")
        cpu_ratio = f"{cpu / floor_cpu:.2f}x" if floor_cpu > 0 else "-"
        lines.append(f"| `{name}` | {seconds * 1000:.0f} ms | {ratio:.2f}x | {verdict} | "
                     f"{cpu * 1000:.0f} ms | {cpu_ratio} |")
    return "\n".join(lines) + "\n"


def run(root: Path, rounds: int) -> str:
    try:
        base = make_project(root)
    except (Unavailable, OSError, subprocess.CalledProcessError) as exc:
        return f"Start-up: not measured here ({exc}).\n"
    before = _load()
    med = measure(base, rounds)
    return render(med, rounds, before, _load())


def table(root: Path, settings: Settings) -> str:
    return run(root, max(settings.cli_rounds, 9) if settings.cli_rounds > 2 else 2)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="rotifer-startup-") as tmp:
        os.chmod(tmp, 0o711)  # as root, contained genes run as nobody: it must reach them
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        print(run(Path(tmp) / "project", int(sys.argv[1]) if len(sys.argv) > 1 else 9))
