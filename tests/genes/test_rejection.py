"""``rejection_of``: the one rule, for every kind of gene, that an output of a lone
``{"__rotifer_error": {...}}`` is a rejection of the input."""

from __future__ import annotations

from typing import Any

import pytest

import rotifer.genes.wasm
import rotifer.genes.wasm.runtime
from rotifer.genes.errors import GeneRejected, rejection_of


@pytest.mark.parametrize(("output", "expected"), [
    ({"__rotifer_error": {"code": "TOO_LONG", "message": "m"}}, ("TOO_LONG", "m")),
    ({"__rotifer_error": {"code": "", "message": "m"}}, ("GENE_REJECTED", "m")),
    ({"__rotifer_error": {"code": 3, "message": 4}}, ("GENE_REJECTED", "")),
    ({"__rotifer_error": "no body"}, ("GENE_REJECTED", "")),
    ({"__rotifer_error": {}, "other": 1}, None),
    ([{"__rotifer_error": {}}], None),
    ("__rotifer_error", None),
])
def test_rejection_of(output: Any, expected: tuple[str, str] | None) -> None:
    rejection = rejection_of(output)
    if expected is None:
        assert rejection is None
    else:
        assert isinstance(rejection, GeneRejected)
        assert (rejection.code, rejection.message) == expected


def test_the_wasm_runtime_uses_the_one_rejection_of() -> None:
    """No copy of the rule lives in the WASM runtime (issue 21): a change to it
    reaches every kind of gene."""
    assert rotifer.genes.wasm.runtime.rejection_of is rejection_of
    assert rotifer.genes.wasm.rejection_of is rejection_of
