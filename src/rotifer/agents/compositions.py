"""How an agent's genes compose: ``seq``, ``par``, ``cond`` and ``try``.

- ``seq``  [g1, g2, ...]: g1 gets the agent's input, each next gene gets the
  output of the one before; the output is the last gene's output.
- ``par``  [g1, g2, ...]: every gene gets the same input; the output is the
  list of their outputs, in gene order.  If any gene fails, the run fails with
  the error of the first failing gene in gene order (the others still ran, so
  what they wrote to memory stays).
- ``cond`` [pred, then, else]: ``pred`` runs on the input; if its output is
  truthy, ``then`` runs on the *same input*, else ``else`` does; the output is
  the chosen gene's output.  Truthy as in JSON-minded Python: ``false``,
  ``null``, ``0``, ``""``, ``[]`` and ``{}`` choose ``else``, everything
  else chooses ``then``.  Only the chosen branch runs.
- ``try``  [g1, g2, ...]: g1 runs on the input; if it fails (rejects its
  input, crashes, has an input its schema refuses, lets a memory error
  escape, or its runtime is unavailable) g2 runs on the same input, and so
  on.  The output is the first success; if all fail, the last gene's error is
  raised.

Memory: every gene acts under its own v2 id (``memory_for(gene)``, which the
runner builds from ``store.for_gene(agent, gene.v2_id, gene.domain)``).  The
seed's rule for concurrency: a composition that holds a gene that is not a
WASM gene (a Python or Node gene) runs its genes one after another, so each
can read what the one before wrote.  ``cond`` and ``try`` are sequential by
nature; ``par`` runs its genes in parallel threads only when all of them are
WASM genes (wasmtime releases the GIL while guest code runs; each gene gets its
own memory view and the store is thread-safe).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rotifer.genes.errors import (
    GeneFailed,
    GeneRejected,
    GeneUnavailable,
    InvalidComposition,
    InvalidGene,
    InvalidInput,
)
from rotifer.genes.gene import Gene
from rotifer.memory.errors import AgentMemoryError

if TYPE_CHECKING:  # speed: rotifer.memory's GeneMemoryAccess lives with the store
    from rotifer.memory import GeneMemoryAccess

MemoryFor = Callable[[Gene], "GeneMemoryAccess"]
"""The memory a gene's calls reach in this run."""

Runner = Callable[[Gene, Any, "GeneMemoryAccess"], Any]
"""Runs one gene (normally :func:`rotifer.genes.execute.express` with the run's options)."""

#: Errors after which ``try`` moves on to the next gene.
FALLBACK_ERRORS: tuple[type[BaseException], ...] = (
    GeneRejected, GeneFailed, GeneUnavailable, InvalidInput, InvalidGene, AgentMemoryError,
)


def runs_in_parallel(composition: str, genes: Sequence[Gene]) -> bool:
    """True when ``par`` may run these genes in threads: all are WASM genes."""
    return composition == "par" and len(genes) > 1 and all(g.kind == "wasm" for g in genes)


def truthy(value: Any) -> bool:
    """How ``cond`` reads its predicate's output (see the module docstring)."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True


def run_composition(composition: str, genes: Sequence[Gene], input: Any,
                    memory_for: MemoryFor, runner: Runner) -> Any:
    """Run ``genes`` on ``input`` composed as ``composition``."""
    if not genes:
        raise InvalidComposition("a composition needs at least one gene")
    if composition == "seq":
        value = input
        for gene in genes:
            value = runner(gene, value, memory_for(gene))
        return value
    if composition == "par":
        return _par(genes, input, memory_for, runner)
    if composition == "cond":
        if len(genes) != 3:
            raise InvalidComposition(
                f"cond needs exactly 3 genes (predicate, then, else), got {len(genes)}")
        predicate, then, otherwise = genes
        chosen = then if truthy(runner(predicate, input, memory_for(predicate))) else otherwise
        return runner(chosen, input, memory_for(chosen))
    if composition == "try":
        if len(genes) < 2:
            raise InvalidComposition(f"try needs at least 2 genes, got {len(genes)}")
        last: BaseException | None = None
        for gene in genes:
            try:
                return runner(gene, input, memory_for(gene))
            except FALLBACK_ERRORS as exc:
                last = exc
        assert last is not None
        raise last
    raise InvalidComposition(f"unknown composition {composition!r}")


def _par(genes: Sequence[Gene], input: Any, memory_for: MemoryFor, runner: Runner) -> list[Any]:
    memories = [memory_for(g) for g in genes]
    if not runs_in_parallel("par", genes):
        outcomes: list[tuple[bool, Any]] = []
        for gene, memory in zip(genes, memories, strict=True):
            try:
                outcomes.append((True, runner(gene, input, memory)))
            except Exception as exc:
                outcomes.append((False, exc))
    else:
        # Speed: imported by `par` alone (concurrent.futures brings logging and queue).
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(genes), thread_name_prefix="rotifer-par") as pool:
            futures = [pool.submit(runner, g, input, m)
                       for g, m in zip(genes, memories, strict=True)]
            outcomes = []
            for future in futures:
                failure = future.exception()
                outcomes.append((False, failure) if failure is not None
                                else (True, future.result()))
    for ok, value in outcomes:
        if not ok:
            raise value
    return [value for _, value in outcomes]
