"""``rotifer agent memory list | delete``: the deployer's view of an agent's memory.

``list`` never prints values; ``delete`` works whatever the entries' access
policies say and is audited as the deployer.  The group is one of ``rotifer
agent``'s (:mod:`.agent`, which adds it and from which its names are
importable as well).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from rotifer.agents.project import require_memory

from . import common

if TYPE_CHECKING:
    from rotifer.memory import MemoryEntry


@click.group("memory")
def memory_group() -> None:
    """View and clear an agent's memory (as its deployer).

    Example:

    \b
        rotifer agent memory list fmt
    """


def _entry_json(entry: MemoryEntry) -> dict[str, Any]:
    """An entry without its value (the deployer's list never shows values)."""
    doc = entry.to_json()
    doc.pop("value", None)
    doc["size"] = entry.size
    return doc


def _creator(entry: MemoryEntry, names: dict[str, str]) -> str:
    gene = names.get(entry.created_by)
    short = entry.created_by[:15]
    return f"{short}… ({gene})" if gene else f"{short}…"


@memory_group.command("list")
@click.argument("name")
@click.option("--category", default=None, metavar="C",
              help="only this category (PREFERENCE, PATTERN, CONTEXT, CACHE)")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="list at most N entries (a page; the last line says how to get the next)")
@click.option("--after", default=None, metavar="KEY", help="only keys after KEY (the next page)")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
@click.pass_context
def memory_list_command(ctx: click.Context, name: str, category: str | None,
                        limit: int | None, after: str | None, as_json: bool) -> None:
    """List the entries of agent NAME in key order: key, category, size, creator,
    last update.

    Values are never printed.  SIZE is the bytes the entry counts against the
    quota (its key plus its value, UTF-8).  With --limit the list is a page:
    it costs what its entries cost however large the memory is.

    Example:

    \b
        rotifer agent memory list fmt --category PREFERENCE --limit 50
    """
    from rotifer.agents.genome import Agents

    project = common.project_of(ctx)
    Agents(project).get(name)
    with project.open_store(name, create=False) as store:
        require_memory(store, name, project)
        common.standby_note(store)
        # list() removes what has expired first, so the record read after it
        # gives the usage of exactly the entries listed.
        entries, next_after = store.deployer(name).page(category, after, limit)
        record = store.agent_record(name)
    used, quota = record.used_bytes, record.quota_bytes
    if as_json:
        doc: dict[str, Any] = {"agent": name, "usedBytes": used, "quotaBytes": quota,
                               "entries": [_entry_json(e) for e in entries]}
        if limit is not None:
            doc["nextAfter"] = next_after
        common.print_json(doc)
        return
    names = {gid: str(info.get("name", "")) for gid, info in project.registry().entries().items()}
    rows = [[e.key, e.category.value, str(e.size), _creator(e, names), e.to_json()["updatedAt"]]
            for e in entries]
    if rows:
        for line in common.table(["KEY", "CATEGORY", "SIZE", "CREATED BY", "UPDATED"], rows,
                                 {0: common.KEY_WIDTH}):
            click.echo(line)
    else:
        click.echo("No entries" + (f" in {category.upper()}" if category else ""))
    percent = 100 * used / quota
    click.echo(f"Usage: {common.human_size(used)} of {common.human_size(quota)} "
               f"({percent:.1f}%), {common.plural(len(entries), 'entry', 'entries')}"
               + (f" in {category.upper()}" if category else "")
               + (" listed" if limit is not None or after is not None else ""))
    if next_after is not None:
        more = ["rotifer", "agent", "memory", "list", name, *(
            ["--category", category] if category else []), "--limit", str(limit),
            "--after", next_after]
        import shlex  # speed: only for a long listing

        click.echo("More: " + common.shown(shlex.join(more)))
    if common.any_cut(e.key for e in entries):
        click.echo(common.CUT_NOTE)


@memory_group.command("delete")
@click.argument("name")
@click.option("--key", default=None, metavar="K",
              help="remove the entry with this key, as `agent memory list` shows it "
                   "(\\\\ is a backslash, \\x1b an escape character)")
@click.option("--category", default=None, metavar="C", help="remove every entry of this category")
@click.pass_context
def memory_delete_command(ctx: click.Context, name: str, key: str | None,
                          category: str | None) -> None:
    """Remove one entry by key, or every entry of a category, whatever their policies.

    Give exactly one of --key or --category (both, or neither, is a usage
    error).  Audited as the deployer; prints how many entries went.

    Example:

    \b
        rotifer agent memory delete fmt --key formatter/indent
        rotifer agent memory delete fmt --category CACHE
    """
    from rotifer.agents.genome import Agents

    if (key is None) == (category is None):
        raise click.UsageError("give exactly one of --key or --category")
    project = common.project_of(ctx)
    Agents(project).get(name)
    with project.open_store(name, create=False) as store:
        require_memory(store, name, project)
        deployer = store.deployer(name)
        removed = deployer.delete_key(common.unshown(key)) if key is not None else \
            deployer.delete_category(category or "")
    click.echo(f"Removed {common.plural(removed, 'entry', 'entries')}")
