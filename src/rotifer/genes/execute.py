"""One entry point to run a gene of any kind: :func:`express`.

The runners for each kind live in their own modules and are imported only
when a gene of that kind runs, so the CLI does not pay for wasmtime (or the
Node bridge) to run a Python gene.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rotifer.genes.contain.sandbox import CONTAINED, MAX_OUTPUT_BYTES, Grant
from rotifer.genes.errors import GeneFailed, GeneUnavailable, InvalidInput
from rotifer.genes.gene import Gene
from rotifer.genes.jsonvalue import problem_of
from rotifer.genes.phenotype import validate_input

if TYPE_CHECKING:  # speed: rotifer.memory's GeneMemoryAccess lives with the store
    from rotifer.genes.python import LogSink  # (and a contained run needs no gene runtime here)
    from rotifer.memory import GeneMemoryAccess

DEFAULT_DEADLINE_S = 10.0


def _level_dropped(sink: LogSink, name: str) -> Callable[[int, str], None]:
    """A WASM gene's log lines carry a level; the runner's sink takes
    ``(gene, line)`` like a Python or Node gene's ``ctx.log``."""
    return lambda level, line: sink(name, line)


def express(gene: Gene, input: Any, memory: GeneMemoryAccess, *,
            deadline_s: float = DEFAULT_DEADLINE_S, cache_dir: Path | None = None,
            agent: str | None = None, log_sink: LogSink | None = None,
            grant: Grant = CONTAINED, max_output: int = MAX_OUTPUT_BYTES) -> Any:
    """Run ``gene`` on ``input`` with ``memory`` as what its memory calls reach.

    A Python or Node gene runs contained (:mod:`rotifer.genes.contain`) unless
    ``grant.trusted``; ``grant`` also carries its TCP ports and memory limit.

    The input is checked first: that it is exactly JSON (no NaN or Infinity,
    no lone surrogates: see :mod:`rotifer.genes.jsonvalue`), then against the
    phenotype's ``inputSchema`` (both INVALID_INPUT).  The output is held to the
    same JSON rule (GENE_FAILED).  Raises GeneRejected, GeneFailed,
    GeneUnavailable, or a MemoryError a gene let escape.  ``cache_dir`` is where compiled WASM
    modules (``cache_dir/wasm``) and transpiled TypeScript (``cache_dir/node``)
    are kept between runs; ``agent`` and ``log_sink`` reach a Python
    or Node gene as ``ctx.agent`` and ``ctx.log``; ``log_sink`` also gets a
    WASM gene's log (``log``, ``trace``, WASI stdout/stderr lines).  ``max_output``
    caps what a Python or Node gene's child passes on of its output, ``print``,
    ``ctx.log`` and raw writes together (``agent create --gene-output``).
    """
    problem = problem_of(input, "input")
    if problem is not None:
        raise InvalidInput(f"gene '{gene.name}': {problem}")
    validate_input(gene.phenotype, input)
    output = _run(gene, input, memory, deadline_s=deadline_s, cache_dir=cache_dir,
                  agent=agent, log_sink=log_sink, grant=grant, max_output=max_output)
    problem = problem_of(output, "output")
    if problem is not None:
        raise GeneFailed(f"gene '{gene.name}' returned a value that is not JSON: {problem}")
    return output


def _run(gene: Gene, input: Any, memory: GeneMemoryAccess, *, deadline_s: float,
         cache_dir: Path | None, agent: str | None, log_sink: LogSink | None,
         grant: Grant, max_output: int) -> Any:
    if gene.kind == "python":
        if grant.trusted:
            from rotifer.genes.python import run_python_gene

            return run_python_gene(gene, input, memory, deadline_s=deadline_s, agent=agent,
                                   log_sink=log_sink)
        from rotifer.genes.contain.python_host import run_contained

        return run_contained(gene, input, memory, deadline_s=deadline_s, agent=agent,
                             log_sink=log_sink, grant=grant, max_output=max_output)
    if gene.kind == "wasm":
        try:
            from rotifer.genes.wasm import run_wasm_code
        except ImportError as exc:  # pragma: no cover - wasmtime is a dependency
            raise GeneUnavailable(
                f"gene '{gene.name}' needs wasmtime, which cannot be imported: {exc}"
            ) from None
        sink = None if log_sink is None else _level_dropped(log_sink, gene.name)
        return run_wasm_code(gene.code, gene.code_file.name, input, memory, name=gene.name,
                             deadline_s=deadline_s, log_sink=sink,
                             cache_dir=None if cache_dir is None else cache_dir / "wasm")
    if gene.kind == "node":
        from rotifer.genes.node import run_node_gene

        return run_node_gene(gene, input, memory, deadline_s=deadline_s, agent=agent,
                             log_sink=log_sink, grant=grant, max_output=max_output,
                             cache_dir=None if cache_dir is None else cache_dir / "node")
    raise GeneUnavailable(f"gene '{gene.name}' has an unknown kind {gene.kind!r}")


def check_loads(gene: Gene, *, deadline_s: float = DEFAULT_DEADLINE_S,
                cache_dir: Path | None = None, log_sink: LogSink | None = None,
                grant: Grant = CONTAINED) -> None:
    """Load ``gene`` as a run does, without calling ``express``: a Python or
    Node gene's module runs (contained unless ``grant.trusted``) and must
    define ``express`` as a plain function.  Raises what a run would raise for
    the same code: INVALID_GENE (no ``express``, not callable), GENE_FAILED
    (an import that fails, a crash while loading, ``async def express``),
    GENE_UNAVAILABLE (no Node.js or TypeScript, a machine that cannot confine
    the gene).  A WASM gene is checked by :func:`rotifer.genes.wasm.compile.check_wasm`
    (``wrap`` does that) and passes here."""
    from rotifer.memory import DeniedMemory

    memory = DeniedMemory("a gene has no memory while it is loaded to be checked")
    if gene.kind == "python":
        if grant.trusted:
            from rotifer.genes.python import run_python_gene

            run_python_gene(gene, None, memory, deadline_s=deadline_s, log_sink=log_sink,
                            check=True)
            return
        from rotifer.genes.contain.python_host import run_contained

        run_contained(gene, None, memory, deadline_s=deadline_s, agent=None,
                      log_sink=log_sink, grant=grant, check=True)
    elif gene.kind == "node":
        from rotifer.genes.node import run_node_gene

        run_node_gene(gene, None, memory, deadline_s=deadline_s, log_sink=log_sink,
                      grant=grant, check=True,
                      cache_dir=None if cache_dir is None else cache_dir / "node")
