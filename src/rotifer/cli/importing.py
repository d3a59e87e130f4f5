"""``rotifer agent import FILE``: an agent's memory loaded from an export.

The agent is the one FILE names.  One this project lacks is made from the spec
the file carries (an export writes it), once each of its genes is here with the
same v2 id (copy and wrap the genes first); a file without a spec (an older
rotifer's) needs ``.rotifer/agents/NAME.json`` copied.  The history the file
carries (the agent's audit lines up to the export) goes into this project's
log before the import's own lines, when the log holds none of the agent's lines
yet -- and only once the import has checked everything: a refused import leaves
nothing in the log.  See docs/backends.md ("Moving an agent").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.genes.errors import RotiferError
from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore

from .progress import progress_bar
from .transfer import _quota, _summary


def _history_to_carry(store: MemoryStore, name: str, file: Path
                      ) -> list[dict[str, Any]] | None:
    """The history the export carries, for the import to append to this project's
    log before its own lines, when the log holds none of the agent's lines yet (an
    import into another project): ``audit show`` then starts at seq 1.  The lines
    are the agent's own (checked when the file was read), re-chained when written.
    The import appends them only once everything is checked (``fill``), so one
    refused on the way leaves none of them behind."""
    from rotifer.memory.audit.history import audit_history
    from rotifer.memory.transfer.document import open_document

    if any(True for _ in audit_history(store, name, limit=1)):
        return None  # this log has the agent's history already
    with open_document(file) as doc:
        history = doc.head.get("history")
    if not isinstance(history, list) or not history:
        return None
    lines = [{k: v for k, v in line.items() if k != "prev"}
             for line in history if isinstance(line, dict) and line.get("agent") == name]
    if not lines or _carried_before(store, name, lines[0]):
        return None
    return lines


def _carried_before(store: MemoryStore, name: str, first: dict[str, Any]) -> bool:
    """Does the log hold the history already, from an import cut off (killed, or
    its commit failed) after it appended the history?  Carrying it again would
    make each of those changes appear twice (``audit verify``: "change 1 follows
    change 4"); the import that commits continues the copy that is there."""
    from rotifer.memory.audit.read import LogProblem, scan

    path, ts = store.audit.path, first.get("ts")
    if path is None or not isinstance(ts, str):
        return False
    try:
        return any(logged.line.get("ts") == ts and logged.line.get("seq") == first.get("seq")
                   and logged.line.get("epoch") == first.get("epoch")
                   and logged.line.get("action") == first.get("action")
                   for logged in scan(path, name, chain=False, only=ts.encode()))
    except LogProblem:
        return False


def _spec_from_file(project: Project, name: str, carried: object, file: Path) -> None:
    """Create agent ``name``'s spec in this project from the one the export
    carries, once every gene it names is here with the same v2 id (genes are
    checked by id: a same-named gene with other code would get the memory)."""
    from rotifer.agents.genome import AgentSpec, check_composition

    if not isinstance(carried, dict):
        raise RotiferError(
            f"no agent '{name}' in {project.root}, and {file} carries no spec (an export of "
            f"an older rotifer): copy .rotifer/agents/{name}.json and its genes into this "
            "project, then import", code="AGENT_NOT_FOUND")
    genes, ids = carried.get("genes"), carried.get("geneIds")
    if not isinstance(genes, list) or not all(isinstance(g, str) for g in genes) \
            or not isinstance(ids, dict):
        raise AgentMemoryError(ErrorCode.INVALID_INPUT, f"{file}: its 'spec' is not an agent "
                               "spec (genes, geneIds)")
    for gene in dict.fromkeys(genes):
        want = ids.get(gene)
        try:
            have = project.load_gene(gene).v2_id
        except RotiferError as exc:
            raise RotiferError(f"agent '{name}' needs gene '{gene}', which this project cannot "
                               f"load ({exc.code}): copy genes/{gene} from the exporting "
                               f"project and `rotifer wrap {gene}`, then import",
                               code=exc.code) from None
        if want is None or have != want:
            raise RotiferError(
                f"gene '{gene}' here is not the one agent '{name}' was exported with "
                f"({'its id ' + str(want)[:15] + '…' if want else 'no id there'}, "
                f"{'here ' + have[:15] + '…' if have else 'not wrapped here'}): copy "
                f"genes/{gene} from the exporting project and `rotifer wrap {gene}`",
                code="INVALID_GENE")
    composition = check_composition(carried.get("composition", "seq"), list(genes))
    from rotifer.agents import containment

    grants = containment.parse(carried.get("containment"), genes, f"{file}: spec")
    created = carried.get("createdAt")
    agents = Agents(project)
    agents.check_loads(list(genes), grants)
    agents.write_new(AgentSpec(name=name, genes=list(genes), composition=composition,
                               memory_url=project.memory_url(name),
                               created_at=created if isinstance(created, str) else None,
                               containment=grants))


def do_import(project: Project, file: Path, *, quota: str | None = None,
              quiet: bool = False) -> list[str]:
    """Load ``file`` into the store of the agent it names; the lines to print.
    An agent this project lacks is made from the spec the export carries
    (its genes must be here with the same v2 ids: see :func:`_spec_from_file`)."""
    from rotifer.memory.transfer.document import open_document

    file = file.absolute()
    with open_document(file) as doc:  # reads the head only, when rotifer wrote the file
        name = doc.head.get("agent")
        carried = doc.head.get("spec")
    if not isinstance(name, str) or not name:
        raise AgentMemoryError(ErrorCode.INVALID_INPUT, f"{file} names no agent")
    agents = Agents(project)
    quota_bytes = _quota(quota)
    made = False
    if not agents.exists(name):
        # The export carries the spec: the agent is made here from it (its genes
        # checked by id); the spec is removed again if the import fails.
        _spec_from_file(project, name, carried, file)
        made = True
    try:
        return _import_into(project, name, file, quota_bytes, quiet, carry=made)
    except BaseException:
        if made:
            agents.spec_path(name).unlink(missing_ok=True)
        raise


def _import_into(project: Project, name: str, file: Path, quota_bytes: int | None,
                 quiet: bool, carry: bool) -> list[str]:
    from rotifer.memory.transfer import import_agent

    with project.open_store(name) as store:
        if store.has_agent(name):
            from rotifer.memory.transfer import describe

            raise AgentMemoryError(
                ErrorCode.INVALID_INPUT,
                f"agent '{name}' already has a memory in {describe(store)}, and an import "
                f"never merges; nothing was imported. To replace it: `rotifer agent export "
                f"{name} FILE` keeps a copy, `rotifer agent delete {name} --memory-only` "
                "removes it (the spec stays); then import again")
        history = _history_to_carry(store, name, file) if carry else None
        report = import_agent(store, file, quota_bytes=quota_bytes,
                              progress=progress_bar("importing", quiet=quiet), history=history)
    return [_summary("Imported", report) + f" into {report.destination}",
            f"Checksum (sha256): {report.sha256}"]


__all__ = ["do_import"]
