"""The formatter examples of ``examples/wasm/`` (Rust, C, AssemblyScript),
built from source with the real toolchains and run through the real
``rotifer`` command: each remembers the indent, the three share one
SAME_DOMAIN preference with the seed's Python formatter (the seed's "swap for
a better formatter"), and their helpers turn refused memory calls into the
seed's codes."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import MemoryStore
from tests.cli.helpers import add_gene, init_project, ok, refused, v2_of, wrap
from tests.wasm.example_builds import (
    EXAMPLE_OF,
    EXAMPLES,
    MISSING_TOOLCHAIN,
    REPO,
    build_env,
    build_example,
    install,
    run_build,
    shared_cache,
)

TOOLCHAINS = list(EXAMPLE_OF)
CODE = "{\nx\n}"


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``built(toolchain)`` -> the example built once per run (the xdist
    workers share the builds)."""
    cache = shared_cache(tmp_path_factory)
    return lambda toolchain: build_example(toolchain, cache)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return init_project(tmp_path / "proj")


def add_example(root: Path, built: Callable[[str], Path], toolchain: str) -> tuple[str, str]:
    """Install and ``rotifer compile`` the example; (gene name, v2 id)."""
    name = install(built(toolchain), root)
    out = ok(root, "compile", name)
    assert f"Compiled gene '{name}' (wasm, domain formatter, gene.wasm)" in out
    return name, v2_of(out)


def run(root: Path, agent: str, value: dict[str, Any]) -> Any:
    return json.loads(ok(root, "agent", "run", agent, "--input", json.dumps(value)))


def entries(root: Path, agent: str) -> list[Any]:
    with MemoryStore.open(root / ".rotifer") as store:
        return store.deployer(agent).list()


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_the_example_compiles_and_passes_its_own_tests(proj: Path, built: Callable[[str], Path],
                                                      toolchain: str) -> None:
    name, _ = add_example(proj, built, toolchain)
    out = ok(proj, "test", name)
    assert out.splitlines()[-1] == "5 passed, 0 failed", out


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_the_formatter_remembers_the_indent(proj: Path, built: Callable[[str], Path],
                                            toolchain: str) -> None:
    name, v2 = add_example(proj, built, toolchain)
    ok(proj, "agent", "create", "fmt", "--genes", name)
    assert run(proj, "fmt", {"code": "{\n\tx\n}"}) == {"formatted": "{\n  x\n}", "indent": 2}
    assert entries(proj, "fmt") == []  # reading a missing preference stores nothing
    assert run(proj, "fmt", {"code": CODE, "indent": 4}) == {"formatted": "{\n    x\n}",
                                                              "indent": 4}
    assert run(proj, "fmt", {"code": CODE}) == {"formatted": "{\n    x\n}", "indent": 4}
    [entry] = entries(proj, "fmt")
    assert (entry.key, entry.category.value, entry.value) == ("formatter/indent", "PREFERENCE", b"4")
    assert entry.created_by == v2
    assert entry.access_policy.read_scope.value == "SAME_DOMAIN"
    assert entry.access_policy.write_scope.value == "SAME_DOMAIN"


