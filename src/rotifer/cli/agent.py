"""``rotifer agent ...``: create, list, run and change agents; view and clear memory.

An agent's memory belongs to the agent, not to its genes: ``update-genes``
swaps the genes and leaves every entry where it is.  ``agent memory`` is the
deployer's view (``list`` never prints values; ``delete`` works whatever the
entries' access policies say and is audited as the deployer): :mod:`.memory`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rotifer.agents.project import require_memory

from . import common
from .lazy import LazyGroup
from .memory import memory_delete_command as memory_delete_command
from .memory import memory_group
from .memory import memory_list_command as memory_list_command

if TYPE_CHECKING:
    from rotifer.agents.project import Project
    from rotifer.memory import DataPolicy
    from rotifer.memory.storage.backend import Backend

COMPOSITION_HELP = ("how the genes compose: seq (each gets the previous output), par (all "
                    "get the input; a list of outputs), cond (predicate, then, else), try "
                    "(first that succeeds)")


@click.group("agent", cls=LazyGroup, lazy={
    # Speed: imported when named (see .lazy), not by every `rotifer agent ...`.
    "audit": "rotifer.cli.audit:audit_group",
    "delete": "rotifer.cli.delete:delete_command",
    "show": "rotifer.cli.show:show_command",
    "move": "rotifer.cli.transfer:move_command",
    "export": "rotifer.cli.transfer:export_command",
    "import": "rotifer.cli.transfer:import_command",
})
def agent_group() -> None:
    """Create, list and run agents; view and clear their memory.

    Example:

    \b
        rotifer agent create helper --genes formatter
        rotifer agent run helper --input '{"code": "if x:\\ny()", "indent": 4}'
    """


def _gene_list(values: tuple[str, ...]) -> list[str]:
    """``--genes a,b --genes c`` -> ``[a, b, c]`` (empty names are an error below)."""
    return [name.strip() for value in values for name in value.split(",")]


def _data_policy(path: Path | None) -> DataPolicy | None:
    from rotifer.genes.jsonvalue import DuplicateField, unique_fields
    from rotifer.memory import DataPolicy
    from rotifer.memory.errors import invalid

    if path is None:
        return None

    def no_constant(name: str) -> Any:
        raise invalid(f"data policy file {path} is not valid JSON: {name} is not a JSON number")

    try:
        # A field given twice is refused, as in WASM requests (json.loads keeps the last).
        doc = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=unique_fields,
                         parse_constant=no_constant)
    except DuplicateField as exc:
        raise invalid(f"data policy file {path} has the field {exc.field!r} twice") from None
    except FileNotFoundError:
        raise invalid(f"data policy file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise invalid(f"cannot read the data policy file {path}: {exc}") from None
    except ValueError as exc:
        raise invalid(f"data policy file {path} is not valid JSON: {exc}") from None
    return DataPolicy.from_json(doc)


@agent_group.command("create")
@click.argument("name")
@click.option("--genes", "genes", required=True, multiple=True, metavar="A[,B...]",
              help="the agent's genes, in order (comma-separated or repeated)")
@click.option("--composition", default="seq", show_default=True,
              type=click.Choice(["seq", "par", "cond", "try"]), help=COMPOSITION_HELP)
@click.option("--memory-quota", "quota", metavar="SIZE",
              help="the memory quota: a number with KB, MB or GB (default 10MB)")
@click.option("--data-policy", "policy_file", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help='a JSON file {"maxRetentionDays": int|null, "anonymizationSupported": bool}')
@click.option("--trust", "trust", multiple=True, metavar="GENE", help=common.TRUST_HELP)
@click.option("--allow-tcp", "allow_tcp", multiple=True, metavar="GENE:PORT",
              help="let a contained gene connect to this TCP port (repeat for more)")
@click.option("--gene-memory", "gene_memory", type=int, metavar="MIB",
              help="the data-size limit of each contained gene, in MiB (default 1024)")
@click.option("--gene-output", "gene_output", type=int, metavar="MIB",
              help="how much output (print, log, raw writes) a gene's run passes on, in MiB "
                   "(default 1)")
@click.option("--gene-threads", "gene_threads", type=int, metavar="N",
              help="threads and processes of the genes' user, when rotifer runs as root "
                   "(default 256)")
@click.option("--gene-temp", "gene_temp", type=int, metavar="MIB",
              help="the total size of each contained gene's temporary folder, when rotifer "
                   "runs as root (default 256)")
@click.pass_context
def create_command(ctx: click.Context, name: str, genes: tuple[str, ...], composition: str,
                   quota: str | None, policy_file: Path | None, trust: tuple[str, ...],
                   allow_tcp: tuple[str, ...], gene_memory: int | None,
                   gene_output: int | None,
                   gene_threads: int | None, gene_temp: int | None) -> None:
    """Create agent NAME from genes, with an empty memory of its own.

    Example:

    \b
        rotifer agent create helper --genes formatter --memory-quota 5MB
    """
    from rotifer.agents.containment import from_options
    from rotifer.agents.genome import Agents
    from rotifer.memory import DEFAULT_QUOTA_BYTES, parse_size

    project = common.project_of(ctx)
    # Every option is checked before anything is created.
    quota_bytes = DEFAULT_QUOTA_BYTES if quota is None else parse_size(quota)
    policy = _data_policy(policy_file)
    gene_names = _gene_list(genes)
    grants = from_options(trust, allow_tcp, gene_memory, gene_names, gene_output,
                          gene_threads, gene_temp)
    spec = Agents(project).create(name, gene_names, composition, quota_bytes, policy, grants)
    click.echo(f"Created agent '{spec.name}': genes {', '.join(spec.genes)} ({spec.composition}), "
               f"memory quota {common.human_size(quota_bytes)}")
    if not spec.containment.is_default():
        click.echo(f"Containment: {common.shown(spec.containment.summary())}")


@agent_group.command("update-genes")
@click.argument("name")
@click.option("--genes", "genes", required=True, multiple=True, metavar="A[,B...]",
              help="the agent's new genes, in order")
@click.option("--composition", default=None, type=click.Choice(["seq", "par", "cond", "try"]),
              help="a new composition (default: unchanged)")
@click.pass_context
def update_genes_command(ctx: click.Context, name: str, genes: tuple[str, ...],
                         composition: str | None) -> None:
    """Replace the genes of agent NAME; its memory stays as it is.

    Example:

    \b
        rotifer agent update-genes fmt --genes better-formatter
    """
    from rotifer.agents.genome import Agents

    spec = Agents(common.project_of(ctx)).set_genes(name, _gene_list(genes), composition)
    click.echo(f"Agent '{spec.name}' now has genes {', '.join(spec.genes)} ({spec.composition}); "
               "its memory is unchanged")


@agent_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
@click.pass_context
def list_command(ctx: click.Context, as_json: bool) -> None:
    """List the project's agents with their genes and memory use.

    An agent that cannot be listed (a malformed spec file, a memory that is
    gone or a store that cannot be opened) does not hide the others: they are
    listed on stdout, each broken one gets a ``CODE: message`` line on stderr,
    and the exit status is 1 so that scripts notice.

    Example:

    \b
        rotifer agent list --json
    """
    from rotifer.agents.genome import Agents
    from rotifer.agents.status import genes_state

    project = common.project_of(ctx)
    specs, broken = Agents(project).scan()
    usage, failed = _usage_of(project, [s.name for s in specs])
    # A store that cannot be opened fails all its agents with one error: say it once.
    errors = list({id(e): e for e in [*broken, *failed.values()]}.values())
    specs = [s for s in specs if s.name in usage]
    states = {s.name: genes_state(project, s) for s in specs}
    if as_json:
        common.print_json([{**s.to_json(), "usedBytes": usage[s.name][0],
                            "quotaBytes": usage[s.name][1],
                            "changedGenes": sorted(states[s.name].stale)} for s in specs])
    elif specs:
        # The CONTAINMENT column appears when some agent has grants (trust, TCP, memory).
        granted = any(not s.containment.is_default() for s in specs)
        rows = [[s.name, ",".join(g + ("*" if g in states[s.name].stale else "")
                                  for g in s.genes), s.composition,
                 f"{common.human_size(usage[s.name][0])} / "
                 f"{common.human_size(usage[s.name][1])}",
                 *([s.containment.summary() if not s.containment.is_default()
                    else states[s.name].runs()] if granted else [])] for s in specs]
        headers = ["NAME", "GENES", "COMPOSITION", "MEMORY", *(["CONTAINMENT"] if granted else [])]
        for line in common.table(headers, rows):
            click.echo(line)
        if any(state.stale for state in states.values()):
            click.echo("* changed since it was wrapped: its memory calls are refused until "
                       "`rotifer wrap GENE` (see `rotifer agent show NAME`)")
    elif not errors:
        click.echo("No agents (create one with `rotifer agent create NAME --genes GENE`)")
    if errors:
        for error in errors:
            click.echo(common.error_line(error), err=True)
        raise click.exceptions.Exit(1)


def _usage_of(project: Project, names: list[str]
              ) -> tuple[dict[str, tuple[int, int]], dict[str, Exception]]:
    """(used, quota) of each agent, opening each memory store once, and the
    error of each agent whose memory could not be read."""
    from rotifer.genes.errors import RotiferError
    from rotifer.memory.errors import AgentMemoryError

    by_url: dict[str | None, list[str]] = {}
    failed: dict[str, Exception] = {}
    for name in names:
        try:
            by_url.setdefault(project.memory_url(name), []).append(name)
        except RotiferError as exc:
            failed[name] = exc
    usage: dict[str, tuple[int, int]] = {}
    for group in by_url.values():
        try:
            backend = project.open_backend(group[0])
        except (RotiferError, AgentMemoryError) as exc:
            failed.update(dict.fromkeys(group, exc))
            continue
        try:
            for name in group:
                try:
                    usage[name] = _agent_usage(project, backend, name)
                except AgentMemoryError as exc:
                    failed[name] = exc
        finally:
            backend.close()
    return usage, failed


def _agent_usage(project: Project, backend: Backend, name: str) -> tuple[int, int]:
    """(used, quota) of ``name``, as :meth:`MemoryStore.usage` gives it: what has
    expired is removed first.  Speed: one read of the agent's record, which also
    says whether anything has expired; only then (or when the agent has no
    memory, to say so) is the store opened, with its write path (the audit log,
    the engine): listing agents whose memory has nothing to purge imports none of it."""
    from rotifer.memory.clock import SystemClock

    with backend.peek() as tx:
        opened = tx.lookup(name, None, SystemClock().now_us())
    if opened is not None and not (opened[1] and not backend.read_only):
        record = opened[0]
        return record.used_bytes, record.quota_bytes
    with project.open_store(name, create=False) as store:
        require_memory(store, name)
        return store.usage(name)


@agent_group.command("run")
@click.argument("name")
@click.option("--input", "input_text", required=True, metavar="JSON", help=common.INPUT_HELP)
@click.pass_context
def run_command(ctx: click.Context, name: str, input_text: str) -> None:
    """Run agent NAME on the input and print its output JSON.

    Example:

    \b
        rotifer agent run fmt --input '{"code": "if x:\\ny()"}'
    """
    from rotifer.agents.run import run_agent

    project = common.project_of(ctx)
    value = common.parse_input(input_text)
    hints: list[str] = []
    try:
        output = run_agent(project, name, value, hints=hints, log_sink=common.log_sink)
    finally:
        for h in hints:
            common.hint(h)
    common.print_json(output)


# -- agent memory ---------------------------------------------------------------


agent_group.add_command(memory_group)  # `agent memory list | delete` (.memory)
