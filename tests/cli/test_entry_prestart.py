"""The console script starts the fork server early only for commands that run genes."""

from __future__ import annotations

import pytest

from rotifer.cli.entry import runs_genes


@pytest.mark.parametrize(("argv", "expected"), [
    (["agent", "run", "a", "--input", "{}"], True),
    (["run", "g"], True),
    (["test", "g"], True),
    (["--project", "p", "agent", "run", "a"], True),
    (["--project=p", "test", "g"], True),
    (["agent", "list"], False),
    (["agent", "show", "run"], False),
    (["init", "run"], False),
    (["--project", "run"], False),
    ([], False),
])
def test_only_commands_that_run_genes_start_it(argv: list[str], expected: bool) -> None:
    assert runs_genes(argv) is expected
