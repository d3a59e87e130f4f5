"""Every command's --help ends with an ``Example:`` block (as sqlite-utils and llm
do) whose lines run that very command.  In-process (``CliRunner``): the real
click commands, no subprocess needed to read help text."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from rotifer.cli.main import cli


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
