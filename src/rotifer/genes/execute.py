"""One entry point to run a gene of any kind: :func:`express`.

The runners for each kind live in their own modules and are imported only
when a gene of that kind runs, so the CLI does not pay for wasmtime (or the
Node bridge) to run a Python gene.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from rotifer.genes.errors import GeneUnavailable
from rotifer.genes.gene import Gene
from rotifer.genes.phenotype import validate_input
from rotifer.genes.python import LogSink
from rotifer.memory import GeneMemoryAccess

DEFAULT_DEADLINE_S = 10.0


def express(gene: Gene, input: Any, memory: GeneMemoryAccess, *,
            deadline_s: float = DEFAULT_DEADLINE_S, cache_dir: Path | None = None,
            agent: str | None = None, log_sink: LogSink | None = None) -> Any:
    """Run ``gene`` on ``input`` with ``memory`` as what its memory calls reach.

    The input is checked against the phenotype's ``inputSchema`` first
    (INVALID_INPUT).  Raises GeneRejected, GeneFailed, GeneUnavailable, or a
    MemoryError a Python gene let escape.  ``cache_dir`` is where compiled WASM
    modules are kept between runs; ``agent`` and ``log_sink`` reach a Python
    gene as ``ctx.agent`` and ``ctx.log``.
    """
    validate_input(gene.phenotype, input)
    if gene.kind == "python":
        from rotifer.genes.python import run_python_gene

        return run_python_gene(gene, input, memory, deadline_s=deadline_s, agent=agent,
                               log_sink=log_sink)
    if gene.kind == "wasm":
        try:
            from rotifer.genes.wasm import run_wasm_code
        except ImportError as exc:  # pragma: no cover - wasmtime is a dependency
            raise GeneUnavailable(
                f"gene '{gene.name}' needs wasmtime, which cannot be imported: {exc}"
            ) from None
        return run_wasm_code(gene.code, gene.code_file.name, input, memory, name=gene.name,
                             deadline_s=deadline_s, cache_dir=cache_dir)
    if gene.kind == "node":
        try:
            node = importlib.import_module("rotifer.genes.node")
        except ModuleNotFoundError as exc:
            if exc.name != "rotifer.genes.node":
                raise
            node = None
        run_node_gene = getattr(node, "run_node_gene", None)
        if run_node_gene is None:
            raise GeneUnavailable(
                f"gene '{gene.name}' is a Node.js gene ({gene.code_file.name}), and this "
                "installation has no Node.js runner"
            )
        return run_node_gene(gene, input, memory, deadline_s=deadline_s)
    raise GeneUnavailable(f"gene '{gene.name}' has an unknown kind {gene.kind!r}")
