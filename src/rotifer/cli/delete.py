"""``rotifer agent delete NAME [--memory-only | --store URL] [--yes]``: remove an agent.

Without options the agent goes entirely: its memory in the store it uses,
then its spec file (``.rotifer/agents/NAME.json``) last.  A memory whose spec
is gone (left from an earlier agent of that name) is removed the same way, so
it never blocks its name for good.  ``--memory-only`` removes the memory and
keeps the spec (to import a replacement: an import never merges);
``--store URL`` removes only the memory NAME has in that store (a copy a move
found in its way), leaving the spec and the agent's own memory alone.

It first says what will go -- how many entries, how many bytes, where, and
the spec -- and asks (a line ``y`` on stdin) unless ``--yes`` is given.  The
entries are removed in small transactions, each entry audited
``deployer_delete`` with actor ``deployer``, then the emptied memory is
dropped (``drop_agent``), and only then is the spec removed.  Interrupted
half-way, what was removed stays removed and the same command finishes the
job when run again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from . import common

if TYPE_CHECKING:
    from rotifer.agents.project import Project
    from rotifer.memory.store import MemoryStore

#: Entries removed per transaction: small commits, so an interrupt loses little.
BATCH = 500


@dataclass(frozen=True)
class Plan:
    """What ``agent delete`` is about to remove."""

    name: str
    where: str
    entries: int
    nbytes: int
    has_memory: bool
    spec: Path | None  # the spec file that goes, or None

    def describe(self) -> str:
        parts = [f"{common.plural(self.entries, 'entry', 'entries')} ({self.nbytes} bytes) "
                 f"in {self.where}" if self.has_memory else f"no memory in {self.where}"]
        if self.spec is not None:
            parts.append(f"its spec {self.spec}")
        return ", and ".join(parts)


def _open(project: Project, name: str, store_url: str | None) -> MemoryStore:
    from rotifer.memory import MemoryStore

    from .transfer import normalize_url

    if store_url is None:
        return project.open_store(name, create=False)
    return MemoryStore.open(project.dot, normalize_url(store_url), create=False)


def plan(project: Project, store: MemoryStore, name: str, *, keep_spec: bool) -> Plan:
    """What will go, or AGENT_NOT_FOUND / MEMORY_NOT_FOUND when there is nothing."""
    from rotifer.agents.genome import Agents
    from rotifer.genes.errors import AgentNotFound
    from rotifer.memory import AgentMemoryError, ErrorCode
    from rotifer.memory.transfer import describe

    agents = Agents(project)
    spec = agents.spec_path(name)  # INVALID_AGENT for a name no agent can have
    where = describe(store)
    has_memory = store.has_agent(name)
    if not has_memory and keep_spec:
        raise AgentMemoryError(ErrorCode.NOT_FOUND, f"agent '{name}' has no memory in {where}; "
                          "nothing was deleted")
    if not has_memory and not spec.is_file():
        raise AgentNotFound(f"no agent '{name}' in {project.root}: no spec and no memory in "
                            f"{where}")
    entries = nbytes = 0
    if has_memory:
        with store.backend.read() as tx:
            entries = tx.count(name)
        nbytes = store.agent_record(name).used_bytes
    return Plan(name, where, entries, nbytes, has_memory,
                None if keep_spec or not spec.is_file() else spec)


def _confirmed(what: Plan) -> bool:
    """Ask on stderr, read one line of stdin; only ``y`` or ``yes`` agrees (end of
    input does not).  Ctrl-C at the question is an interrupt like any other."""
    click.echo(f"Delete agent '{what.name}': {what.describe()}? [y/N] ", err=True, nl=False)
    answer = sys.stdin.readline()
    if not answer.endswith("\n") or not sys.stdin.isatty():
        click.echo(err=True)  # no terminal echoed the answer's newline: end the question
    return answer.strip().lower() in ("y", "yes")


def carry_out(store: MemoryStore, what: Plan) -> int:
    """Remove the memory (entries in batches, then the agent) and then the spec; the
    number of entries removed now."""
    removed = 0
    if what.has_memory:
        deployer = store.deployer(what.name)
        while True:
            n = deployer.delete_some(BATCH)
            if n == 0:
                break
            removed += n
        store.drop_agent(what.name)
    if what.spec is not None:
        try:
            what.spec.unlink(missing_ok=True)
        except OSError as exc:
            from rotifer.genes.errors import RotiferError

            raise RotiferError(f"the memory of agent '{what.name}' was removed but its spec "
                               f"{what.spec} could not be ({exc.strerror or exc}); run the "
                               "command again", code="AGENT_STORAGE_ERROR") from None
    return removed


@click.command("delete")
@click.argument("name")
@click.option("--memory-only", is_flag=True,
              help="remove the memory but keep the spec (e.g. to import a replacement)")
@click.option("--store", "store_url", metavar="URL",
              help="remove only the memory NAME has in this store (postgresql://... or "
                   "sqlite:PATH); the spec and the agent's own memory stay")
@click.option("--yes", "-y", is_flag=True, help="do not ask for confirmation")
@click.pass_context
def delete_command(ctx: click.Context, name: str, memory_only: bool, store_url: str | None,
                   yes: bool) -> None:
    """Delete agent NAME: its memory (every entry, audited as the deployer), then its spec.

    Example:

    \b
        rotifer agent delete fmt --yes
    """
    from rotifer.genes.errors import RotiferError

    project = common.project_of(ctx)
    with _open(project, name, store_url) as store:
        what = plan(project, store, name, keep_spec=memory_only or store_url is not None)
        if not yes and not _confirmed(what):
            raise RotiferError("nothing was deleted (answer y, or pass --yes)",
                               code="NOT_CONFIRMED")
        carry_out(store, what)
    memory = (f"{common.plural(what.entries, 'entry', 'entries')} ({what.nbytes} bytes) in "
              f"{what.where}" if what.has_memory else f"there was no memory in {what.where}")
    if what.spec is None:
        click.echo(f"Deleted the memory of agent '{name}': {memory}")
    else:
        click.echo(f"Deleted agent '{name}': its spec {what.spec} and {memory}"
                   if what.has_memory else f"Deleted agent '{name}': its spec {what.spec} ("
                   f"{memory})")
