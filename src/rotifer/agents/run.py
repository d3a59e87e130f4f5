"""Running genes: in an agent, alone, and under test.

- :func:`run_agent` -- ``rotifer agent run``: the agent's genes in its
  composition, each gene acting on the agent's memory under its own v2 id.
- :func:`run_gene` -- ``rotifer run``: the gene alone; its memory is a
  :class:`rotifer.memory.DeniedMemory`, so every call is refused with
  MEMORY_ACCESS_DENIED and recorded in the audit log.
- :func:`rotifer.agents.testing.test_gene` -- ``rotifer test``: the cases of
  ``genes/GENE/tests.json`` in order, sharing one empty, temporary agent memory that is dropped
  afterwards (also when a case fails or the run is interrupted); it first
  removes the temporary memories of test runs that were killed.

Hints.  A gene whose current content was never wrapped or compiled has no v2
id; its memory calls are refused (MEMORY_ACCESS_DENIED, audited).  The runner
then produces a hint that tells the two cases apart (see
:func:`rotifer.genes.gene.unregistered`): ``gene 'fmt' changed since it was
last wrapped, so its memory calls are refused: run `rotifer wrap fmt` again``,
or ``gene 'fmt' was never wrapped, ...: run `rotifer wrap fmt```
(``compile`` for a gene with a ``gene.wat``).  Pass a list as ``hints=`` to collect
the hints (the CLI prints them on stderr as it likes); with ``hints=None`` they
are written to stderr as ``hint: ...`` so they are never lost.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rotifer.genes.contain.sandbox import CONTAINED, Grant
from rotifer.genes.execute import DEFAULT_DEADLINE_S, express
from rotifer.genes.gene import Gene, unregistered
from rotifer.genes.python import LogSink
from rotifer.memory import DeniedMemory, GeneMemoryAccess

from .compositions import run_composition
from .genome import Agents
from .project import Project, require_memory

if TYPE_CHECKING:
    from rotifer.genes.registry import Registry
    from rotifer.memory import Clock



# -- hints ----------------------------------------------------------------------


def stale_hint(gene: Gene, registry: Registry) -> str:
    what, command = unregistered(gene, registry)
    return f"gene '{gene.name}' {what}, so its memory calls are refused: run {command}"


def _emit(hints: list[str] | None, text: str) -> None:
    if hints is None:
        print(f"hint: {text}", file=sys.stderr)
    else:
        hints.append(text)


def _note_uncontained(genes: list[Gene], grant_of: Callable[[str], Grant],
                      hints: list[str] | None, why: str) -> None:
    """Once per run and gene: a trusted Python or Node gene runs uncontained."""
    for name in dict.fromkeys(g.name for g in genes if g.kind in ("python", "node")
                              and grant_of(g.name).trusted):
        _emit(hints, f"gene '{name}' runs uncontained ({why}): it can reach everything "
              "this process can")


def _stale(genes: list[Gene], registry: Registry, hints: list[str] | None) -> None:
    seen: set[str] = set()
    for gene in genes:
        if gene.v2_id is None and gene.name not in seen:
            seen.add(gene.name)
            _emit(hints, stale_hint(gene, registry))


# -- agents ---------------------------------------------------------------------


def run_agent(project: Project, name: str, input: Any, *, hints: list[str] | None = None,
              deadline_s: float = DEFAULT_DEADLINE_S, clock: Clock | None = None,
              log_sink: LogSink | None = None) -> Any:
    """Run agent ``name`` on ``input``; return its output.

    Errors: AGENT_NOT_FOUND, GENE_NOT_FOUND (a gene was removed since), the
    gene errors (GeneRejected, GeneFailed, INVALID_INPUT, GENE_UNAVAILABLE) and
    any MemoryError a Python gene let escape.
    """
    spec = Agents(project).get(name)
    genes = [project.load_gene(g) for g in spec.genes]
    _stale(genes, project.registry(), hints)
    grant_of = spec.containment.grant
    _note_uncontained(genes, grant_of, hints, f"trusted by agent '{name}'")
    # The agent's memory must exist: a run never creates or repairs its store.
    store = project.open_store(name, clock, create=False)
    try:
        require_memory(store, name, project)

        def memory_for(gene: Gene) -> GeneMemoryAccess:
            return store.for_gene(name, gene.v2_id, gene.domain)

        def runner(gene: Gene, value: Any, memory: GeneMemoryAccess) -> Any:
            return express(gene, value, memory, deadline_s=deadline_s,
                           cache_dir=project.cache_dir, agent=name,
                           log_sink=log_sink, grant=grant_of(gene.name),
                           max_output=spec.containment.output_bytes())

        return run_composition(spec.composition, genes, input, memory_for, runner)
    finally:
        store.close()


# -- a gene alone ---------------------------------------------------------------


def denied_memory(project: Project, gene: Gene) -> DeniedMemory:
    """What ``rotifer run`` gives a gene: refuses every call, audited in the project."""
    from rotifer.memory import AuditLog

    return DeniedMemory(
        "memory calls only work when the gene runs as part of an agent (`rotifer run` runs "
        "it alone; use `rotifer test` or `rotifer agent run`)",
        audit=AuditLog(project.dot / "audit.jsonl", project.dot / "telemetry.jsonl"),
        actor=gene.v2_id,
    )


def _grant(trusted: bool) -> Grant:
    return Grant(trusted=True) if trusted else CONTAINED


def run_gene(project: Project, gene_name: str, input: Any, *,
             deadline_s: float = DEFAULT_DEADLINE_S, log_sink: LogSink | None = None,
             trusted: bool = False, hints: list[str] | None = None) -> Any:
    """Run one gene on ``input`` outside any agent (every memory call refused);
    ``trusted``: uncontained (``rotifer run --trust``)."""
    gene = project.load_gene(gene_name)
    _note_uncontained([gene], lambda _: _grant(trusted), hints, "--trust")
    return express(gene, input, denied_memory(project, gene), deadline_s=deadline_s,
                   cache_dir=project.cache_dir, agent=None, log_sink=log_sink,
                   grant=_grant(trusted))


__all__ = [
    "run_agent",
    "run_gene",
    "stale_hint",
]
