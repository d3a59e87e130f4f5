"""TypeScript and JavaScript genes on a real Node.js, with ``ctx.memory``
served by the real store (SQLite file) over the pipe bridge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.agents.run import run_agent, run_gene
from rotifer.agents.testing import test_gene
from rotifer.genes.errors import GeneFailed, GeneRejected, GeneUnavailable
from rotifer.memory import AgentMemoryError
from tests.agents.conftest import audit_lines
from tests.genes.helpers import FORMATTER, write_gene

SEED = Path(__file__).parent / "genes" / "seed_formatter.ts"


def node_gene(project: Project, name: str, code: str, *, file: str = "index.ts",
              domain: str = "formatter", wrap: bool = True, **extra: Any) -> None:
    write_gene(project.genes_dir, name, code, file=file, domain=domain, **extra)
    if wrap:
        wrap_gene(project, name)


def agent(project: Project, name: str, genes: list[str], composition: str = "seq",
          quota: int = 10 << 20) -> str:
    Agents(project).create(name, genes, composition, quota)
    return name


def entries(project: Project, name: str) -> dict[str, Any]:
    with project.open_store(name) as store:
        return {e.key: e for e in store.deployer(name).list()}


# -- the seed's example ------------------------------------------------------------


def test_the_seed_formatter_verbatim_remembers_the_indent(project: Project) -> None:
    node_gene(project, "fmt", SEED.read_text())
    agent(project, "a", ["fmt"])
    first = run_agent(project, "a", {"code": "{\nx\n}", "indent": 4})
    assert first == {"formatted": "{\n    x\n}", "indent": 4}
    assert run_agent(project, "a", {"code": "{\nx\n}"}) == first
    entry = entries(project, "a")["formatter/indent"]
    gene = project.load_gene("fmt")
    assert (entry.value, entry.category.value, entry.created_by) == (b"4", "PREFERENCE",
                                                                     gene.v2_id)
    assert entry.access_policy.read_scope.value == "SAME_DOMAIN"
    assert [(line["action"], line["actor"]) for line in audit_lines(project)] == [
        ("write", gene.v2_id)]  # the read in the second run is not logged


def test_a_typescript_and_a_python_gene_share_a_same_domain_preference(project: Project
                                                                      ) -> None:
    node_gene(project, "ts", SEED.read_text())
    write_gene(project.genes_dir, "py", FORMATTER)
    wrap_gene(project, "py")
    agent(project, "mixed", ["ts", "py"], "par")  # a par with non-WASM genes: in order
    out = run_agent(project, "mixed", {"code": "x", "indent": 6})
    assert [o["indent"] for o in out] == [6, 6]
    # The Python gene, alone in the agent now, reads what the TypeScript gene wrote.
    Agents(project).set_genes("mixed", ["py"], "seq")
    assert run_agent(project, "mixed", {"code": "x"})["indent"] == 6
    assert entries(project, "mixed")["formatter/indent"].created_by == \
        project.load_gene("ts").v2_id


# -- the four calls ------------------------------------------------------------------

CALLS = r"""
import { MemoryError } from "@rotifer/playground/memory";
import type { GeneMemoryAccess } from "@rotifer/playground/memory";

