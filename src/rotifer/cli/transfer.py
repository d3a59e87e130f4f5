"""``rotifer agent move | export | import``: moving an agent's memory.

The memory layer (:mod:`rotifer.memory.transfer`) does the copying, the
verification and the audit; this module picks the stores, records the
agent's new binding after a move, and prints what happened.  See
docs/backends.md ("Moving an agent") for the guarantees.

* ``agent move NAME --to URL [--keep-cache] [--memory-quota SIZE]`` moves the
  agent's memory from the store it uses now to ``URL`` and binds the agent to
  it (``memoryUrl`` in ``.rotifer/agents/NAME.json``; no binding when ``URL``
  is the project's own store).  Refused while ``ROTIFER_MEMORY_URL`` is set:
  that variable overrides every binding, so the moved agent would not be found.
* ``agent export NAME FILE [--keep-cache] [--force]`` writes a copy of the memory to
  FILE, which must not exist (``--force`` replaces it).
* ``agent import FILE [--memory-quota SIZE]`` loads FILE into the store of the
  agent it names (:mod:`.importing`: the agent made from the spec the file
  carries, the history it carries).  Its store must not hold a memory for it
  yet: an import never merges.

Every command needs the agent's spec in the project (AGENT_NOT_FOUND otherwise).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rotifer.agents.genome import Agents
from rotifer.agents.project import ENV_MEMORY_URL, Project, require_memory
from rotifer.genes.errors import RotiferError
from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore, parse_size
from rotifer.memory.audit import AuditLog

if TYPE_CHECKING:
    from rotifer.agents.genome import AgentSpec
    from rotifer.memory.transfer import TransferReport

from .common import plural, project_of
from .progress import progress_bar

QUIET_HELP = "no progress bar (it is drawn on stderr only when that is a terminal)"


def normalize_url(url: str, cwd: Path | None = None) -> str:
    """The URL as it should be recorded: ``sqlite:`` paths made absolute (the
    binding must not depend on the folder a later command runs in)."""
    if url.startswith("sqlite:"):
        path = Path(url[len("sqlite:"):]).expanduser()
        if not str(path) or str(path) == ".":
            raise AgentMemoryError(ErrorCode.INVALID_INPUT, "sqlite: needs a file path")
        if not path.is_absolute():
            path = (cwd or Path.cwd()) / path
        return f"sqlite:{path.resolve()}"
    return url


def _project_default(project: Project) -> str:
    """The URL of the store an agent without a binding uses (ignoring the
    environment), normalized, to compare a destination with."""
    url = project.config().get("memoryUrl")
    if isinstance(url, str) and url:
        return normalize_url(url, project.root)
    return f"sqlite:{(project.dot / 'playground.db').resolve()}"


def _quota(text: str | None) -> int | None:
    return None if text is None else parse_size(text)


def _summary(verb: str, report: TransferReport) -> str:
    counts = ", ".join(f"{cat} {n}" for cat, n in report.counts.items()
                       if n or cat != "CACHE")
    return (f"{verb} agent '{report.agent}': {plural(report.entries, 'entry', 'entries')}, {report.bytes} bytes "
            f"({counts})")


def _left_behind(report: TransferReport) -> str | None:
    if not report.left_behind:
        return None
    return (f"{plural(report.left_behind, 'CACHE entry', 'CACHE entries')} ({report.left_behind_bytes} bytes) left "
            "behind (use --keep-cache to carry them)")


def do_move(project: Project, name: str, to: str, *, keep_cache: bool = False,
            quota: str | None = None, quiet: bool = False) -> list[str]:
    """Move ``name``'s memory to ``to`` and bind the agent there; the lines to print."""
    # Imported here, as in the other commands: every other command (``agent memory
    # list`` above all) starts faster without the transfer code.
    from rotifer.memory.transfer import describe, move_agent

    if os.environ.get(ENV_MEMORY_URL):
        raise AgentMemoryError(
            ErrorCode.INVALID_INPUT,
            f"{ENV_MEMORY_URL} is set: it overrides every agent's binding, so the moved agent "
            f"would not be found; unset it to move agents")
    agents = Agents(project)
    agents.get(name)  # AGENT_NOT_FOUND before any store is opened
    quota_bytes = _quota(quota)
    url = normalize_url(to)
    report: TransferReport | None = None
    with project.open_store(name, create=False) as source:
        if not source.has_agent(name) and _moved_already(project, url, name):
            where = url  # an earlier move was cut off before the binding: record it
        else:
            require_memory(source, name)  # before the destination is made
            _not_where_it_is(project, name, url, describe(source))
            with MemoryStore.open(project.dot, url) as destination:
                in_the_way = _nothing_in_the_way(name, url, destination, describe(source))
                guest = _other_project(project, url)
                # The other project whose store the agent leaves, if it is one.
                host = _other_project(project, _current_url(project, name))
                if guest is not None or host is not None:
                    source.purge_expired(name)  # what expired goes first (audited), then the history
                mirror = None if guest is None else AuditLog(guest / "audit.jsonl")
                origin = None if host is None else AuditLog(host / "audit.jsonl")
                try:
                    report = move_agent(
                        source, destination, name, keep_cache=keep_cache,
                        quota_bytes=quota_bytes, progress=progress_bar("moving", quiet=quiet),
                        mirror=mirror, history=_missing_history(source, name, mirror),
                        source_mirror=origin,
                        source_history=_missing_history(source, name, origin))
                except AgentMemoryError as exc:
                    # A copy in the way that is not what an earlier, killed move of
                    # this very state left (move_agent replaces that one and moves).
                    if in_the_way is not None and exc.code is ErrorCode.INVALID_INPUT:
                        raise in_the_way from None
                    raise
                finally:
                    for log in (mirror, origin):
                        if log is not None:
                            log.close()
                where = describe(destination)
    binding = None if url == _project_default(project) else url
    try:
        agents.bind(name, binding)
    except (RotiferError, OSError) as exc:
        raise RotiferError(
            f"agent '{name}' was moved to {where}, but its binding could not be recorded "
            f"({exc}); set \"memoryUrl\" in {agents.spec_path(name)} to that URL",
            code="BINDING_FAILED") from exc
    if report is None:
        lines = [f"Agent '{name}' was moved already (an earlier move ended before it "
                 "recorded the binding)"]
    else:
        lines = [_summary("Moved", report) + f" from {report.source} to {report.destination}"]
        lines += [line for line in (_left_behind(report),) if line]
        lines.append(f"Checksum (sha256): {report.sha256}")
    lines.append(f"Agent '{name}' now uses " + (
        "the project's memory store" if binding is None else where))
    return lines


