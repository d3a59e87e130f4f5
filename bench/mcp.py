"""``rotifer mcp`` over stdio against the same memory call in process.

One agent, one gene.  In process: the gene's ``read_memory`` and
``write_memory`` (through ``write_untrusted``, as the server writes) on the
agent's SQLite store.  Over stdio: the MCP SDK's client calling
``memory_read`` and ``memory_write`` on a server subprocess, and beside them,
served by the same process over the same pipes (:mod:`bench.mcp_server`:
``rotifer mcp``'s own :func:`~rotifer.mcp.server.build_server` plus two tools):

* an *empty tool* (no memory call, an empty result): the transport's own round
  trip (JSON-RPC framing, the SDK's dispatch both ways, two pipe hops);
* the *same result, no call*: the result the tool gave, answered again without
  the memory call or building it -- what the SDK itself costs for that much
  content, the floor any tool returning it can reach.

Target (issue 34): a tool call at most 2x the in-process call plus the
transport's round trip, i.e. ``tool <= 2 * in_process + empty``; the table gives
``(tool - empty) / in_process`` and the floor ``(same - empty) / in_process``,
in wall-clock time and in CPU time of both processes (the server's threads from
``/proc/PID/task/*/schedstat``, the client's ``time.process_time``; the
in-process call's own CPU time is its denominator).  Every figure is a median
of interleaved rounds of one run (the calls take turns), so the ratio holds on
a loaded machine where the absolute times drift.
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
from rotifer.memory.untrusted import write_untrusted

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
    """Wall-clock µs per call of each op, and ``NAME cpu``: this process's CPU µs per call."""
    samples: dict[str, list[float]] = {name: [] for name in ops}
    cpu: dict[str, list[float]] = {name: [] for name in ops}
    names = list(ops)
    for name in names:
        for _ in range(settings.iters):
            ops[name]()
    for r in range(settings.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            used = time.process_time()
            start = time.perf_counter()
            for _ in range(settings.iters):
                ops[name]()
            samples[name].append((time.perf_counter() - start) / settings.iters)
            cpu[name].append((time.process_time() - used) / settings.iters)
    out = {name: statistics.median(times) * 1e6 for name, times in samples.items()}
    out.update({f"{name} cpu": statistics.median(times) * 1e6 for name, times in cpu.items()})
    return out


def paced(project: Project, settings: Settings, pause_s: float) -> dict[str, float]:
    """The same calls one at a time, each after ``pause_s`` asleep (a server's wait for
    its next request): wall-clock and CPU µs of the call alone, medians over all calls.
    After a pause the caches are cold on a busy machine, so a call costs more than
    back to back."""
    from rotifer.agents.acting import gene_memory

    with project.open_store("bot", create=False) as store:
        memory = gene_memory(project, store, "bot", "notes", via="mcp")
        counter = iter(range(10**9))
        ops: dict[str, Callable[[], object]] = {
            "read": lambda: memory.read_memory("k/read"),
            "write": lambda: write_untrusted(memory, f"k/{next(counter) % 50}",
                                             VALUE.encode()),
        }
        wall: dict[str, list[float]] = {name: [] for name in ops}
        cpu: dict[str, list[float]] = {name: [] for name in ops}
        for _ in range(max(1, settings.rounds * settings.iters // 4)):
            for name, op in ops.items():
                time.sleep(pause_s)
                used, start = time.process_time(), time.perf_counter()
                op()
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - used)
    out = {name: statistics.median(times) * 1e6 for name, times in wall.items()}
    out.update({f"{name} cpu": statistics.median(times) * 1e6 for name, times in cpu.items()})
    return out


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
    """CPU seconds ``pid`` ran so far, all its threads (the scheduler's nanosecond
    count, ``/proc/PID/task/*/schedstat``; 0 when unknown)."""
    if pid is None:
        return 0.0
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):  # a worker thread that just ended
            continue
    return total / 1e9


async def _medians_async(ops: dict[str, Callable[[], Awaitable[object]]],
                         settings: Settings) -> dict[str, float]:
    """Wall-clock µs per call of each op, and ``NAME cpu``: the CPU µs per call of
    both processes (the server's threads, and this process: the SDK's client)."""
    pid = _server_pid()
    samples: dict[str, list[float]] = {name: [] for name in ops}
    cpu: dict[str, list[float]] = {name: [] for name in ops}
    names = list(ops)
    for name in names:
        for _ in range(settings.iters):
            await ops[name]()
    for r in range(settings.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            used = _cpu_s(pid) + time.process_time()
            start = time.perf_counter()
            for _ in range(settings.iters):
                await ops[name]()
            samples[name].append((time.perf_counter() - start) / settings.iters)
            cpu[name].append((_cpu_s(pid) + time.process_time() - used) / settings.iters)
    out = {name: statistics.median(times) * 1e6 for name, times in samples.items()}
    out.update({f"{name} cpu": statistics.median(times) * 1e6 for name, times in cpu.items()})
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
            read = {"key": "k/read"}
            write = {"key": "k/like", "value": VALUE}

            def like(tool: str, args: dict[str, str], text_only: bool = False
                     ) -> Callable[[], Awaitable[object]]:
                body = {"tool": tool, "arguments": args, "textOnly": text_only}
                return lambda: client.call_tool("bench_like", body)

            async def write_one() -> object:
                return await client.call_tool(
                    "memory_write", {"key": f"k/{next(counter) % 50}", "value": VALUE})

            ops: dict[str, Callable[[], Awaitable[object]]] = {
                "empty": lambda: client.call_tool("bench_empty", {}),
                "read": lambda: client.call_tool("memory_read", read),
                "read like": like("memory_read", read),
                "read like text": like("memory_read", read, text_only=True),
                "write": write_one,
                "write like": like("memory_write", write),
            }
            result.update(await _medians_async(ops, settings))

    anyio.run(main)
    return result


def run(root: Path, settings: Settings) -> str:
    project = build(root)
    load = os.getloadavg()[0]
    local = in_process(project, settings)
    remote = over_stdio(project, settings)
    slow = paced(project, settings, remote["empty"] / 1e6)
    rows = ["| call | measured | in process: back to back / after a pause (µs) "
            "| empty tool (µs) | same result, no call (µs) | tool (µs) "
            "| (tool − empty) / in process: back to back / after a pause "
            "| floor: (same − empty) / in process | target | result |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name in ("read", "write"):
        for what, suffix in (("wall clock", ""), ("CPU, both processes", " cpu")):
            empty, like = remote["empty" + suffix], remote[f"{name} like{suffix}"]
            tool = remote[name + suffix]
            alone, after = local[name + suffix], slow[name + suffix]
            ratio = (tool - empty) / alone
            met = "met" if ratio <= TARGET else "**missed**"
            rows.append(f"| memory_{name} | {what} | {alone:.0f} / {after:.0f} | {empty:.0f} | "
                        f"{like:.0f} | {tool:.0f} | {ratio:.2f}× / {(tool - empty) / after:.2f}× "
                        f"| {(like - empty) / alone:.2f}× | ≤ {TARGET:.0f}× | {met} |")
    text, text_cpu = remote["read like text"], remote["read like text cpu"]
    full, full_cpu = remote["read like"], remote["read like cpu"]
    return "\n".join(rows) + (
        f"\n\nIn process after a pause: each call alone after sleeping as long as an empty "
        f"tool's round trip ({remote['empty'] / 1e3:.1f} ms), as the server waits for its next "
        f"request. The same `memory_read` result as text content only (no structured "
        f"copy): {text:.0f} µs wall clock, {text_cpu:.0f} µs CPU, against {full:.0f} / "
        f"{full_cpu:.0f} µs with both. Load average {load:.1f} at the start and "
        f"{os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} CPUs.")
