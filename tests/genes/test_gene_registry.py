"""Loading gene folders and the project registry of wrapped/compiled ids."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from rotifer.genes.errors import GeneNotFound, InvalidGene, InvalidPhenotype, RegistryError
from rotifer.genes.gene import load_gene, register_gene
from rotifer.genes.registry import Registry

from .helpers import write_gene

CODE = "def express(input, ctx):\n    return input\n"


def test_missing_gene(tmp_path: Path) -> None:
    with pytest.raises(GeneNotFound) as info:
        load_gene(tmp_path, "nope")
    assert str(info.value).startswith("GENE_NOT_FOUND: no gene 'nope'")


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "-x", ".hidden", "a b",
                                  "x" * 129, "é"])
def test_invalid_gene_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidGene, match="invalid gene name"):
        load_gene(tmp_path, name)


def test_gene_without_code_file(tmp_path: Path) -> None:
    folder = write_gene(tmp_path, "g", CODE)
    (folder / "gene.py").unlink()
    (folder / "README").write_text("no code")
    with pytest.raises(InvalidGene, match="has no code file"):
        load_gene(tmp_path, "g")


def test_phenotype_errors_surface(tmp_path: Path) -> None:
    folder = write_gene(tmp_path, "g", CODE)
    (folder / "phenotype.json").write_text('{"name": "g"}')
    with pytest.raises(InvalidPhenotype, match=r"g/phenotype\.json: missing field"):
        load_gene(tmp_path, "g")


def test_code_file_precedence(tmp_path: Path) -> None:
    folder = write_gene(tmp_path, "g", CODE)
    assert load_gene(tmp_path, "g").kind == "python"
    (folder / "gene.wat").write_text("(module)")
    assert load_gene(tmp_path, "g").code_file.name == "gene.wat"
    (folder / "gene.wasm").write_bytes(b"\0asm\1\0\0\0")
    gene = load_gene(tmp_path, "g")
    assert (gene.kind, gene.code_file.name, gene.code) == ("wasm", "gene.wasm",
                                                           b"\0asm\1\0\0\0")
    (folder / "gene.wasm").unlink()
    (folder / "gene.wat").unlink()
    (folder / "gene.py").unlink()
    (folder / "index.js").write_text("module.exports = {}")
    assert load_gene(tmp_path, "g").kind == "node"


def test_registered_content_gets_its_v2_id(tmp_path: Path) -> None:
    genes = tmp_path / "genes"
    dot = tmp_path / ".rotifer"
    folder = write_gene(genes, "g", CODE, domain="fmt")
    registry = Registry(dot)
    gene = load_gene(genes, "g", registry)
    assert gene.v2_id is None and gene.domain == "fmt"
    registered = register_gene(gene, registry, via="wrap")
    assert registered.v2_id == gene.computed_id
    # a fresh reader (another process) sees it
    assert load_gene(genes, "g", Registry(dot)).v2_id == gene.computed_id
    doc = json.loads((dot / "genes.json").read_text())
    entry = doc["genes"][gene.computed_id]
    assert doc["format"] == 1
    assert entry["name"] == "g" and entry["via"] == "wrap" and entry["codeFile"] == "gene.py"
    assert entry["registeredAt"].endswith("Z")
    # a change of content loses the id, going back to registered content restores it
    (folder / "gene.py").write_text(CODE + "# changed\n")
    changed = load_gene(genes, "g", Registry(dot))
    assert changed.v2_id is None and changed.computed_id != gene.computed_id
    (folder / "gene.py").write_text(CODE)
    assert load_gene(genes, "g", Registry(dot)).v2_id == gene.computed_id


def test_re_registering_keeps_the_first_record(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    registry.register("v2:" + "a" * 64, {"via": "wrap"})
    first = Registry(tmp_path).entries()["v2:" + "a" * 64]
    registry.register("v2:" + "a" * 64, {"via": "compile"})
    assert Registry(tmp_path).entries()["v2:" + "a" * 64] == first


def test_concurrent_registrations_are_all_kept(tmp_path: Path) -> None:
    ids = [f"v2:{i:064x}" for i in range(16)]

    def register(gene_id: str) -> None:
        Registry(tmp_path).register(gene_id, {"via": "wrap"})

    threads = [threading.Thread(target=register, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(Registry(tmp_path).entries()) == ids


@pytest.mark.parametrize("content", ["{", "[]", '{"genes": 3}'])
def test_corrupt_registry(tmp_path: Path, content: str) -> None:
    (tmp_path / "genes.json").write_text(content)
    with pytest.raises(RegistryError) as info:
        Registry(tmp_path).is_registered("v2:" + "a" * 64)
    assert info.value.code == "REGISTRY_ERROR"
    with pytest.raises(RegistryError):
        Registry(tmp_path).register("v2:" + "a" * 64, {})
    assert (tmp_path / "genes.json").read_text() == content
