"""Which TypeScript compiler runs a gene: the pinned one rotifer found
($ROTIFER_NODE_MODULES, else node_modules above the rotifer package), never
a ``node_modules/typescript`` in the user's project; and the transpile cache
is keyed by the compiler too, so switching compilers does not reuse output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rotifer.agents.build import wrap_gene
from rotifer.agents.project import Project
from rotifer.agents.run import run_gene
from rotifer.genes.node import node_modules_dir
from tests.genes.helpers import write_gene

GENE = "export const express = (i: number): number => i + 1;\n"


def fake_typescript(modules: Path, version: str) -> Path:
    """A ``typescript`` package whose transpileModule ignores the source."""
    ts = modules / "typescript"
    ts.mkdir(parents=True)
    (ts / "package.json").write_text(json.dumps({"name": "typescript", "version": version,
                                                 "main": "index.js"}))
    (ts / "index.js").write_text(
        "exports.ModuleKind = {CommonJS: 1}; exports.ScriptTarget = {ES2022: 9};\n"
        "exports.DiagnosticCategory = {Error: 1};\n"
        "exports.transpileModule = () => ({outputText: "
        f"'exports.express = () => \"fake {version}\";', diagnostics: []}});\n")
    return modules


def test_a_projects_own_typescript_is_not_used(project: Project,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROTIFER_NODE_MODULES", raising=False)
    fake_typescript(project.root / "node_modules", "4.0.0")
    write_gene(project.genes_dir, "inc", GENE, file="index.ts")
    wrap_gene(project, "inc")
    found = node_modules_dir()
    if found is None:
        pytest.fail("the typescript package is not installed: run `make node-deps` (npm ci)")
    assert project.root not in found.parents
    assert run_gene(project, "inc", 1) == 2  # the real (pinned) compiler ran


def test_the_cache_is_keyed_by_the_compiler(project: Project, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    write_gene(project.genes_dir, "inc", GENE, file="index.ts")
    wrap_gene(project, "inc")
    monkeypatch.setenv("ROTIFER_NODE_MODULES", str(fake_typescript(tmp_path / "a", "9.9.9")))
    assert run_gene(project, "inc", 1) == "fake 9.9.9"  # $ROTIFER_NODE_MODULES comes first
    monkeypatch.setenv("ROTIFER_NODE_MODULES", str(fake_typescript(tmp_path / "b", "9.9.8")))
    assert run_gene(project, "inc", 1) == "fake 9.9.8"  # not the other compiler's output
    monkeypatch.delenv("ROTIFER_NODE_MODULES")
    assert run_gene(project, "inc", 1) == 2
    assert len(list((project.cache_dir / "node").iterdir())) == 3


def test_a_gene_is_one_file(project: Project) -> None:
    """Only index.ts is transpiled (and covered by the v2 id): importing another
    .ts file fails clearly; a .js file beside it loads like a library would, as
    for Python genes, outside the id."""
    from rotifer.genes.errors import GeneFailed

    write_gene(project.genes_dir, "imp", 'import { two } from "./helper";\n'
               "export const express = () => two();\n", file="index.ts")
    (project.genes_dir / "imp" / "helper.ts").write_text("export const two = (): number => 2;\n")
    with pytest.raises(GeneFailed, match=r"cannot import '\./helper': a gene is one file") as info:
        run_gene(project, "imp", {})
    assert "Require stack" not in str(info.value)
    with pytest.raises(GeneFailed, match="a gene is one file"):  # wrap loads it too
        wrap_gene(project, "imp")
    (project.genes_dir / "imp" / "helper.js").write_text("exports.two = () => 'js';\n")
    wrap_gene(project, "imp")
    assert run_gene(project, "imp", {}) == "js"


def test_compile_of_a_typescript_gene_registers_it_and_it_keeps_memory(project: Project
                                                                      ) -> None:
    """rotifer has no TypeScript-to-WASM compiler: ``compile`` registers the same
    v2 id as ``wrap`` and the gene runs on Node.js with ctx.memory."""
    from rotifer.agents.build import compile_gene
    from rotifer.agents.genome import Agents
    from rotifer.agents.run import run_agent

    write_gene(project.genes_dir, "rem", "export function express(i: any, ctx: any) {\n"
               "  ctx.memory.writeMemory('rem/k', new Uint8Array([7]), 'CONTEXT');\n"
               "  return Array.from(ctx.memory.readMemory('rem/k').value);\n}\n",
               file="index.ts")
    compiled = compile_gene(project, "rem")
    assert compiled.v2_id is not None and compiled.v2_id == wrap_gene(project, "rem").v2_id
    Agents(project).create("a", ["rem"], "seq", 1 << 20)
    assert run_agent(project, "a", {}) == [7]
