"""Genes from real toolchains and WASI command genes through the real
``rotifer`` command: compile, run, test, agent run and compositions, their
log lines on stderr, and refusals that say what to do.  The genes are built
from tests/wasm/sources (skipped without the toolchain, failed under CI)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import add_gene, init_project, v2_of
from tests.cli.helpers import ok_here as ok
from tests.cli.helpers import refused_here as refused
from tests.cli.helpers import run_here as run
from tests.wasm.conftest import BuiltGenes

#: A WAT express gene that logs at each level and echoes its input.
LOGGER_WAT = """
(module
  (import "rotifer" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "debug line")
  (data (i32.const 1040) "info line")
  (data (i32.const 1056) "warning line")
  (data (i32.const 2048) "{}\\00")
  (func (export "express") (param i32 i32) (result i32)
    (call $log (i32.const 0) (i32.const 1024) (i32.const 10))
    (call $log (i32.const 1) (i32.const 1040) (i32.const 9))
    (call $log (i32.const 2) (i32.const 1056) (i32.const 12))
    (i32.const 2048))
)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltGenes:
    return BuiltGenes(tmp_path_factory.mktemp("cli-built-genes"))


def add_built(root: Path, built: BuiltGenes, name: str, *, domain: str = "formatter") -> Path:
    folder = add_gene(root, name, b"", file="gene.wasm", domain=domain)
    shutil.copyfile(built[name], folder / "gene.wasm")
    return folder


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return init_project(tmp_path / "proj")


def test_log_lines_of_a_wasm_gene_reach_the_user_like_any_gene(proj: Path) -> None:
    add_gene(proj, "logger", LOGGER_WAT, file="gene.wat")
    done = run(proj, "run", "logger", "--input", "{}")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}
    assert done.stderr.splitlines() == [
        "[logger] debug line", "[logger] info line", "[logger] warning line"]


def test_an_assemblyscript_gene_compiles_remembers_and_traces(proj: Path,
                                                              built: BuiltGenes) -> None:
    add_built(proj, built, "as_prefs")
    v2_of(ok(proj, "compile", "as_prefs"))
    ok(proj, "agent", "create", "fmt", "--genes", "as_prefs")
    first = run(proj, "agent", "run", "fmt", "--input", '{"indent": 6}')
    assert first.returncode == 0, first.stderr
    assert "[as_prefs] trace: express 12, 1" in first.stderr.splitlines()
    saved = json.loads(ok(proj, "agent", "run", "fmt", "--input", "{}"))["saved"]
    assert base64.b64decode(saved["value"]) == b"6"
    err = refused(proj, "GENE_FAILED", "agent", "run", "fmt", "--input", '{"abort": 1}')
    assert "as_prefs aborted: the gene was told to abort at " in err.splitlines()[-1]


def test_wasi_command_genes_under_run_test_and_every_composition(proj: Path,
                                                                 built: BuiltGenes) -> None:
    for name in ("c_echo", "rust_echo", "c_fails", "as_prefs"):
        add_built(proj, built, name)
        v2_of(ok(proj, "compile", name))
    done = run(proj, "run", "c_echo", "--input", '{"a": "ü"}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"a": "ü"}
    assert "[c_echo] c echo read 10 bytes" in done.stderr.splitlines()

    (proj / "genes" / "rust_echo" / "tests.json").write_text(json.dumps({"cases": [
        {"name": "echoes", "input": {"x": [1, 2]}, "expect": {"x": [1, 2]}}]}))
    assert "PASS" in ok(proj, "test", "rust_echo")

    compositions = {
        "seq": ("c_echo,rust_echo", {"n": 1}),
        "par": ("c_echo,as_prefs,rust_echo", [{"n": 1}, {"saved": None}, {"n": 1}]),
        "try": ("c_fails,rust_echo", {"n": 1}),
        "cond": ("c_echo,rust_echo,c_fails", {"n": 1}),
    }
    for composition, (genes, expected) in compositions.items():
        ok(proj, "agent", "create", composition, "--genes", genes, "--composition",
           composition)
        out = ok(proj, "agent", "run", composition, "--input", '{"n": 1}')
        assert json.loads(out) == (expected if composition != "seq" else {"n": 1}), composition


def test_a_failing_command_gene_gives_one_line_with_code_and_stderr(proj: Path,
                                                                    built: BuiltGenes) -> None:
    add_built(proj, built, "c_fails")
    err = refused(proj, "GENE_FAILED", "run", "c_fails", "--input", "{}")
    assert err.splitlines()[-1] == (
        "GENE_FAILED: c_fails exited with code 3; stderr: something broke | exiting with 3")


def test_compile_says_how_to_build_without_memset(proj: Path) -> None:
    add_gene(proj, "c_gene", '(module (import "env" "memset" (func (param i32 i32 i32) '
             '(result i32))) (memory (export "memory") 1) (func (export "express") '
             '(param i32 i32) (result i32) (i32.const 0)))', file="gene.wat")
    err = refused(proj, "COMPILE_FAILED", "compile", "c_gene")
    assert "env.memset" in err and "-mbulk-memory" in err
    assert not (proj / "genes" / "c_gene" / "gene.wasm").exists()
