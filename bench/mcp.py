"""``rotifer mcp`` over stdio against the same memory call in process.

One agent, one gene.  In process: the gene's ``read_memory`` and
``write_memory`` (through ``write_untrusted``, as the server writes) on the
agent's SQLite store.  Over stdio: the MCP SDK's client calling
``memory_read`` and ``memory_write`` on a server subprocess, and beside them
an *empty tool* (``bench_empty``: no memory call, an empty result) served by
the same process over the same pipes -- the transport's own round trip
(JSON-RPC framing, the SDK's dispatch both ways, two pipe hops).  The server
subprocess is :mod:`bench.mcp_server`: ``rotifer mcp``'s own
:func:`~rotifer.mcp.server.build_server` with the empty tool added in front.

Target (issue 34): a tool call at most 2x the in-process call plus the
transport's round trip, i.e. ``tool <= 2 * in_process + empty``; the table
gives the three medians (microseconds) and ``(tool - empty) / in_process``.
Every figure is a median of interleaved rounds of one run (the calls take
turns), so the ratio holds on a loaded machine where the absolute times drift.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.memory.views.untrusted import write_untrusted

from .timing import Settings

GENE = "def express(input, ctx):\n    return input\n"
TARGET = 2.0
VALUE = "x" * 100


def build(root: Path) -> Project:
    import json

    project = Project.init(root)
    folder = project.genes_dir / "notes"
    folder.mkdir(parents=True)
    (folder / "phenotype.json").write_text(json.dumps({
        "name": "notes", "domain": "bench", "version": "1.0.0", "fidelity": "Native",
        "inputSchema": {}, "outputSchema": {}}))
    (folder / "gene.py").write_text(GENE)
    wrap_gene(project, "notes")
    Agents(project).create("bot", ["notes"], quota_bytes=1 << 30)
    return project


def in_process(project: Project, settings: Settings) -> dict[str, float]:
    from rotifer.agents.acting import gene_memory

    with project.open_store("bot", create=False) as store:
        memory = gene_memory(project, store, "bot", "notes", via="mcp")
        write_untrusted(memory, "k/read", VALUE.encode())
        counter = iter(range(10**9))
        ops: dict[str, Callable[[], object]] = {
            "read": lambda: memory.read_memory("k/read"),
            "write": lambda: write_untrusted(memory, f"k/{next(counter) % 50}",
                                             VALUE.encode()),
        }
        return _medians_sync(ops, settings)


def _medians_sync(ops: dict[str, Callable[[], object]], settings: Settings) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in ops}
    names = list(ops)
    for name in names:
        for _ in range(settings.iters):
            ops[name]()
    for r in range(settings.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            for _ in range(settings.iters):
                ops[name]()
            samples[name].append((time.perf_counter() - start) / settings.iters)
    return {name: statistics.median(times) * 1e6 for name, times in samples.items()}


def _server_pid() -> int | None:
    """This process's child running bench.mcp_server (the SDK started it)."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"bench.mcp_server" in cmdline:
            return int(entry)
    return None


def _cpu_s(pid: int | None) -> float:
    """User plus system CPU seconds of ``pid`` so far (0 when unknown)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _medians_async(ops: dict[str, Callable[[], Awaitable[object]]],
                         settings: Settings) -> dict[str, float]:
    """Wall-clock µs per call of each op, and ``NAME cpu``: the server's CPU µs per call."""
    pid = _server_pid()
    samples: dict[str, list[float]] = {name: [] for name in ops}
    cpu: dict[str, list[float]] = {name: [] for name in ops}
    names = list(ops)
    for name in names:
        for _ in range(settings.iters):
            await ops[name]()
    for r in range(settings.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            used = _cpu_s(pid)
            start = time.perf_counter()
            for _ in range(settings.iters):
                await ops[name]()
            samples[name].append((time.perf_counter() - start) / settings.iters)
            cpu[name].append((_cpu_s(pid) - used) / settings.iters)
    out = {name: statistics.median(times) * 1e6 for name, times in samples.items()}
    # Clock ticks are coarse (10 ms): the mean over all rounds, not a median of batches.
    out.update({f"{name} cpu": statistics.fmean(times) * 1e6 for name, times in cpu.items()})
    return out


def over_stdio(project: Project, settings: Settings) -> dict[str, float]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "bench.mcp_server", str(project.root)],
                                   cwd=str(Path(__file__).resolve().parent.parent))
    result: dict[str, float] = {}

    async def main() -> None:
        async with Client(params, cache=None) as client:
            await client.call_tool("memory_write", {"key": "k/read", "value": VALUE})
            counter = iter(range(10**9))

            async def write() -> object:
                return await client.call_tool(
                    "memory_write", {"key": f"k/{next(counter) % 50}", "value": VALUE})

            ops: dict[str, Callable[[], Awaitable[object]]] = {
                "empty": lambda: client.call_tool("bench_empty", {}),
                "read": lambda: client.call_tool("memory_read", {"key": "k/read"}),
                "write": write,
            }
            result.update(await _medians_async(ops, settings))

    anyio.run(main)
    return result


def run(root: Path, settings: Settings) -> str:
    project = build(root)
    local = in_process(project, settings)
    remote = over_stdio(project, settings)
    rows = ["| call | in process (µs) | empty tool over stdio (µs) | tool over stdio (µs) "
            "| (tool − empty) / in process | server CPU: empty / tool (µs) | target | result |",
            "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name in ("read", "write"):
        ratio = (remote[name] - remote["empty"]) / local[name]
        met = "met" if ratio <= TARGET else "**missed**"
        rows.append(f"| memory_{name} | {local[name]:.0f} | {remote['empty']:.0f} | "
                    f"{remote[name]:.0f} | {ratio:.2f}× | {remote['empty cpu']:.0f} / "
                    f"{remote[name + ' cpu']:.0f} | ≤ {TARGET:.0f}× | {met} |")
    return "\n".join(rows)