def _other_project(project: Project, url: str) -> Path | None:
    """The ``.rotifer`` folder of the other project whose store ``url`` is (a
    ``sqlite:`` file in that folder, e.g. its ``playground.db``), or None: its log
    records a move there, or out of there, too (see
    :func:`rotifer.memory.transfer.move_agent`)."""
    if not url.startswith("sqlite:"):
        return None
    folder = Path(url[len("sqlite:"):]).parent
    if folder.name != ".rotifer" or not folder.is_dir() or \
            folder.resolve() == project.dot.resolve():
        return None
    return folder


def _current_url(project: Project, name: str) -> str:
    """The URL of the store ``name`` uses now, normalized (its binding, else the
    project's store)."""
    current = project.memory_url(name)
    return normalize_url(current, project.root) if current else _project_default(project)


def _missing_history(source: MemoryStore, name: str, log: AuditLog | None
                     ) -> list[dict[str, Any]]:
    """The agent's committed lines, oldest first, that the destination project's
    ``log`` does not hold yet (all of them the first time; after an earlier move
    there, only what came since; none after a move there that was cut off after
    writing them), so that its history there reads as in the source's log."""
    from rotifer.memory.audit.read import LogProblem, scan

    if log is None or log.path is None:
        return []
    lines = _history(source, name) or []
    held: set[tuple[Any, ...]] = set()
    try:
        for logged in scan(log.path, name, chain=False):
            held.add(_identity(logged.line))
    except LogProblem:
        pass
    return [line for line in lines if _identity(line) not in held]


