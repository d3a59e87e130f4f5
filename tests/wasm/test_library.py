"""Every WAT test gene carries the same copy of the small WAT library, and
every gene in genes/ compiles and follows the ABI."""

from __future__ import annotations

import pytest

from rotifer.genes.wasm.compile import check_wasm, wat_to_wasm

from .conftest import GENES

LIBRARY = (GENES / "library.wat").read_text()
GENE_FILES = sorted(p for p in GENES.glob("*.wat") if p.name != "library.wat")


@pytest.mark.parametrize("path", GENE_FILES, ids=lambda p: p.stem)
def test_each_gene_compiles_and_follows_the_abi(path) -> None:  # type: ignore[no-untyped-def]
    check_wasm(wat_to_wasm(path), path.name)


@pytest.mark.parametrize("path", [p for p in GENE_FILES if p.stem != "harness"],
                         ids=lambda p: p.stem)
def test_each_gene_has_the_current_library(path) -> None:  # type: ignore[no-untyped-def]
    assert LIBRARY in path.read_text(), f"{path.name}: copy library.wat into it again"


def test_there_is_a_gene_for_every_result() -> None:
    names = {p.stem for p in GENE_FILES}
    assert {"prefs", "err_out_small", "err_denied", "err_budget", "err_quota", "err_invalid",
            "err_not_found", "err_storage", "loop", "trap", "reject"} <= names