export function express(input: any, ctx: { memory: GeneMemoryAccess }) {
  const m = ctx.memory;
  const written = m.writeMemory("t/bytes", new Uint8Array([0, 255, 1, 128]), "CACHE");
  m.writeMemory("t/other", new TextEncoder().encode("zz"), "PATTERN",
                { readScope: "ALL_GENES", writeScope: "CREATOR_GENE_ONLY", sharePolicy: "PRIVATE" },
                { maxRetentionDays: 3, autoDeleteOnTermination: false, anonymizationSupported: false });
  const read = m.readMemory("t/bytes");
  const wrongCategory = m.readMemory("t/bytes", "PREFERENCE");
  const listed = m.queryMemory({ keyPrefix: "t/" }).map((e) => e.key);
  const one = m.queryMemory({ keyPrefix: "t/", category: "PATTERN", limit: 1 });
  m.deleteMemory("t/bytes");
  const codes: string[] = [];
  for (const attempt of [
    () => m.deleteMemory("t/bytes"),
    () => m.writeMemory("", new Uint8Array([1]), "CACHE"),
    () => m.writeMemory("t/x", "not bytes" as any, "CACHE"),
    () => m.writeMemory("t/x", new Uint8Array([1]), "BOGUS" as any),
    () => m.queryMemory({ nope: 1 } as any),
    () => m.writeMemory("t/y", new Uint8Array([1]), "CACHE",
                        { readScope: "DEPLOYER_CONFIGURED", writeScope: "SAME_DOMAIN", sharePolicy: "PRIVATE" }),
  ]) {
    try { attempt(); codes.push("none"); }
    catch (e) { codes.push(e instanceof MemoryError ? e.code : "other:" + String(e)); }
  }
  return {
    writtenIsBytes: written.value instanceof Uint8Array,
    value: Array.from(read!.value),
    readIsBytes: read!.value instanceof Uint8Array,
    entryId: read!.entryId, createdBy: read!.createdBy,
    wrongCategory, listed, one: one.map((e) => [e.key, e.retentionPolicy, e.accessPolicy.readScope]),
    codes, gone: m.readMemory("t/bytes"),
  };
}
"""


def test_the_four_calls_with_bytes_and_memory_errors(project: Project) -> None:
    node_gene(project, "calls", CALLS)
    agent(project, "a", ["calls"])
    out = run_agent(project, "a", {})
    gene = project.load_gene("calls")
    assert out["writtenIsBytes"] and out["readIsBytes"]
    assert out["value"] == [0, 255, 1, 128]
    assert out["createdBy"] == gene.v2_id and len(out["entryId"]) == 64
    assert out["wrongCategory"] is None
    assert out["listed"] == ["t/other", "t/bytes"]  # most recently updated first
    assert out["one"] == [["t/other", {"maxRetentionDays": 3, "autoDeleteOnTermination": False,
                                       "anonymizationSupported": False}, "ALL_GENES"]]
    assert out["codes"] == ["MEMORY_NOT_FOUND", "MEMORY_INVALID_INPUT", "MEMORY_INVALID_INPUT",
                            "MEMORY_INVALID_INPUT", "MEMORY_INVALID_INPUT",
                            "MEMORY_ACCESS_DENIED"]
    assert out["gone"] is None
    assert list(entries(project, "a")) == ["t/other"]
    actions = [line["action"] for line in audit_lines(project)]
    assert actions == ["write", "write", "delete", "access_denied"]


def test_quota_is_the_stores(project: Project) -> None:
    node_gene(project, "big", """
export function express(input: { n: number }, ctx: any) {
  try {
    ctx.memory.writeMemory("big/pref", new Uint8Array(input.n), "PREFERENCE");
    return "written";
  } catch (e: any) { return e.code; }
}""")
    agent(project, "a", ["big"], quota=1024)
    assert run_agent(project, "a", {"n": 1000}) == "written"
    assert run_agent(project, "a", {"n": 2000}) == "MEMORY_QUOTA_EXCEEDED"
    assert entries(project, "a")["big/pref"].size == 1008
    assert audit_lines(project)[-1]["action"] == "quota_exceeded"


def test_a_memory_error_the_gene_lets_escape_keeps_its_code(project: Project) -> None:
    node_gene(project, "del", "export const express = (i: any, ctx: any) => "
              "ctx.memory.deleteMemory('never/written');\n")
    agent(project, "a", ["del"])
    with pytest.raises(AgentMemoryError) as info:
        run_agent(project, "a", {})
    assert info.value.code == "MEMORY_NOT_FOUND"


# -- alone, under test, stale ----------------------------------------------------------


def test_run_alone_refuses_memory_and_audits(project: Project) -> None:
    node_gene(project, "fmt", SEED.read_text())
    with pytest.raises(AgentMemoryError) as info:
        run_gene(project, "fmt", {"code": "x", "indent": 3})
    assert info.value.code == "MEMORY_ACCESS_DENIED"
    [line] = audit_lines(project)
    assert (line["action"], line["agent"]) == ("access_denied", None)


def test_rotifer_test_gives_a_shared_temporary_memory(project: Project) -> None:
    node_gene(project, "fmt", SEED.read_text())
    (project.genes_dir / "fmt" / "tests.json").write_text(json.dumps({"cases": [
        {"name": "write", "input": {"code": "{\nx\n}", "indent": 5},
         "expect": {"formatted": "{\n     x\n}", "indent": 5}},
        {"name": "read back", "input": {"code": "{\nx\n}"},
         "expect": {"formatted": "{\n     x\n}", "indent": 5}},
    ]}))
    report = test_gene(project, "fmt")
    assert report.passed, report.cases
    assert len(report.cases) == 2
    with project.open_store() as store:
        assert store.agents() == []  # the test memory is gone


def test_a_changed_gene_has_no_id_and_its_calls_are_refused(project: Project) -> None:
    node_gene(project, "fmt", SEED.read_text())
    agent(project, "a", ["fmt"])
    (project.genes_dir / "fmt" / "index.ts").write_text(SEED.read_text() + "\n// changed\n")
    hints: list[str] = []
    with pytest.raises(AgentMemoryError) as info:
        run_agent(project, "a", {"code": "x", "indent": 2}, hints=hints)
    assert info.value.code == "MEMORY_ACCESS_DENIED"
    assert "rotifer wrap fmt" in hints[0]
    assert audit_lines(project)[-1]["actor"] is None


# -- compositions ---------------------------------------------------------------------


def test_cond_and_try_with_node_genes(project: Project) -> None:
    node_gene(project, "pred", "export const express = (i: any) => i.big;\n")
    node_gene(project, "yes", "exports.express = (i) => 'yes';\n", file="index.js")
    node_gene(project, "no", "module.exports.express = () => 'no';\n", file="index.js")
    node_gene(project, "boom", "export function express() { throw new Error('boom'); }\n")
    agent(project, "c", ["pred", "yes", "no"], "cond")
    assert run_agent(project, "c", {"big": True}) == "yes"
    assert run_agent(project, "c", {"big": 0}) == "no"
    agent(project, "t", ["boom", "yes"], "try")
    assert run_agent(project, "t", {}) == "yes"


def test_par_of_node_genes_runs_them_one_after_another(project: Project) -> None:
    counter = """
