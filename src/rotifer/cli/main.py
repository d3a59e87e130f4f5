"""``rotifer``: the command line.

Every error a user can cause ends as one line ``CODE: message`` on stderr and
a non-zero exit status (1; 2 for a wrong command line; 130 when interrupted
with Ctrl-C, 143 on SIGTERM, 129 on SIGHUP), never as a Python traceback.
``ROTIFER_DEBUG=1`` shows the traceback of an unexpected error, for bug reports.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found,unused-ignore]  # speed: not signal's enums
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import click

from . import common
from .common import one_line
from .lazy import LazyGroup

__all__ = ["cli", "main", "one_line", "run"]

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CONTEXT_SETTINGS, cls=LazyGroup, lazy={
    # Speed: imported when named (see .lazy), not by every command.
    "agent": "rotifer.cli.agent:agent_group",
    "console": "rotifer.cli.console:console_command",
    "mcp": "rotifer.cli.mcp:mcp_command",
    "new": "rotifer.cli.new:new_group",
})
@click.option("--project", "project", metavar="DIR",
              type=click.Path(file_okay=False, path_type=Path),
              help="the project folder (default: $ROTIFER_PROJECT, else the nearest folder "
                   "upward holding .rotifer/)")
@click.version_option(package_name="rotifer", prog_name="rotifer")
@click.pass_context
def cli(ctx: click.Context, project: Path | None) -> None:
    """Rotifer: agents built from genes, with a memory of their own.

    Example:

    \b
        rotifer init
        rotifer new gene hello
        rotifer wrap hello
        rotifer agent create greeter --genes hello
        rotifer agent run greeter --input '{"name": "Ada"}'
    """
    ctx.ensure_object(dict)
    ctx.obj["project"] = project


@cli.command("init")
@click.argument("directory", metavar="[DIR]", required=False, default=".",
                type=click.Path(file_okay=False, path_type=Path))
def init_command(directory: Path) -> None:
    """Make DIR/.rotifer/ (with agents/), DIR/genes/ and DIR/.gitignore (DIR
    defaults to the current folder), then print the next steps.

    The .gitignore holds .rotifer/ (state that must never be committed); an
    existing .gitignore gets the line added if it lacks it.  A folder inside
    another project's genes/ is refused (it would be a gene folder, not a
    project).  In an existing project it also upgrades the memory files
    written by an older rotifer (commands that only use memory refuse them
    unchanged).

    Example:

    \b
        rotifer init my-agents
    """
    from rotifer.agents.project import Project

    existed = (directory / ".rotifer").is_dir()
    project = Project.init(directory)
    for path in project.upgrade_memory():
        click.echo(f"Upgraded the memory database {path} to this rotifer's schema")
    click.echo(f"Initialized rotifer project in {project.root}")
    if not existed:
        where = "" if project.root == Path.cwd().resolve() else \
            f"cd {common.shell_word(str(directory))}\n  "
        click.echo("Next:\n"
                   f"  {where}rotifer new gene hello          # genes/hello: a Python gene "
                   "(--typescript, --wat)\n"
                   "  rotifer wrap hello && rotifer test hello\n"
                   "  rotifer agent create greeter --genes hello\n"
                   "  rotifer agent run greeter --input '{\"name\": \"Ada\"}'")


def _print_ids(gene: Any) -> None:
    click.echo(f"Gene ID (v2): {gene.v2_id}")
    click.echo(f"Gene ID (v1): {gene.v1_id}")


@cli.command("wrap")
@click.argument("gene")
@click.pass_context
def wrap_command(ctx: click.Context, gene: str) -> None:
    """Check genes/GENE and record its v2 id, which gives it memory access.

    The gene is loaded as a run loads it (contained; express is not called):
    one that a run would refuse (no express, an import that fails) is refused
    here with the same error.  GENE may also be the path genes/GENE.

    Example:

    \b
        rotifer wrap formatter
    """
    from rotifer.agents.build import wrap_gene

    project = common.project_of(ctx)
    hints: list[str] = []
    try:
        wrapped = wrap_gene(project, common.gene_name(project, gene), hints=hints,
                            log_sink=common.log_sink)
    finally:
        for h in hints:
            common.hint(h)
    domain = common.shown(wrapped.domain)  # the phenotype's text: shown escaped
    click.echo(f"Wrapped gene '{wrapped.name}' ({wrapped.kind}, domain {domain}, "
               f"{wrapped.code_file.name})")
    _print_ids(wrapped)


@cli.command("compile")
@click.argument("gene")
@click.pass_context
def compile_command(ctx: click.Context, gene: str) -> None:
    """Compile genes/GENE/gene.wat to gene.wasm (if any) and record its v2 id.

    Example:

    \b
        rotifer new gene counter --wat
        rotifer compile counter
    """
    from rotifer.agents.build import compile_gene

    project = common.project_of(ctx)
    gene = common.gene_name(project, gene)
    had_wat = (project.genes_dir / gene / "gene.wat").is_file()
    hints: list[str] = []
    try:
        compiled = compile_gene(project, gene, hints=hints, log_sink=common.log_sink)
    finally:
        for h in hints:
            common.hint(h)
    what = "gene.wat -> gene.wasm" if had_wat else compiled.code_file.name
    domain = common.shown(compiled.domain)
    click.echo(f"Compiled gene '{compiled.name}' ({compiled.kind}, domain {domain}, "
               f"{what})")
    _print_ids(compiled)


@cli.command("run")
@click.argument("gene")
@click.option("--input", "input_text", required=True, metavar="JSON", help=common.INPUT_HELP)
@click.option("--trust", is_flag=True, help=common.TRUST_HELP)
@click.pass_context
def run_command(ctx: click.Context, gene: str, input_text: str, trust: bool) -> None:
    """Run GENE alone and print its output; every memory call is refused.

    Example:

    \b
        rotifer new gene hello
        rotifer run hello --input '{"name": "Ada"}'
    """
    from rotifer.agents.run import run_gene

    project = common.project_of(ctx)
    value = common.parse_input(input_text)
    hints: list[str] = []
    try:
        output = run_gene(project, common.gene_name(project, gene), value,
                          log_sink=common.log_sink, trusted=trust, hints=hints)
    finally:
        for h in hints:
            common.hint(h)
    common.print_json(output)


@cli.command("test")
@click.argument("gene")
@click.option("--trust", is_flag=True, help=common.TRUST_HELP)
@click.pass_context
def test_command(ctx: click.Context, gene: str, trust: bool) -> None:
    """Run the cases of genes/GENE/tests.json on an empty, temporary memory.

    The gene is first loaded as wrap loads it, and refused with the same
    error; without a tests.json that is all it checks.

    Example:

    \b
        rotifer test formatter
    """
    from rotifer.agents.testing import test_gene
    from rotifer.genes.errors import RotiferError

    project = common.project_of(ctx)
    report = test_gene(project, common.gene_name(project, gene), log_sink=common.log_sink,
                       trusted=trust)
    for h in report.hints:
        common.hint(h)
    for case in report.cases:
        name = common.shown(case.name)
        click.echo(f"PASS  {name}" if case.passed else f"FAIL  {name}: {common.said(case.detail)}")
    failed = sum(not c.passed for c in report.cases)
    click.echo(f"{len(report.cases) - failed} passed, {failed} failed")
    if failed:
        raise RotiferError(f"{common.plural(failed, 'case')} of {len(report.cases)} failed "
                           f"for gene '{report.gene}'", code="TESTS_FAILED")


@cli.command("doctor")
def doctor_command() -> None:
    """Show what this machine can enforce on Python and Node genes (containment).

    Example:

    \b
        rotifer doctor
    """
    from rotifer.genes.contain.doctor import report
    from rotifer.genes.errors import RotiferError

    found = report()
    click.echo(f"Landlock ABI: {found.abi or 'none'}")
    click.echo(f"Genes run as: {found.user}")
    click.echo(f"A confined child holds: {found.held}")
    for line in common.table(["PROMISE", "ENFORCED", "BY"],
                             [[p.what, "yes" if p.enforced else "no", p.why]
                              for p in found.promises]):
        click.echo(line)
    click.echo(_store_permissions())
    if found.blocking:
        raise RotiferError("Python and Node genes cannot run contained here; they are refused "
                           f"unless trusted (--trust): {'; '.join(found.blocking)}",
                           code="CONTAINMENT_UNAVAILABLE")
    if all(p.enforced for p in found.promises):
        click.echo("Python and Node genes run contained.")
    else:
        click.echo("Python and Node genes run contained, but not every promise holds here "
                   "(see above).")


def _store_permissions() -> str:
    """doctor's line on the nearest store's permissions (reported, not changed)."""
    from rotifer.memory.private import describe

    here = Path.cwd()
    return describe(next((f / ".rotifer" for f in (here, *here.parents)
                          if (f / ".rotifer").is_dir()), None))


# -- running and reporting errors -------------------------------------------------


def _report(code: str, message: str, status: int) -> int:
    click.echo(f"{code}: {common.said(one_line(message))}", err=True)
    return status


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return (and exit with) its status."""
    status = run(argv)
    sys.exit(status)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised wherever the command is, so that its cleanup
    runs as on Ctrl-C: ``rotifer test`` drops its temporary memory, an open
    transaction rolls back.  A KeyboardInterrupt, so that everything that lets
    Ctrl-C through (a gene's ``except Exception``, the gene runners) lets it
    through too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signals that stop a command the way Ctrl-C does (status 128 + number).
STOP_SIGNALS: tuple[int, ...] = tuple(getattr(_signal, name) for name in ("SIGTERM", "SIGHUP")
                                      if hasattr(_signal, name))


def _on_stop(signum: int, frame: FrameType | None) -> None:
    # Only once: a second signal is ignored, so that the cleanup can finish.
    for sig in STOP_SIGNALS:
        _signal.signal(sig, _signal.SIG_IGN)
    raise Terminated(signum)


def _catch_stop_signals() -> Callable[[], None]:
    """Turn SIGTERM and SIGHUP into :class:`Terminated` until the returned
    function restores the previous handlers (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: _signal.signal(sig, _on_stop) for sig in STOP_SIGNALS}

    def restore() -> None:
        for sig, handler in previous.items():
            _signal.signal(sig, handler)

    return restore


def _stopped(exc: Terminated) -> int:
    import signal

    return _report("INTERRUPTED", f"stopped by {signal.Signals(exc.signum).name}",
                   128 + exc.signum)


def run(argv: list[str] | None = None) -> int:
    """The command line without exiting: the exit status.

    SIGTERM and SIGHUP stop a command like Ctrl-C does (its cleanup runs), with
    the status 128 + the signal's number (143, 129; Ctrl-C is 130).
    """
    restore = _catch_stop_signals()
    try:
        return _run(argv)
    except Terminated as exc:  # arrived while an error was being reported
        return 128 + exc.signum
    finally:
        restore()


def _run(argv: list[str] | None) -> int:
    from rotifer.genes.errors import RotiferError
    from rotifer.memory.errors import AgentMemoryError

    try:
        # The context made and invoked here rather than by ``cli.main``: that
        # turns a KeyboardInterrupt into Abort after printing a blank line.
        with cli.make_context("rotifer", list(sys.argv[1:] if argv is None else argv)) as ctx:
            status = cli.invoke(ctx)
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:  # a prompt that got Ctrl-C or the end of its input
        return _report("INTERRUPTED", "aborted", 130)
    except click.exceptions.NoArgsIsHelpError as exc:
        # A bare `rotifer` or `rotifer agent`: the command's help, as click
        # shows it (on stderr, status 2), not a one-line USAGE_ERROR.
        exc.show()
        return 2
    except click.UsageError as exc:
        where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        return _report("USAGE_ERROR", exc.format_message() + where, 2)
    except click.ClickException as exc:
        return _report("USAGE_ERROR", exc.format_message(), exc.exit_code or 1)
    except (RotiferError, AgentMemoryError) as exc:
        click.echo(common.error_line(exc), err=True)  # both print as "CODE: message"
        return 1
    except Terminated as exc:
        return _stopped(exc)
    except KeyboardInterrupt:
        from .entry import interrupted_line

        click.echo(interrupted_line().decode(), err=True, nl=False)
        return 130
    except BrokenPipeError:
        # Output piped into e.g. `head`, which exited: nothing more to say.
        _silence_stdout()
        return 1
    except Exception as exc:
        if os.environ.get("ROTIFER_DEBUG"):
            raise
        return _report("INTERNAL_ERROR", f"{type(exc).__name__}: {exc} (this is a bug in "
                       "rotifer; rerun with ROTIFER_DEBUG=1 for the traceback)", 1)
    return 0


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:  # pragma: no cover
        pass


if __name__ == "__main__":  # pragma: no cover
    main()