def test_the_three_toolchains_and_python_share_one_preference(
        proj: Path, built: Callable[[str], Path]) -> None:
    """The seed: "If you swap this gene for a better formatter in the same
    domain, the new one finds the saved indent where the old one left it." """
    shutil.copytree(REPO / "examples" / "formatter" / "genes" / "formatter",
                    proj / "genes" / "formatter")
    python = wrap(proj, "formatter")
    wasm = [add_example(proj, built, t)[0] for t in TOOLCHAINS]
    ok(proj, "agent", "create", "fmt", "--genes", "formatter")
    assert run(proj, "fmt", {"code": CODE, "indent": 3})["indent"] == 3
    remembered = 3
    for width, gene in enumerate([*wasm, "formatter"], start=5):
        ok(proj, "agent", "update-genes", "fmt", "--genes", gene)
        assert run(proj, "fmt", {"code": CODE}) == {
            "formatted": "{\n" + " " * remembered + "x\n}", "indent": remembered}, gene
        assert run(proj, "fmt", {"code": CODE, "indent": width})["indent"] == width
        remembered = width
    [entry] = entries(proj, "fmt")
    assert entry.created_by == python  # the creator stays; every writer reached the same entry
    assert entry.value == str(remembered).encode()


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_refused_calls_reach_the_user_with_the_seed_code(proj: Path, built: Callable[[str], Path],
                                                         toolchain: str) -> None:
    name, _ = add_example(proj, built, toolchain)
    # `rotifer run` runs a gene alone: every memory call is -2, and the
    # helper's error becomes the gene's rejection with the seed's code.
    write = refused(proj, "MEMORY_ACCESS_DENIED", "run", name, "--input",
                    json.dumps({"code": CODE, "indent": 4}))
    assert "memory calls only work when the gene runs as part of an agent" in write
    refused(proj, "MEMORY_ACCESS_DENIED", "run", name, "--input", json.dumps({"code": CODE}))
    # A quota of 10 bytes: "formatter/indent" + "4" needs 17.
    ok(proj, "agent", "create", "tiny", "--genes", name, "--memory-quota", "0.01KB")
    err = refused(proj, "MEMORY_QUOTA_EXCEEDED", "agent", "run", "tiny", "--input",
                  json.dumps({"code": CODE, "indent": 4}))
    assert "needs 17 bytes" in err
    assert entries(proj, "tiny") == []


#: A gene of the formatter domain that stores whatever text it is given as the
#: indent, then hands the next gene of its ``seq`` some code to format.
STORE_TEXT = '''
def express(input, ctx):
    ctx.memory.write_memory("formatter/indent", input["text"].encode(), "PREFERENCE")
    return {"code": "{\\nx\\n}"}
'''


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_what_another_gene_stored_is_read_whatever_its_size(
        proj: Path, built: Callable[[str], Path], toolchain: str) -> None:
    """An entry bigger than the helper's first buffer takes the -1 path (the
    host says how much it needs, the helper asks again); a value that is not
    a number gives the default indent instead of failing the run."""
    name, _ = add_example(proj, built, toolchain)
    add_gene(proj, "store-text", STORE_TEXT,
             inputSchema={"type": "object", "properties": {"text": {"type": "string"}}})
    wrap(proj, "store-text")
    ok(proj, "agent", "create", "fmt", "--genes", f"store-text,{name}")
    for text, indent in [("0" * 3000 + "6", 6), (" 7 ", 7), ("wide", 2)]:
        assert run(proj, "fmt", {"text": text}) == {
            "formatted": "{\n" + " " * indent + "x\n}", "indent": indent}, text


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_a_build_without_its_toolchain_says_what_to_install(tmp_path: Path, toolchain: str) -> None:
    env = build_env() | {"RUSTC": "/bin/false", "CC": "/nonexistent/clang",
                         "ASC": "/nonexistent/asc"}
    done = run_build(EXAMPLES / EXAMPLE_OF[toolchain], tmp_path / "gene.wasm", env)
    assert done.returncode == MISSING_TOOLCHAIN, done.stderr
    assert {"rust": "libstd-rust-dev-wasm32", "c": "install clang and lld",
            "assemblyscript": "npm install --save-dev assemblyscript"}[toolchain] in done.stderr
    assert not (tmp_path / "gene.wasm").exists()


def test_a_c_gene_built_without_bulk_memory_is_told_why(tmp_path: Path) -> None:
    clang = shutil.which("clang")
    if clang is None:
        pytest.skip("no clang")  # test_the_example_compiles... fails under CI already
    done = subprocess.run(
        [clang, "--target=wasm32-unknown-unknown", "-O2", "-nostdlib", "-Wl,--no-entry",
         "-o", str(tmp_path / "gene.wasm"), str(EXAMPLES / "formatter-c" / "gene.c")],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0
    assert "build with -mbulk-memory" in done.stderr
