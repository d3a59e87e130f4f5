"""WASM genes through the real ``rotifer`` command: compile, run in an agent
(alone and in a ``par`` of compiled genes), the on-disk module cache across
processes, and a stale compiled gene getting -2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import add_wat_gene, audit, init_project, ok, ok_process, refused, v2_of

# Subprocesses, not in-process runs: the module cache is tested across processes
# (one process also keeps compiled modules in memory).


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = init_project(tmp_path / "proj")
    add_wat_gene(root, "prefs", "prefs")
    add_wat_gene(root, "writer", "writer", domain="writing")
    return root


def cache_files(root: Path) -> dict[str, tuple[int, int]]:
    """``.cwasm`` files of the project's module cache: name -> (inode, mtime_ns)."""
    folder = root / ".rotifer" / "cache" / "wasm"
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("*.cwasm")}


def test_the_module_cache_is_written_once_and_reused_by_the_next_process(proj: Path) -> None:
    ok(proj, "compile", "prefs")
    ok(proj, "agent", "create", "w", "--genes", "prefs")
    assert cache_files(proj) == {}
    assert json.loads(ok(proj, "agent", "run", "w", "--input", '{"indent": 6}')) == {"indent": 6}
    first = cache_files(proj)
    assert len(first) == 1
    # A second process loads the module from the disk cache: nothing recompiled
    # or rewritten, and the gene finds what the first run remembered.
    assert json.loads(ok(proj, "agent", "run", "w", "--input", "{}")) == {"indent": 6}
    assert cache_files(proj) == first


def test_a_damaged_cache_file_is_compiled_again(proj: Path) -> None:
    ok_process(proj, "compile", "prefs")
    ok_process(proj, "agent", "create", "w", "--genes", "prefs")
    ok_process(proj, "agent", "run", "w", "--input", '{"indent": 5}')
    [name] = cache_files(proj)
    path = proj / ".rotifer" / "cache" / "wasm" / name
    path.write_bytes(path.read_bytes()[:100])
    assert json.loads(ok_process(proj, "agent", "run", "w", "--input", "{}")) == {"indent": 5}
    assert path.stat().st_size > 100  # rewritten whole


def test_par_of_compiled_genes_each_under_its_own_id(proj: Path) -> None:
    prefs = v2_of(ok(proj, "compile", "prefs"))
    writer = v2_of(ok(proj, "compile", "writer"))
    ok(proj, "agent", "create", "p", "--genes", "prefs,writer", "--composition", "par")
    out = ok(proj, "agent", "run", "p", "--input", '{"indent": 3, "id": 1, "n": 3}')
    assert json.loads(out) == [{"indent": 3}, {"written": 3}]
    listed = json.loads(ok(proj, "agent", "memory", "list", "p", "--json"))
    assert {e["key"]: e["createdBy"] for e in listed["entries"]} == {
        "formatter/indent": prefs, "par/1/0": writer, "par/1/1": writer, "par/1/2": writer}
    assert listed["usedBytes"] == sum(e["size"] for e in listed["entries"])


def test_a_stale_compiled_gene_gets_minus_two_with_a_hint(proj: Path) -> None:
    ok(proj, "compile", "prefs")
    ok(proj, "agent", "create", "w", "--genes", "prefs")
    ok(proj, "agent", "run", "w", "--input", '{"indent": 4}')
    # Change the module without recompiling (a custom section "x" holding "y"):
    # still a valid module that runs, but its content was never compiled here.
    wasm = proj / "genes" / "prefs" / "gene.wasm"
    wasm.write_bytes(wasm.read_bytes() + b"\x00\x03\x01xy")
    err = refused(proj, "MEMORY_ACCESS_DENIED", "agent", "run", "w", "--input", "{}")
    assert ("hint: gene 'prefs' changed since it was last compiled, so its memory calls are "
            "refused: run `rotifer compile prefs` again") in err
    assert audit(proj)[-1]["action"] == "access_denied"
    assert audit(proj)[-1]["actor"] is None
