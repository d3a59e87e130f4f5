"""The on-disk module cache and ``compile_wat``.

Whether a load compiled, hit the disk or hit memory is read from the cache's
counters -- behaviour, not timing (the measured figures are in docs/wasm.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import wasmtime

from rotifer.genes.errors import CompileFailed
from rotifer.genes.wasm import cache as cache_module
from rotifer.genes.wasm import compile_wat, run_wasm_gene
from rotifer.genes.wasm.cache import CacheStats, cache_path, clear_memory_cache, engine_tag, stats
from rotifer.genes.wasm.engine import engine_fingerprint
from rotifer.memory import DeniedMemory

from .conftest import gene


def snapshot() -> CacheStats:
    return CacheStats(**vars(stats))


def delta(before: CacheStats) -> dict[str, int]:
    return {k: v - getattr(before, k) for k, v in vars(stats).items()}


def copy_gene(tmp_path: Path, name: str, extra: str = "") -> Path:
    """A gene folder with a copy of a test gene; ``extra`` goes into a comment,
    which does not change the wasm bytes (so not the cache key either)."""
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    path = folder / "gene.wat"
    path.write_text(gene(name).read_text() + f"\n;; {extra}\n")
    return path


def run_reject(path: Path, cache_dir: Path | None) -> None:
    from rotifer.genes.errors import GeneRejected

    with pytest.raises(GeneRejected):
        run_wasm_gene(path, {}, DeniedMemory(), cache_dir=cache_dir)


def test_the_second_run_loads_from_disk_instead_of_compiling(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    path = copy_gene(tmp_path, "reject")
    clear_memory_cache()
    before = snapshot()
    run_reject(path, cache_dir)
    assert delta(before) == {"compiled": 1, "disk_hits": 0, "memory_hits": 0, "disk_rejected": 0}
    files = list(cache_dir.glob("*.cwasm"))
    assert len(files) == 1 and files[0].name.endswith(f"-{engine_tag()}.cwasm")
    clear_memory_cache()
    before = snapshot()
    run_reject(path, cache_dir)
    assert delta(before) == {"compiled": 0, "disk_hits": 1, "memory_hits": 0, "disk_rejected": 0}
    before = snapshot()
    run_reject(path, cache_dir)
    assert delta(before) == {"compiled": 0, "disk_hits": 0, "memory_hits": 1, "disk_rejected": 0}


def test_a_new_process_does_not_compile_a_cached_gene_again(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    path = copy_gene(tmp_path, "prefs")
    script = (
        "import json, sys; from pathlib import Path\n"
        "from rotifer.genes.wasm import run_wasm_gene\n"
        "from rotifer.genes.wasm.cache import stats\n"
        "from rotifer.memory import MemoryStore\n"
        "store = MemoryStore.open(Path(sys.argv[3]))\n"
        "store.has_agent('a') or store.create_agent('a')\n"
        "memory = store.for_gene('a', 'v2:' + '1' * 64, 'formatter')\n"
        "out = run_wasm_gene(Path(sys.argv[1]), json.loads(sys.argv[4]), memory,"
        " cache_dir=Path(sys.argv[2]))\n"
        "print(json.dumps({'out': out, 'compiled': stats.compiled, 'disk': stats.disk_hits}))\n"
    )

    def run(input: object) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", script, str(path), str(cache_dir), str(tmp_path / ".rotifer"),
             json.dumps(input)], capture_output=True, text=True, check=True, timeout=120)
        return json.loads(done.stdout)

    assert run({"indent": 4}) == {"out": {"indent": 4}, "compiled": 1, "disk": 0}
    assert run({}) == {"out": {"indent": 4}, "compiled": 0, "disk": 1}


@pytest.mark.parametrize("damage", ["flip a payload byte", "truncate", "wrong magic", "empty",
                                    "valid header, not a module"])
def test_a_damaged_cache_file_is_compiled_again_and_replaced(tmp_path: Path, damage: str) -> None:
    cache_dir = tmp_path / "cache"
    path = copy_gene(tmp_path, "reject", damage)
    clear_memory_cache()
    run_reject(path, cache_dir)
    (file,) = cache_dir.glob("*.cwasm")
    good = file.read_bytes()
    head = len(cache_module.MAGIC) + 32
    if damage == "flip a payload byte":
        bad = good[:head + 100] + bytes([good[head + 100] ^ 0xFF]) + good[head + 101:]
    elif damage == "truncate":
        bad = good[: len(good) // 2]
    elif damage == "wrong magic":
        bad = b"X" + good[1:]
    elif damage == "empty":
        bad = b""
    else:
        import hashlib

        payload = b"\x00asm\x01\x00\x00\x00"
        bad = cache_module.MAGIC + hashlib.sha256(payload).digest() + payload
    file.write_bytes(bad)
    clear_memory_cache()
    before = snapshot()
    run_reject(path, cache_dir)
    assert delta(before) == {"compiled": 1, "disk_hits": 0, "memory_hits": 0, "disk_rejected": 1}
    assert file.read_bytes() != bad
    clear_memory_cache()
    before = snapshot()
    run_reject(path, cache_dir)
    assert delta(before)["disk_hits"] == 1


def test_the_cache_is_keyed_by_content(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    run_reject(copy_gene(tmp_path, "reject", "one"), cache_dir)
    run_reject(copy_gene(tmp_path, "reject", "two"), cache_dir)
    # the comments differ, but WAT comments do not reach the wasm bytes
    assert len(list(cache_dir.glob("*.cwasm"))) == 1
    path = tmp_path / "changed" / "gene.wat"
    path.parent.mkdir()
    path.write_text(gene("reject").read_text().replace("whole number", "whole numbr"))
    run_reject(path, cache_dir)
    assert len(list(cache_dir.glob("*.cwasm"))) == 2


def test_the_engine_tag_covers_the_wasmtime_version() -> None:
    from importlib import metadata

    assert f"wasmtime {metadata.version('wasmtime')};" in engine_fingerprint()
    assert cache_path(Path("/c"), "ab").name == f"ab-{engine_tag()}.cwasm"


def test_a_cache_that_cannot_be_written_costs_only_a_compile(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    path = copy_gene(tmp_path, "reject", "unwritable")
    clear_memory_cache()
    before = snapshot()
    run_reject(path, blocker)
    assert delta(before)["compiled"] == 1


def test_no_cache_dir_means_memory_only(tmp_path: Path) -> None:
    path = copy_gene(tmp_path, "reject", "memory only")
    clear_memory_cache()
    before = snapshot()
    run_reject(path, None)
    run_reject(path, None)
    assert delta(before) == {"compiled": 1, "disk_hits": 0, "memory_hits": 1, "disk_rejected": 0}
    assert not any(tmp_path.rglob("*.cwasm"))


# -- compile_wat ------------------------------------------------------------------------


def test_compile_wat_writes_the_module(tmp_path: Path) -> None:
    out = tmp_path / "gene.wasm"
    compile_wat(gene("prefs"), out)
    assert out.read_bytes() == bytes(wasmtime.wat2wasm(gene("prefs").read_text()))
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_compiled_gene_runs_like_its_wat(tmp_path: Path) -> None:
    from rotifer.memory import MemoryStore

    folder = tmp_path / "prefs"
    folder.mkdir()
    compile_wat(gene("prefs"), folder / "gene.wasm")
    with MemoryStore.open(tmp_path / ".rotifer") as store:
        store.create_agent("a")
        memory = store.for_gene("a", "v2:" + "2" * 64, "formatter")
        assert run_wasm_gene(folder / "gene.wasm", {"indent": 3}, memory) == {"indent": 3}
        assert run_wasm_gene(gene("prefs"), {}, memory) == {"indent": 3}


@pytest.mark.parametrize(("text", "message"), [
    ("(module (func", "bad.wat is not valid WAT"),
    ("(module (func (result i32)))", "bad.wat is not a valid WebAssembly module"),
    ("(module (memory (export \"memory\") 1))", "bad.wat does not follow the rotifer WASM ABI"),
])
def test_compile_wat_refuses_bad_genes_and_leaves_the_output_alone(
        tmp_path: Path, text: str, message: str) -> None:
    source = tmp_path / "bad.wat"
    source.write_text(text)
    out = tmp_path / "gene.wasm"
    out.write_bytes(b"previous")
    with pytest.raises(CompileFailed) as info:
        compile_wat(source, out)
    assert message in info.value.message
    assert info.value.code == "COMPILE_FAILED"
    assert out.read_bytes() == b"previous"
    assert not list(tmp_path.glob(".tmp-*"))


def test_compile_wat_error_names_the_line(tmp_path: Path) -> None:
    source = tmp_path / "bad.wat"
    source.write_text("(module\n  (func $f\n    (i32.add oops)))\n")
    with pytest.raises(CompileFailed) as info:
        compile_wat(source, tmp_path / "gene.wasm")
    assert "bad.wat is not valid WAT" in info.value.message
    assert ":3:" in info.value.message


def test_compile_wat_of_a_missing_or_binary_file(tmp_path: Path) -> None:
    with pytest.raises(CompileFailed, match="cannot read"):
        compile_wat(tmp_path / "nope.wat", tmp_path / "gene.wasm")
    binary = tmp_path / "bin.wat"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(CompileFailed, match="not UTF-8"):
        compile_wat(binary, tmp_path / "gene.wasm")


def test_compile_wat_into_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(CompileFailed, match="cannot write"):
        compile_wat(gene("prefs"), tmp_path / "no" / "such" / "gene.wasm")
