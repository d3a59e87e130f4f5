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

from .compositions import run_composition
from .genome import Agents
from .project import Project, require_memory

if TYPE_CHECKING:
    from rotifer.genes.python import LogSink  # speed: a contained run needs no gene runtime here
    from rotifer.genes.registry import Registry
    from rotifer.memory import Clock, DeniedMemory, GeneMemoryAccess, MemoryStore
    from rotifer.memory.storage.backend import Backend



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
    memory = _Memory(project, name, project.open_backend(name), clock)
    try:
        memory.require()

        def memory_for(gene: Gene) -> GeneMemoryAccess:
            return memory.for_gene(gene)

        def runner(gene: Gene, value: Any, memory: GeneMemoryAccess) -> Any:
            return express(gene, value, memory, deadline_s=deadline_s,
                           cache_dir=project.cache_dir, agent=name,
                           log_sink=log_sink, grant=grant_of(gene.name),
                           max_output=spec.containment.output_bytes())

        return run_composition(spec.composition, genes, input, memory_for, runner)
    finally:
        memory.close()


class _Memory:
    """The agent's memory during a run: its backend, open from the start; the
    store around it (the audit log, the engine, the views: the store's write
    path) made at the first memory call of any of its genes.

    Speed: a run whose genes make no memory call imports none of that (~35 M
    instructions of a one-gene ``agent run``, tests/cli/test_startup_imports.py).
    What a run refused before its first gene it still refuses then, through
    the backend: an agent without memory (:func:`require_memory`'s error) and
    a read-only standby (:meth:`MemoryStore.for_gene`'s); each gene's view is
    :meth:`MemoryStore.for_gene`'s, made at its first call."""

    def __init__(self, project: Project, name: str, backend: Backend,
                 clock: Clock | None) -> None:
        self.project, self.name, self.backend, self.clock = project, name, backend, clock
        self._store: MemoryStore | None = None

    def store(self) -> MemoryStore:
        if self._store is None:
            from rotifer.memory.store import MemoryStore

            self._store = MemoryStore.on(self.backend, self.project.dot, self.clock)
        return self._store

    def require(self) -> None:
        with self.backend.peek() as tx:
            present = tx.get_agent(self.name) is not None
        if not present:  # the store says why, as every command does
            require_memory(self.store(), self.name, self.project)

    def for_gene(self, gene: Gene) -> GeneMemoryAccess:
        if self.backend.read_only:  # refused now, before the gene runs
            return self.store().for_gene(self.name, gene.v2_id, gene.domain)
        return _GeneMemoryLater(self, gene)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        else:
            self.backend.close()


class _GeneMemoryLater:
    """``ctx.memory`` of one gene of a run: :meth:`MemoryStore.for_gene`'s view,
    made at the gene's first call (see :class:`_Memory`)."""

    def __init__(self, memory: _Memory, gene: Gene) -> None:
        self._memory, self._gene = memory, gene
        self._view: GeneMemoryAccess | None = None

    def _now(self) -> GeneMemoryAccess:
        if self._view is None:
            m, gene = self._memory, self._gene
            view = self._view = m.store().for_gene(m.name, gene.v2_id, gene.domain)
            # The gene's later calls go to the view itself, not through here.
            self.read_memory = view.read_memory  # type: ignore[method-assign]
            self.write_memory = view.write_memory  # type: ignore[method-assign]
            self.query_memory = view.query_memory  # type: ignore[method-assign]
            self.delete_memory = view.delete_memory  # type: ignore[method-assign]
        return self._view

    def read_memory(self, key: str, category: Any = None) -> Any:
        return self._now().read_memory(key, category)

    def write_memory(self, *args: Any, **kwargs: Any) -> Any:
        return self._now().write_memory(*args, **kwargs)

    def query_memory(self, filter: Any = None) -> Any:
        return self._now().query_memory(filter)

    def delete_memory(self, key: str) -> None:
        self._now().delete_memory(key)


# -- a gene alone ---------------------------------------------------------------


def denied_memory(project: Project, gene: Gene) -> DeniedMemory:
    """What ``rotifer run`` gives a gene: refuses every call, audited in the project."""
    from rotifer.memory import AuditLog, DeniedMemory

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
