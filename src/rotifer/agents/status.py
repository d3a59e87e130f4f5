"""What ``agent list``, ``agent show`` and the console say of an agent's genes
beyond its spec: each gene's kind as its folder says now, and which genes
changed since they were wrapped (their memory calls are refused until they are
wrapped again: see :func:`rotifer.genes.gene.unregistered`)."""

from __future__ import annotations

from rotifer.genes.errors import RotiferError

from .genome import AgentSpec
from .project import Project

#: How an agent without grants runs, in ``agent list`` (``agent show`` says it per gene).
CONTAINED, WASM = "contained", "WASM sandbox"


class GenesState:
    """Speed: a plain class, not a dataclass (~3.5 M instructions to create, a
    part of ``rotifer agent list``'s start-up)."""

    __slots__ = ("kinds", "stale")

    def __init__(self, kinds: dict[str, str | None], stale: dict[str, str]) -> None:
        self.kinds = kinds  # gene -> "python" | "node" | "wasm"; None: does not load
        self.stale = stale  # gene -> "changed since it was last wrapped: run ..."

    def runs(self) -> str:
        """One word for the agent: WASM sandbox when every gene is WASM, else
        contained (grants are listed beside it by the caller)."""
        kinds = set(self.kinds.values())
        return WASM if kinds == {"wasm"} else CONTAINED


def genes_state(project: Project, spec: AgentSpec) -> GenesState:
    from rotifer.genes.gene import unregistered

    kinds: dict[str, str | None] = {}
    stale: dict[str, str] = {}
    for name in dict.fromkeys(spec.genes):
        try:
            gene = project.load_gene(name)
        except RotiferError:
            kinds[name] = None
            continue
        kinds[name] = gene.kind
        if gene.v2_id is None:
            what, command = unregistered(gene, project.registry())
            stale[name] = f"{what}: its memory calls are refused; run {command}"
    return GenesState(kinds, stale)
