"""The first hour of a new user (issue 36): ``rotifer init`` prints the next
steps and writes a .gitignore, refuses to nest a project in another's genes/;
``rotifer new gene`` scaffolds that wrap, test and run at once; a bare
``rotifer`` prints its help; ``wrap genes/NAME`` names the gene."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .helpers import init_project, ok_here, refused_here, run_here


def test_init_prints_next_steps_and_ignores_its_state(tmp_path: Path) -> None:
    out = ok_here(tmp_path, "init", "proj")
    assert "Next:" in out and "cd proj" in out and "rotifer new gene hello" in out
    assert (tmp_path / "proj" / ".gitignore").read_text().splitlines()[-1] == ".rotifer/"
    # a second init says nothing new and does not add the line twice
    out = ok_here(tmp_path, "init", "proj")
    assert "Next:" not in out
    assert (tmp_path / "proj" / ".gitignore").read_text().count(".rotifer/") == 1
    # an existing .gitignore without the line gets it appended, its lines kept
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / ".gitignore").write_text("*.pyc")
    ok_here(tmp_path, "init", "other")
    assert (tmp_path / "other" / ".gitignore").read_text() == "*.pyc\n.rotifer/\n"


def test_init_inside_another_projects_genes_is_refused(tmp_path: Path) -> None:
    root = init_project(tmp_path / "outer")
    err = refused_here(root / "genes", "PROJECT_ERROR", "init", "inner")
    assert "inside the genes/ folder" in err
    assert not (root / "genes" / "inner").exists()
    # elsewhere inside the project is not a gene folder: allowed
    ok_here(root, "init", "sub")


def test_init_help_names_one_metavar() -> None:
    done = run_here(Path.cwd(), "init", "--help")
    assert "DIRECTORY" not in done.stdout and "[DIR]" in done.stdout


@pytest.mark.parametrize("kind", ["python", "wat", "typescript"])
def test_new_gene_wraps_tests_and_runs_at_once(tmp_path: Path, kind: str) -> None:
    if kind == "typescript" and shutil.which("node") is None:
        pytest.skip("needs Node.js")
    root = init_project(tmp_path / "p")
    ok_here(root, "new", "gene", "hello", f"--{kind}")
    ok_here(root, "compile" if kind == "wat" else "wrap", "hello")
    assert "2 passed, 0 failed" in ok_here(root, "test", "hello")
    alone = json.loads(ok_here(root, "run", "hello", "--input", '{"name": "Ada"}'))
    assert alone in ({"greeting": "hello Ada", "count": None},
                     {"seen": False, "memory": False})
    ok_here(root, "agent", "create", "bot", "--genes", "hello")
    first = json.loads(ok_here(root, "agent", "run", "bot", "--input", "{}"))
    second = json.loads(ok_here(root, "agent", "run", "bot", "--input", "{}"))
    assert (first, second) in (({"greeting": "hello world", "count": 1},
                                {"greeting": "hello world", "count": 2}),
                               ({"seen": False}, {"seen": True}))
    # never overwrites
    refused_here(root, "GENE_EXISTS", "new", "gene", "hello")


@pytest.mark.parametrize("args", [[], ["agent"], ["agent", "memory"]])
def test_bare_group_prints_its_help(tmp_path: Path, args: list[str]) -> None:
    done = run_here(tmp_path, *args)
    assert done.returncode == 2, done  # click's convention for a group without command
    assert "USAGE_ERROR" not in done.stderr
    assert "Usage: rotifer" in done.stderr and "\nCommands:\n" in done.stderr
    assert len(done.stderr.splitlines()) > 5


def test_wrap_takes_the_gene_folder_as_a_path(tmp_path: Path) -> None:
    root = init_project(tmp_path / "p")
    ok_here(root, "new", "gene", "greeter")
    out = ok_here(root, "wrap", "genes/greeter/")
    assert "Wrapped gene 'greeter'" in out
    assert "Wrapped gene 'greeter'" in ok_here(root / "genes", "wrap", "./greeter")
    err = refused_here(root, "INVALID_GENE", "wrap", str(tmp_path))
    assert "rotifer wrap NAME" in err


def test_memory_delete_help_says_exactly_one_of_key_or_category() -> None:
    done = run_here(Path.cwd(), "agent", "memory", "delete", "--help")
    assert "exactly one of --key or --category" in " ".join(done.stdout.split())
