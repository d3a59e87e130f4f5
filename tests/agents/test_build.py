"""wrap and compile: check the gene, then register its current v2 id."""

from __future__ import annotations

import json

import pytest

from rotifer.agents.build import compile_gene, wrap_gene
from rotifer.agents.project import Project
from rotifer.genes.errors import CompileFailed, GeneNotFound, InvalidGene, InvalidPhenotype
from rotifer.genes.registry import Registry
from rotifer.genes.wasm.compile import wat_to_wasm

from ..genes.helpers import FORMATTER, write_gene, write_wat_gene


def registered(project: Project) -> dict[str, dict[str, object]]:
    return Registry(project.dot).entries()


def test_wrap_python_gene(project: Project) -> None:
    write_gene(project.genes_dir, "fmt", FORMATTER)
    gene = wrap_gene(project, "fmt")
    assert gene.v2_id == gene.computed_id and gene.v2_id is not None
    assert registered(project)[gene.v2_id]["via"] == "wrap"
    assert project.load_gene("fmt").v2_id == gene.v2_id
    again = compile_gene(project, "fmt")  # compile of a Python gene is wrap
    assert again.v2_id == gene.v2_id


def test_compile_wat_writes_wasm_and_registers_it(project: Project) -> None:
    folder = write_wat_gene(project.genes_dir, "prefs", "prefs")
    gene = compile_gene(project, "prefs")
    wasm = folder / "gene.wasm"
    assert wasm.read_bytes() == wat_to_wasm(folder / "gene.wat")
    assert gene.code_file == wasm and gene.kind == "wasm"
    entry = registered(project)[gene.v2_id or ""]
    assert entry["codeFile"] == "gene.wasm" and entry["via"] == "compile"
    assert project.load_gene("prefs").v2_id == gene.v2_id


def test_wrap_wat_registers_the_wat(project: Project) -> None:
    write_wat_gene(project.genes_dir, "prefs", "prefs")
    gene = wrap_gene(project, "prefs")
    assert gene.code_file.name == "gene.wat" and gene.v2_id is not None


def test_compile_bad_wat_changes_nothing(project: Project) -> None:
    folder = write_gene(project.genes_dir, "bad", "(module (func $f (result i32))",
                        file="gene.wat")
    with pytest.raises(CompileFailed, match=r"COMPILE_FAILED: gene\.wat is not valid WAT"):
        compile_gene(project, "bad")
    assert not (folder / "gene.wasm").exists()
    assert registered(project) == {}


def test_compile_module_without_the_abi(project: Project) -> None:
    write_gene(project.genes_dir, "noabi", "(module)", file="gene.wat")
    with pytest.raises(CompileFailed, match="ABI"):
        compile_gene(project, "noabi")
    assert registered(project) == {}


def test_wrap_bad_wasm_is_invalid_gene(project: Project) -> None:
    write_gene(project.genes_dir, "bad", b"\0asm junk", file="gene.wasm")
    with pytest.raises(InvalidGene, match="not a valid WebAssembly module"):
        wrap_gene(project, "bad")
    assert registered(project) == {}


def test_wrap_python_syntax_error(project: Project) -> None:
    write_gene(project.genes_dir, "bad", "def express(:\n")
    with pytest.raises(InvalidGene, match=r"gene\.py line 1"):
        wrap_gene(project, "bad")
    assert registered(project) == {}


def test_wrap_errors(project: Project) -> None:
    with pytest.raises(GeneNotFound):
        wrap_gene(project, "nope")
    with pytest.raises(GeneNotFound):
        compile_gene(project, "nope")
    with pytest.raises(InvalidGene):
        compile_gene(project, "../x")
    folder = write_wat_gene(project.genes_dir, "p", "prefs")
    (folder / "phenotype.json").write_text(json.dumps({"name": "p"}))
    with pytest.raises(InvalidPhenotype):
        compile_gene(project, "p")
    assert not (folder / "gene.wasm").exists()
