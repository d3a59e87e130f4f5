"""What JSON cannot carry from a Node gene's memory call is refused, not
changed: ``NaN`` and the infinities (which ``JSON.stringify`` turns into
``null``, so ``{limit: NaN}`` would have become the default limit and
``maxRetentionDays: Infinity`` "no limit") are MEMORY_INVALID_INPUT naming the
field, and a value that is not bytes says it must be a Uint8Array and what it
got.  Real ``node`` processes."""

from __future__ import annotations

from typing import Any

from rotifer.agents.project import Project
from rotifer.agents.run import run_agent

from .test_node_genes import agent, entries, node_gene

GENE = """
import { MemoryError } from "@rotifer/playground/memory";

export function express(input: any, ctx: any) {
  const m = ctx.memory;
  m.writeMemory("k", new Uint8Array([1]), "CONTEXT");
  const out: Record<string, string> = {};
  const attempts: Record<string, () => unknown> = {
    "limit NaN": () => m.queryMemory({ limit: NaN }),
    "limit Infinity": () => m.queryMemory({ limit: Infinity }),
    "limit -Infinity": () => m.queryMemory({ limit: -Infinity }),
    "retention Infinity": () => m.writeMemory("r", new Uint8Array([1]), "CONTEXT", undefined,
        { maxRetentionDays: Infinity, autoDeleteOnTermination: false, anonymizationSupported: false }),
    "key NaN": () => m.readMemory(NaN as any),
    "value string": () => m.writeMemory("s", "str" as any, "CONTEXT"),
    "value number": () => m.writeMemory("s", 5 as any, "CONTEXT"),
    "value array": () => m.writeMemory("s", [1, 2] as any, "CONTEXT"),
    "value null": () => m.writeMemory("s", null as any, "CONTEXT"),
    "limit 1": () => m.queryMemory({ limit: 1 }),
  };
  for (const [name, attempt] of Object.entries(attempts)) {
    try { attempt(); out[name] = "accepted"; }
    catch (e: any) { out[name] = e instanceof MemoryError ? e.code + ": " + e.message : "other: " + e; }
  }
  return out;
}
"""


def test_non_finite_numbers_and_values_that_are_not_bytes_are_refused(project: Project) -> None:
    node_gene(project, "args", GENE)
    agent(project, "a", ["args"])
    out: dict[str, Any] = run_agent(project, "a", {})
    assert out.pop("limit 1") == "accepted"
    for name, message in out.items():
        assert message.startswith("MEMORY_INVALID_INPUT: "), (name, message)
    assert "limit must be a whole number from 1 to 1000, not nan" in out["limit NaN"]
    assert "not inf" in out["limit Infinity"] and "not -inf" in out["limit -Infinity"]
    assert "maxRetentionDays" in out["retention Infinity"]
    assert "key must be a string" in out["key NaN"]
    assert "value must be bytes (a Uint8Array), not a string" in out["value string"], out
    assert "not a number" in out["value number"]
    assert "not an Array" in out["value array"]
    assert "not null" in out["value null"]
    assert set(entries(project, "a")) == {"k"}  # nothing refused was written