export function express(input: any, ctx: any) {
  const e = ctx.memory.readMemory("count/n");
  const n = e ? Number(new TextDecoder().decode(e.value)) + 1 : 1;
  ctx.memory.writeMemory("count/n", new TextEncoder().encode(String(n)), "CONTEXT");
  return n;
}"""
    for name in ("c1", "c2", "c3"):
        node_gene(project, name, counter + f"// {name}\n")
    agent(project, "p", ["c1", "c2", "c3"], "par")
    assert run_agent(project, "p", {}) == [1, 2, 3]  # each saw the one before


# -- failures ----------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "message"), [
    ("export function express() { throw new Error('kaput'); }", "Error: kaput"),
    ("export function express() { process.exit(3); }", "exited with status 3"),
    ("export function express() { process.kill(process.pid, 'SIGKILL'); }", "signal 9"),
    ("export function express() { return undefined; }", "not JSON"),
    ("export function express() { return 10n; }", "not JSON"),
    ("export function express() { }", "not JSON"),
    ("export const nothing = 1;", "does not export a function express"),
    ("export function express( {", "cannot be loaded"),
    ("export function express() { return express(); }", "RangeError"),
])
def test_gene_failures_are_clear(project: Project, code: str, message: str) -> None:
    write_gene(project.genes_dir, "bad", code, file="index.ts")
    with pytest.raises(GeneFailed, match=message) as run_error:
        run_gene(project, "bad", {})
    if message in ("does not export a function express", "cannot be loaded"):
        # a gene that cannot load: wrap refuses it with the run's error (issue 36)
        with pytest.raises(GeneFailed) as wrap_error:
            wrap_gene(project, "bad")
        assert str(wrap_error.value) == str(run_error.value)
    else:
        wrap_gene(project, "bad")  # it loads: only calling express fails


def test_a_hanging_gene_is_killed_at_the_deadline(project: Project) -> None:
    node_gene(project, "hang", "export function express() { for (;;) {} }")
    with pytest.raises(GeneFailed, match="timed out after 1 s"):
        run_gene(project, "hang", {}, deadline_s=1.0)


def test_rejection_and_logs_and_a_large_output(project: Project) -> None:
    node_gene(project, "rej", "export const express = () => ({__rotifer_error: "
              "{code: 'INVALID_INPUT', message: 'no code given'}});")
    with pytest.raises(GeneRejected) as info:
        run_gene(project, "rej", {})
    assert (info.value.code, info.value.message) == ("INVALID_INPUT", "no code given")

    node_gene(project, "loud", "export function express(i: any, ctx: any) {\n"
              "  console.log('hello', {a: 1}); process.stdout.write('not a message\\n');\n"
              "  ctx.log('via ctx', ctx.gene.name, ctx.agent);\n"
              "  return 'x'.repeat(i.n);\n}")
    lines: list[tuple[str, str]] = []
    out = run_gene(project, "loud", {"n": 3_000_000}, log_sink=lambda g, s: lines.append((g, s)))
    assert out == "x" * 3_000_000
    assert lines == [("loud", "hello { a: 1 }"), ("loud", "via ctx loud null")]


def test_missing_typescript_or_node_is_unavailable(project: Project,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    # (set before the wrap: wrap loads the gene, which would fill the transpile cache)
    monkeypatch.setenv("ROTIFER_NODE_MODULES", str(tmp_path / "empty"))
    node_gene(project, "fresh", "export const express = (i: number) => i + 1;\n")
    node_gene(project, "plain", "exports.express = (i) => i * 2;\n", file="index.js")
    with pytest.raises(GeneUnavailable, match="make node-deps"):
        run_gene(project, "fresh", 1)
    assert run_gene(project, "plain", 4) == 8  # JavaScript needs no compiler
    monkeypatch.delenv("ROTIFER_NODE_MODULES")
    assert run_gene(project, "fresh", 1) == 2
    monkeypatch.setenv("ROTIFER_NODE", str(tmp_path / "no-node"))
    with pytest.raises(GeneUnavailable, match=r"cannot run Node\.js"):
        run_gene(project, "plain", 4)
