"""Every command's --help ends with an ``Example:`` block (as sqlite-utils and llm
do) whose lines run that very command.  In-process (``CliRunner``): the real
click commands, no subprocess needed to read help text."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rotifer.cli.main import cli

from .helpers import ok, run


def commands(group: click.Group = cli, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[str, ...]]:
    yield path
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # click's API: a lazy group loads them here
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name)


ALL = list(commands())


def test_every_command_is_walked() -> None:
    assert len(ALL) >= 19 and ("agent", "memory", "delete") in ALL and ("agent", "move") in ALL


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "rotifer")
def test_help_has_an_example_of_the_command(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="rotifer")
    assert result.exit_code == 0, result.output
    assert "\nExample:\n" in "\n" + "\n".join(line.strip() for line in result.output.splitlines())
    block = result.output.split("Example:", 1)[1].split("\n\n", 2)[1]
    runs = [line.strip() for line in block.splitlines() if line.strip()]
    assert runs, result.output
    want = " ".join(("rotifer", *path))
    assert all(run.startswith("rotifer ") for run in runs), runs
    assert any(run.startswith(want) for run in runs), (want, runs)


# -- every example runs as written (issue 36) -----------------------------------------------

REPO = Path(__file__).resolve().parents[2]
#: Examples that cannot run in a test, each with why (everything else must run).
NOT_RUNNABLE = {("console",): "serves until stopped (tests/console runs it)"}


def example_lines(path: tuple[str, ...]) -> list[str]:
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="rotifer")
    block = result.output.split("Example:", 1)[1].split("\n\n", 2)[1]
    return [line.strip() for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def demo_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `make demo` leaves: the formatter genes wrapped, agent fmt that
    remembered the indent 4."""
    root = tmp_path_factory.mktemp("demo") / "demo"
    ok(root.parent, "init", str(root))
    shutil.copytree(REPO / "examples" / "formatter" / "genes", root / "genes",
                    dirs_exist_ok=True)
    ok(root, "wrap", "formatter")
    ok(root, "wrap", "better-formatter")
    ok(root, "agent", "create", "fmt", "--genes", "formatter", "--memory-quota", "1MB")
    ok(root, "agent", "run", "fmt", "--input", '{"code": "{\\na\\n}", "indent": 4}')
    return root


@pytest.mark.parametrize("path", [p for p in ALL if p not in NOT_RUNNABLE],
                         ids=lambda p: " ".join(p) or "rotifer")
def test_every_example_runs_as_written(demo_project: Path, tmp_path: Path,
                                       path: tuple[str, ...]) -> None:
    """Each command's Example block, line by line, in a fresh copy of a
    `make demo` project: every line exits 0."""
    root = tmp_path / "demo"
    shutil.copytree(demo_project, root)
    for line in example_lines(path):
        argv = shlex.split(line)
        assert argv[0] == "rotifer", line
        done = run(root, *argv[1:], stdin="")
        assert done.returncode == 0, (line, done.stdout, done.stderr)
