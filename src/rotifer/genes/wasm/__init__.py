"""Genes that bring their own WASM, run under wasmtime with the memory host functions.

``run_wasm_gene`` runs ``gene.wasm`` (or ``gene.wat``) with the input and a
memory view; ``compile_wat`` is ``rotifer compile``.  See docs/wasm.md for the
ABI, the result codes, the limits and the module cache.
"""

from rotifer.genes.errors import rejection_of

from .compile import compile_wat
from .limits import Limits
from .runtime import (
    GeneInstance,
    prepare,
    prepare_code,
    run_wasm_code,
    run_wasm_gene,
)

__all__ = [
    "GeneInstance",
    "Limits",
    "compile_wat",
    "prepare",
    "prepare_code",
    "rejection_of",
    "run_wasm_code",
    "run_wasm_gene",
]
