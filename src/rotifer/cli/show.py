"""``rotifer agent show NAME [--json]``: one agent's spec, as a deployer reads it.

What ``agent list`` gives in one row, spelled out: the composition, each gene
(its language, domain and version, as its phenotype says now) with what the
deployer granted it beyond containment -- trusted (uncontained), the TCP ports
it may connect to, the memory limit of its child process with the default
named -- and the agent's memory (used bytes, quota, entries per category, the
store, the data policy).  Issue 23 keeps the containment choice in the spec so
that a deployer can see, before a run, which genes run uncontained.

Like ``agent list`` it shows all it can: a gene that no longer loads (removed,
a broken phenotype) or a memory that is gone gets a ``CODE: message`` line on
stderr and makes the exit status 1, and the rest is still shown.  Text a gene's
phenotype controls (domain, version) is shown escaped (:func:`common.shown`);
``--json`` keeps it exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from . import common

if TYPE_CHECKING:
    from rotifer.agents.genome import AgentSpec
    from rotifer.agents.project import Project
    from rotifer.genes.gene import Gene

#: How each way a gene runs reads in the table (see rotifer.genes.execute).
CONTAINED, TRUSTED, WASM, UNKNOWN = "contained", "TRUSTED (uncontained)", "WASM sandbox", "?"


@dataclass(frozen=True)
class GeneShown:
    """One gene of the agent: what its folder says now and what it is granted."""

    name: str
    gene: Gene | None  # None: it does not load (the error is reported)
    trusted: bool
    tcp_ports: tuple[int, ...]
    memory_mib: int | None  # the child's limit; None when no child is limited

    @property
    def how(self) -> str:
        kind = self.gene.kind if self.gene is not None else None
        if kind == "wasm":
            return WASM  # --trust and --gene-memory do not apply to WASM genes
        if self.trusted:
            return TRUSTED
        return CONTAINED if kind is not None else UNKNOWN

    def to_json(self, default_mib: bool) -> dict[str, Any]:
        gene = self.gene
        return {"name": self.name,
                "kind": gene.kind if gene else None,
                "domain": gene.domain if gene else None,
                "version": gene.phenotype.version if gene else None,
                "v2Id": gene.v2_id if gene else None,
                "changedSinceWrapped": gene.v2_id is None if gene else None,
                "containment": {"runs": {CONTAINED: "contained", TRUSTED: "trusted",
                                         WASM: "wasm", UNKNOWN: None}[self.how],
                                "allowTcp": list(self.tcp_ports),
                                "memoryMiB": self.memory_mib,
                                "memoryIsDefault": default_mib if self.memory_mib else None}}


def _genes(project: Project, spec: AgentSpec, errors: list[Exception]) -> list[GeneShown]:
    from rotifer.genes.errors import RotiferError

    shown = []
    for name in dict.fromkeys(spec.genes):
        gene: Gene | None = None
        try:
            gene = project.load_gene(name)
        except RotiferError as exc:
            errors.append(exc)
        grant = spec.containment.grant(name)
        limited = gene is not None and gene.kind != "wasm" and not grant.trusted
        shown.append(GeneShown(name, gene, grant.trusted, grant.tcp_ports,
                               grant.memory_mib if limited else None))
    return shown


def _memory(project: Project, name: str, errors: list[Exception]) -> dict[str, Any] | None:
    """The agent's memory as ``agent list`` counts it (expired entries removed
    first), with its entries per category; None (and the error) when it cannot
    be read."""
    from rotifer.agents.project import require_memory
    from rotifer.genes.errors import RotiferError
    from rotifer.memory import AgentMemoryError
    from rotifer.memory.transfer import describe
    from rotifer.memory.views.browse import usage_by_category

    try:
        with project.open_store(name, create=False) as store:
            require_memory(store, name, project)
            used, quota = store.usage(name)
            by_category = usage_by_category(store, name)
            policy = store.agent_record(name).data_policy
            where = describe(store)
    except (RotiferError, AgentMemoryError) as exc:
        errors.append(exc)
        return None
    return {"store": where, "usedBytes": used, "quotaBytes": quota,
            "entries": sum(u.count for u in by_category.values()),
            "byCategory": {c.value: {"entries": u.count, "bytes": u.bytes}
                           for c, u in by_category.items()},
            "dataPolicy": policy.to_json()}


def _memory_lines(memory: dict[str, Any]) -> list[str]:
    used, quota = memory["usedBytes"], memory["quotaBytes"]
    parts = [f"{c} {u['entries']}" for c, u in memory["byCategory"].items() if u["entries"]]
    policy = memory["dataPolicy"]
    days = policy["maxRetentionDays"]
    return [f"Memory:       {common.human_size(used)} of {common.human_size(quota)} "
            f"({100 * used / quota:.1f}%), "
            f"{common.plural(memory['entries'], 'entry', 'entries')}"
            + (f" ({', '.join(parts)})" if parts else ""),
            f"Store:        {common.shown(memory['store'])}",
            "Data policy:  " + ("no retention limit" if days is None else
                                f"entries kept at most {common.plural(days, 'day')}")
            + ", anonymization " + ("supported" if policy["anonymizationSupported"]
                                    else "not supported")]


def _gene_rows(genes: list[GeneShown], default_mib: bool) -> list[list[str]]:
    rows = []
    for g in genes:
        memory = "-" if g.memory_mib is None else (
            f"{g.memory_mib} MiB" + (" (default)" if default_mib else " (--gene-memory)"))
        rows.append([g.name, g.gene.kind if g.gene else "?", g.gene.domain if g.gene else "?",
                     g.gene.phenotype.version if g.gene else "?", g.how,
                     ",".join(map(str, g.tcp_ports)) or "-", memory])
    return rows


@click.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of text")
@click.pass_context
def show_command(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show agent NAME: its genes, composition, containment and memory.

    For each gene: its language, domain and version, and how it runs --
    contained (with the TCP ports it may connect to and its memory limit),
    TRUSTED (uncontained: it can reach all rotifer can) or in the WASM
    sandbox.  A gene that no longer loads or a memory that is gone is
    reported on stderr (exit status 1); the rest is still shown.

    Example:

    \b
        rotifer agent show fmt
        rotifer agent show fmt --json
    """
    from rotifer.agents.genome import Agents

    project = common.project_of(ctx)
    spec = Agents(project).get(name)
    errors: list[Exception] = []
    genes = _genes(project, spec, errors)
    memory = _memory(project, name, errors)
    default_mib = spec.containment.gene_memory_mib is None
    if as_json:
        common.print_json({**spec.to_json(), "containment": spec.containment.to_json(),
                           "geneDetails": [g.to_json(default_mib) for g in genes],
                           "memory": memory})
    else:
        click.echo(f"Agent:        {spec.name}")
        click.echo(f"Created:      {common.shown(spec.created_at or '?')}")
        click.echo(f"Composition:  {spec.composition}")
        for line in _memory_lines(memory) if memory is not None else []:
            click.echo(line)
        click.echo("Genes:")
        for line in common.table(["GENE", "LANGUAGE", "DOMAIN", "VERSION", "RUNS", "TCP PORTS",
                                  "GENE MEMORY"], _gene_rows(genes, default_mib)):
            click.echo("  " + line)
        for g in genes:
            if g.gene is not None and g.gene.v2_id is None:
                from rotifer.genes.gene import unregistered

                what, command = unregistered(g.gene, project.registry())
                click.echo(f"Gene '{common.shown(g.name)}' {what}: its memory calls are "
                           f"refused; run {command}")
        if any(g.how == TRUSTED for g in genes):
            click.echo("A TRUSTED gene runs uncontained: it can reach all rotifer can (the "
                       "store's files, the network, the environment).")
    for error in errors:
        click.echo(common.error_line(error), err=True)
    if errors:
        raise click.exceptions.Exit(1)