def _identity(line: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(line.get(k) for k in ("epoch", "seq", "ts", "action", "key"))


def _moved_already(project: Project, url: str, name: str) -> bool:
    """Does the store at ``url`` hold ``name``'s memory (when its current store has
    none)?  Then an earlier ``move`` there committed and was cut off (a kill,
    Ctrl-C) before it recorded the binding: the move is done, only the binding
    is missing.  Never creates the destination."""
    try:
        with MemoryStore.open(project.dot, url, create=False) as destination:
            return destination.has_agent(name)
    except AgentMemoryError:
        return False


def _not_where_it_is(project: Project, name: str, url: str, where: str) -> None:
    """A move to the store the agent already uses is refused before that store is
    opened a second time: there is nothing to move (and no advice to delete the
    memory "there", which would be its only copy)."""
    if url == _current_url(project, name):
        raise AgentMemoryError(ErrorCode.INVALID_INPUT,
                          f"agent '{name}' already uses {where}; nothing to move")


def _nothing_in_the_way(name: str, url: str, destination: MemoryStore, where: str
                        ) -> AgentMemoryError | None:
    """The refusal of a memory for the agent in the destination (a move never
    merges), naming the command that removes it if it must go; None when there
    is none.  Raised by the caller only once :func:`move_agent` refused it too: a
    copy exactly as an earlier move of this very state left it (killed after the
    copy committed, before the source dropped the agent) is replaced and the
    move goes on.  The same store under another spelling of its URL is refused
    here, before anything."""
    from rotifer.memory.transfer import describe

    if not destination.has_agent(name):
        return None
    there = describe(destination)
    if there == where:  # the same store under another spelling of its URL
        raise AgentMemoryError(ErrorCode.INVALID_INPUT,
                          f"agent '{name}' already uses {where}; nothing to move")
    shown_url = url if url.startswith("sqlite:") else "URL"  # never echo a password
    return AgentMemoryError(
        ErrorCode.INVALID_INPUT,
        f"agent '{name}' already has a memory in {there}, and a move never merges; nothing "
        f"was moved. If that memory must go: `rotifer agent delete {name} --store "
        f"{shown_url}` removes it (and nothing else), then move again")


def do_export(project: Project, name: str, file: Path, *, keep_cache: bool = False,
              quiet: bool = False, force: bool = False) -> list[str]:
    """Write a copy of ``name``'s memory to ``file`` (an existing file only with
    ``force``); the lines to print."""
    from rotifer.memory.transfer import export_agent

    spec = _travelling_spec(project, Agents(project).get(name))
    file = file.absolute()  # the audit line says where the copy went
    if not force and os.path.lexists(file):
        raise AgentMemoryError(ErrorCode.INVALID_INPUT, f"{file} exists; an export does not "
                          "replace a file: give another FILE, or --force to replace it")
    with project.open_store(name, create=False) as store:
        require_memory(store, name, project)
        report = export_agent(store, name, file, keep_cache=keep_cache, replace=force,
                              progress=progress_bar("exporting", quiet=quiet), spec=spec,
                              history=_history(store, name))
    lines = [_summary("Exported", report) + f" to {file}"]
    lines += [line for line in (_left_behind(report),) if line]
    lines.append(f"Checksum (sha256): {report.sha256}")
    return lines


def _travelling_spec(project: Project, spec: AgentSpec) -> dict[str, Any]:
    """The spec an export carries: the agent's genes, composition and grants,
    and each gene's v2 id as it runs now (``geneIds``), so that an import in
    another project can check it has the very same genes.  Not the store
    binding (the importing project chooses its own store), never a password."""
    doc = spec.to_json()
    doc.pop("memoryUrl", None)
    ids: dict[str, str | None] = {}
    for gene in dict.fromkeys(spec.genes):
        try:
            ids[gene] = project.load_gene(gene).v2_id
        except RotiferError:
            ids[gene] = None
    doc["geneIds"] = ids
    return doc


#: At most this many audit lines travel in an export (more: none, and the
#: importing project's history starts at the import, as before).
HISTORY_LINES = 100_000


def _history(store: MemoryStore, name: str) -> list[dict[str, Any]] | None:
    """The agent's committed audit lines, oldest first, for the export to carry
    (None when there are more than :data:`HISTORY_LINES` or the log cannot be read)."""
    from rotifer.memory.audit.history import audit_history
    from rotifer.memory.audit.read import LogProblem

    try:
        newest = list(audit_history(store, name, limit=HISTORY_LINES + 1))
    except (LogProblem, AgentMemoryError):
        return None
    return None if len(newest) > HISTORY_LINES else newest[::-1]


# -- click commands -------------------------------------------------------------

QUOTA_HELP = "the agent's memory quota at the destination (e.g. 50MB; default: unchanged)"


def _echo(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


@click.command("move")
@click.argument("name")
@click.option("--to", "to", required=True, metavar="URL",
              help="the memory store to move to: postgresql://... or sqlite:PATH")
@click.option("--keep-cache", is_flag=True, help="carry CACHE entries too")
@click.option("--memory-quota", "quota", metavar="SIZE", help=QUOTA_HELP)
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
@click.pass_context
def move_command(ctx: click.Context, name: str, to: str, keep_cache: bool,
                 quota: str | None, quiet: bool) -> None:
    """Move an agent's memory to another store and bind the agent to it.

    URL is sqlite:PATH (a file) or a PostgreSQL URL such as
    'postgresql://rotifer@127.0.0.1/rotifer' (see docs/backends.md).

    Example:

    \b
        rotifer agent move fmt --to sqlite:fmt-memory.db
    """
    _echo(do_move(project_of(ctx), name, to, keep_cache=keep_cache, quota=quota, quiet=quiet))


@click.command("export")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--keep-cache", is_flag=True, help="include CACHE entries")
@click.option("--force", is_flag=True, help="replace FILE if it exists (else refused)")
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
@click.pass_context
def export_command(ctx: click.Context, name: str, file: Path, keep_cache: bool,
                   force: bool, quiet: bool) -> None:
    """Write a copy of an agent's memory to FILE (the agent keeps it).

    Example:

    \b
        rotifer agent export fmt fmt-memory.json
    """
    _echo(do_export(project_of(ctx), name, file, keep_cache=keep_cache, quiet=quiet,
                    force=force))


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--memory-quota", "quota", metavar="SIZE", help=QUOTA_HELP)
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
@click.pass_context
def import_command(ctx: click.Context, file: Path, quota: str | None, quiet: bool) -> None:
    """Load an agent's memory from FILE (the agent must have no memory yet).

    In another project the agent is made from the spec FILE carries: copy
    its genes (genes/NAME) and wrap them first; each must have the v2 id it
    had when exported.

    Example:

    \b
        rotifer agent export fmt fmt-memory.json
        rotifer agent delete fmt --memory-only --yes
        rotifer agent import fmt-memory.json --memory-quota 20MB
    """
    from .importing import do_import

    _echo(do_import(project_of(ctx), file, quota=quota, quiet=quiet))


COMMANDS = (move_command, export_command, import_command)


def register(agent_group: click.Group) -> None:
    """Add ``move``, ``export`` and ``import`` to the ``rotifer agent`` group."""
    for command in COMMANDS:
        agent_group.add_command(command)


__all__ = ["do_export", "do_move", "normalize_url", "register"]
