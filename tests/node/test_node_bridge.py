"""The bridge's edges on a real Node.js: an old or missing runtime, a child
that floods, forges, starts processes or never answers, large inputs, outputs
and values, ES module JavaScript, promises and the transpile cache."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.agents.run import run_agent, run_gene
from rotifer.genes.errors import GeneFailed, GeneUnavailable
from rotifer.genes.node import bridge
from tests.genes.helpers import write_gene


def node_gene(project: Project, name: str, code: str, *, file: str = "index.ts") -> None:
    write_gene(project.genes_dir, name, code, file=file)
    wrap_gene(project, name)


def gone(pid: int, within_s: float = 10.0) -> bool:
    """True once ``pid`` has exited (a zombie counts: it runs nothing)."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        except OSError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            state = "?"
        if state == "Z":
            return True
        time.sleep(0.02)
    return False


def test_an_old_node_is_unavailable(project: Project, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    old = tmp_path / "node16"
    old.write_text("#!/bin/sh\necho v16.20.2\n")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    node_gene(project, "plain", "exports.express = (i) => i;\n", file="index.js")
    monkeypatch.setenv("ROTIFER_NODE", str(old))
    with pytest.raises(GeneUnavailable, match=r"Node\.js 18 or newer; .* is 16\.20\.2"):
        run_gene(project, "plain", 1)


def test_garbage_on_the_bridge_is_a_clear_failure(project: Project) -> None:
    node_gene(project, "forge", "export function express() {\n"
              "  require('fs').writeSync(Number(process.argv[3]), 'garbage\\n');\n"
              "  for (;;) {}\n}")
    with pytest.raises(GeneFailed, match="not JSON"):
        run_gene(project, "forge", {})


def test_a_message_over_the_limit_kills_the_child(project: Project,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bridge, "MAX_MESSAGE_BYTES", 1 << 20)
    node_gene(project, "huge", "export const express = () => 'y'.repeat(3_000_000);")
    with pytest.raises(GeneFailed, match="over 1 MiB"):
        run_gene(project, "huge", {})


def test_large_input_output_and_a_1_mib_value(project: Project) -> None:
    node_gene(project, "echo", """
export function express(input: { s: string }, ctx: any) {
  const value = new Uint8Array(1 << 20).map((_, i) => i % 251);
  ctx.memory.writeMemory("echo/v", value, "CACHE");
  const back = ctx.memory.readMemory("echo/v").value;
  let same = back.length === value.length;
  for (let i = 0; same && i < value.length; i++) same = back[i] === value[i];
  let over = "none";
  try { ctx.memory.writeMemory("echo/w", new Uint8Array((1 << 20) + 1), "CACHE"); }
  catch (e: any) { over = e.code; }
  return { s: input.s + "!", same, over };
}""")
    Agents(project).create("a", ["echo"], "seq", 10 << 20)
    big = "é" * 4_000_000  # 8 MB of UTF-8: far more than a pipe holds
    # 8 MB each way and two 1 MiB values: on a busy 2-core machine that took
    # more than the default 10 s deadline, which this test is not about.
    out = run_agent(project, "a", {"s": big}, deadline_s=300)
    assert out == {"s": big + "!", "same": True, "over": "MEMORY_INVALID_INPUT"}


def test_a_stderr_flood_does_not_stall_and_a_crash_shows_its_tail(project: Project) -> None:
    node_gene(project, "flood", "export function express() {\n"
              "  const chunk = 'e'.repeat(1 << 16) + '\\n';\n"
              "  for (let i = 0; i < 300; i++) process.stderr.write(chunk);\n"  # ~20 MB
              "  process.stdout.write('o'.repeat(1 << 20));\n"
              "  return 'done';\n}")
    assert run_gene(project, "flood", {}) == "done"
    node_gene(project, "crash", "export function express() {\n"
              "  process.stderr.write('last words\\n'); process.abort();\n}")
    with pytest.raises(GeneFailed, match=r"killed by signal 6.*last words"):
        run_gene(project, "crash", {})


SPAWN = """
import { spawn } from "child_process";
export function express(input: { hang: boolean }) {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"],
                      { stdio: input.hang ? "inherit" : "ignore" });
  require("fs").writeFileSync("grandchild.pid", String(child.pid));
  if (input.hang) for (;;) {}
  return child.pid;
}
"""


@pytest.mark.parametrize("hang", [False, True])
def test_processes_a_gene_starts_end_with_its_run(project: Project, hang: bool) -> None:
    # Trusted: a contained gene can neither start a process nor write its folder
    # (tests/containment); an uncontained one's processes still end with the run.
    node_gene(project, "spawner", SPAWN)
    pid_file = project.genes_dir / "spawner" / "grandchild.pid"
    if hang:
        # The deadline must fall after node started and wrote the pid file, which
        # takes however long a loaded machine makes it (load 13 on 2 cores once
        # took more than 2 s): a run that timed out before the file was written
        # proves nothing, so the deadline doubles until one did.
        deadline_s = 2.0
        while True:
            with pytest.raises(GeneFailed, match="timed out"):
                run_gene(project, "spawner", {"hang": True}, deadline_s=deadline_s,
                        trusted=True)
            if pid_file.exists() or deadline_s >= 128:
                break
            deadline_s *= 2
    else:
        run_gene(project, "spawner", {"hang": False}, trusted=True)
    pid = int(pid_file.read_text())
    assert gone(pid), "the gene's child process outlived the run"


def test_memory_calls_count_against_the_deadline(project: Project) -> None:
    node_gene(project, "busy", "export function express(i: any, ctx: any) {\n"
              "  for (;;) ctx.memory.readMemory('busy/k');\n}")
    Agents(project).create("a", ["busy"], "seq", 1 << 20)
    with pytest.raises(GeneFailed, match="timed out after 1 s"):
        run_agent(project, "a", {}, deadline_s=1.0)


def test_es_module_javascript_and_promises(project: Project,
                                           monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    node_gene(project, "esm", "import { MemoryError } from '@rotifer/playground/memory';\n"
              "export async function express(i) {\n"
              "  await new Promise((r) => setTimeout(r, 10));\n"
              "  return [i * 3, typeof MemoryError];\n}\n", file="index.js")
    assert run_gene(project, "esm", 2) == [6, "function"]
    node_gene(project, "nope", "export const express = async () => { throw new TypeError('late'); };")
    with pytest.raises(GeneFailed, match="TypeError: late"):
        run_gene(project, "nope", {})
    # Without the compiler, ES module JavaScript says what it needs. (The cache
    # of the first run is keyed by the source: a changed source misses it.)
    # (set before the wrap: wrap loads the gene, which would fill the cache)
    monkeypatch.setenv("ROTIFER_NODE_MODULES", str(tmp_path / "empty"))
    node_gene(project, "esm2", "export const express = (i) => i;\n", file="index.js")
    with pytest.raises(GeneUnavailable, match=r"ES module syntax.*make node-deps"):
        run_gene(project, "esm2", 1)


def test_transpiled_code_is_cached_by_source(project: Project,
                                             monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    node_gene(project, "inc", "export const express = (i: number): number => i + 1;\n")
    assert run_gene(project, "inc", 1) == 2
    [cached] = (project.cache_dir / "node").iterdir()
    assert cached.name.endswith(".js") and "exports.express" in cached.read_text()
    # The second run needs no compiler at all.
    monkeypatch.setenv("ROTIFER_NODE_MODULES", str(tmp_path / "empty"))
    assert run_gene(project, "inc", 5) == 6
