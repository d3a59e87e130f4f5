"""Acting as one of an agent's genes from outside a run: the gene by name, its v2 id and domain.

``rotifer agent run`` hands each gene ``store.for_gene(agent, gene.v2_id,
gene.domain)``.  A program that uses an agent's memory *as* one of its genes
(``rotifer mcp AGENT --as GENE``, a LangGraph graph through
``rotifer.langgraph.RotiferStore.for_gene``) resolves the gene here, the same
way, so every rule and the audit log apply exactly as for that gene's
``ctx.memory``:

* the agent must exist (AGENT_NOT_FOUND) and list the gene (GENE_NOT_FOUND:
  acting as a gene the agent does not run would let any wrapped gene of the
  project into its memory);
* the gene's current content must be wrapped or compiled (MEMORY_ACCESS_DENIED
  otherwise, with the command that fixes it): a gene with no v2 id has every
  memory call refused, so the program is stopped at its start instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rotifer.genes.errors import GeneNotFound
from rotifer.memory.errors import denied

from .genome import Agents

if TYPE_CHECKING:
    from rotifer.genes.gene import Gene
    from rotifer.memory import GeneMemory, MemoryStore

    from .project import Project

__all__ = ["acting_gene", "gene_memory"]


def acting_gene(project: Project, agent: str, gene_name: str) -> Gene:
    """The agent's gene ``gene_name``, wrapped in its current form (see the module)."""
    spec = Agents(project).get(agent)
    if gene_name not in spec.genes:
        raise GeneNotFound(f"agent '{agent}' has no gene '{gene_name}' (its genes: "
                           f"{', '.join(spec.genes)})")
    gene = project.load_gene(gene_name)
    if gene.v2_id is None:
        raise denied(f"gene '{gene_name}' is not wrapped in its current form, so it has no v2 "
                     f"id and cannot use memory: run `rotifer wrap {gene_name}` (or compile) "
                     "first")
    return gene


def gene_memory(project: Project, store: MemoryStore, agent: str, gene_name: str, *,
                via: str | None = None) -> GeneMemory:
    """The view ``gene_name`` gets of ``agent``'s memory in ``store`` (as its
    ``ctx.memory`` in a run); ``via`` is written into its audit lines."""
    gene = acting_gene(project, agent, gene_name)
    return store.for_gene(agent, gene.v2_id, gene.domain, via=via)
