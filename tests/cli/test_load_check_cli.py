"""A gene that cannot run is refused where it is first checked (issue 36, 1):
``wrap``, ``rotifer test`` and ``agent create`` load it for real, contained,
as a run does, and refuse it with the very error the run gives -- not
"the gene loads" and ``0 passed, 0 failed`` followed by a run that fails.

Python (``def run`` instead of ``express``, ``express = 5``, ``import
nosuchmod``) and Node genes.  Each check is bitten by the same gene fixed:
the same commands then succeed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .helpers import add_gene, init_project, last_line, ok, refused, wrap

BROKEN_PYTHON = {
    "no-express": ("def run(input, ctx):\n    return input\n", "INVALID_GENE",
                   "defines no function express"),
    "not-callable": ("express = 5\n", "INVALID_GENE", "defines no function express"),
    "bad-import": ("import nosuchmod\n\ndef express(input, ctx):\n    return input\n",
                   "GENE_FAILED", "ModuleNotFoundError"),
}
GOOD_PYTHON = "def express(input, ctx):\n    return input\n"

BROKEN_NODE = {
    "no-express": ("exports.run = (input, ctx) => input;\n", "GENE_FAILED",
                   "does not export a function express"),
    "bad-import": ("const x = require('nosuchmod');\nexports.express = (i, c) => i;\n",
                   "GENE_FAILED", "nosuchmod"),
}
GOOD_NODE = "exports.express = (input, ctx) => input;\n"


def _run_error(root: Path, gene: str) -> str:
    """What `rotifer run` says of the gene: the error wrap must give too."""
    return last_line(refused(root, last_line_code(root, gene), "run", gene,
                                  "--input", "{}"))


def last_line_code(root: Path, gene: str) -> str:
    from .helpers import run

    done = run(root, "run", gene, "--input", "{}")
    return last_line(done.stderr).split(":", 1)[0]


@pytest.mark.parametrize("case", sorted(BROKEN_PYTHON))
def test_python_gene_that_cannot_load_is_refused_by_wrap_test_and_create(
        tmp_path: Path, case: str) -> None:
    code, error, words = BROKEN_PYTHON[case]
    root = init_project(tmp_path / "p")
    add_gene(root, "broken", code)
    run_says = _run_error(root, "broken")
    assert run_says.startswith(f"{error}: ") and words in run_says, run_says
    # wrap: the same line, and no id recorded
    assert last_line(refused(root, error, "wrap", "broken")) == run_says
    assert "broken" not in (root / ".rotifer" / "genes.json").read_text() \
        if (root / ".rotifer" / "genes.json").exists() else True
    # rotifer test, without and with a tests.json
    assert last_line(refused(root, error, "test", "broken")) == run_says
    (root / "genes" / "broken" / "tests.json").write_text('[{"input": {}}]')
    assert last_line(refused(root, error, "test", "broken")) == run_says
    # agent create: the gene's content wrapped while it still loaded, then broken
    (root / "genes" / "broken" / "gene.py").write_text(GOOD_PYTHON)
    wrap(root, "broken")
    ok(root, "test", "broken")
    (root / "genes" / "broken" / "gene.py").write_text(code)
    shutil.copy(root / ".rotifer" / "genes.json", tmp_path / "genes.json")
    # register the broken content the way an older rotifer would have (no load check)
    from rotifer.agents.project import Project
    from rotifer.genes.gene import register_gene

    project = Project(root)
    register_gene(project.load_gene("broken"), project.registry(), via="wrap")
    assert last_line(refused(root, error, "agent", "create", "bot", "--genes",
                                  "broken")) == run_says
    assert not (root / ".rotifer" / "agents" / "bot.json").exists()
    # the same gene fixed: every command accepts it (the check bites only on the break)
    (root / "genes" / "broken" / "gene.py").write_text(GOOD_PYTHON)
    wrap(root, "broken")
    ok(root, "agent", "create", "bot", "--genes", "broken")


def test_trusted_gene_is_loaded_trusted_at_create(tmp_path: Path) -> None:
    root = init_project(tmp_path / "p")
    add_gene(root, "broken", BROKEN_PYTHON["not-callable"][0])
    from rotifer.agents.project import Project
    from rotifer.genes.gene import register_gene

    project = Project(root)
    register_gene(project.load_gene("broken"), project.registry(), via="wrap")
    refused(root, "INVALID_GENE", "agent", "create", "bot", "--genes", "broken",
                 "--trust", "broken")


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
@pytest.mark.parametrize("case", sorted(BROKEN_NODE))
def test_node_gene_that_cannot_load_is_refused_by_wrap_and_test(tmp_path: Path,
                                                                 case: str) -> None:
    code, error, words = BROKEN_NODE[case]
    root = init_project(tmp_path / "p")
    add_gene(root, "broken", code, file="index.js")
    run_says = _run_error(root, "broken")
    assert run_says.startswith(f"{error}: ") and words in run_says, run_says
    assert last_line(refused(root, error, "wrap", "broken")) == run_says
    assert last_line(refused(root, error, "test", "broken")) == run_says
    (root / "genes" / "broken" / "index.js").write_text(GOOD_NODE)
    wrap(root, "broken")
    ok(root, "test", "broken")
    ok(root, "agent", "create", "bot", "--genes", "broken")


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_wrap_says_when_a_typescript_gene_cannot_be_loaded_here(tmp_path: Path) -> None:
    """No TypeScript compiler: wrap records the id (that is its job) but says at
    once what the run will need, instead of agent run saying it after create."""
    from .helpers import run

    root = init_project(tmp_path / "p")
    add_gene(root, "ts", "export const express = (i: unknown) => i;\n", file="index.ts")
    env = {"ROTIFER_NODE_MODULES": str(tmp_path / "empty")}
    done = run(root, "wrap", "ts", env=env)
    assert done.returncode == 0, done.stderr
    assert "hint: " in done.stderr and "make node-deps" in done.stderr
    refused(root, "GENE_UNAVAILABLE", "agent", "create", "bot", "--genes", "ts", env=env)
