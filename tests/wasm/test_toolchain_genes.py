"""Genes built from source with the real toolchains (AssemblyScript, Rust
``wasm32-wasi``, C with wasi-libc) run under the runtime: express genes that
remember, ``abort``/``trace``/``seed``, panics, WASI command genes that echo
their input, and command genes that misbehave.  Built by ``conftest.built``
into a temporary directory; skipped without the toolchain, failed under CI."""

from __future__ import annotations

import base64
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from rotifer.genes.errors import GeneFailed
from rotifer.genes.wasm import GeneInstance, Limits, prepare_code, run_wasm_code
from rotifer.genes.wasm import cache as wasm_cache
from rotifer.genes.wasm.compile import check_wasm
from rotifer.memory import DeniedMemory, GeneMemoryAccess, MemoryStore

from .conftest import AGENT, BuiltGenes, gene_id

PREFS_GENES = ["as_prefs", "rust_prefs", "c_prefs"]


def run(built: BuiltGenes, name: str, input: Any, memory: GeneMemoryAccess, *,
        logs: list[tuple[int, str]] | None = None, **options: Any) -> Any:
    sink = None if logs is None else (lambda level, line: logs.append((level, line)))
    return run_wasm_code(built.code(name), "gene.wasm", input, memory, name=name,
                         log_sink=sink, **options)


def indent_of(entry: dict[str, Any]) -> str:
    return base64.b64decode(entry["value"]).decode()


@pytest.mark.parametrize("name", PREFS_GENES)
def test_a_toolchain_gene_remembers_across_runs(built: BuiltGenes, store: MemoryStore,
                                                name: str) -> None:
    memory = store.for_gene(AGENT, gene_id(name), "formatter")
    assert run(built, name, {}, memory)["saved"] is None
    wrote = run(built, name, {"indent": 4}, memory)["wrote"]
    assert wrote["key"] == "formatter/indent" and wrote["createdBy"] == gene_id(name)
    assert indent_of(run(built, name, {}, memory)["saved"]) == "4"
    entry = store.for_gene(AGENT, gene_id(name), "formatter").read_memory("formatter/indent")
    assert entry is not None and entry.value == b"4"


@pytest.mark.parametrize("name", PREFS_GENES)
def test_rotifer_compile_accepts_toolchain_output(built: BuiltGenes, name: str) -> None:
    check_wasm(built.code(name), "gene.wasm")


def test_assemblyscript_default_output_imports_abort_trace_and_seed(built: BuiltGenes) -> None:
    module = prepare_code(built.code("as_prefs"), "gene.wasm")
    assert {(i.module, i.name) for i in module.imports if i.module == "env"} == {
        ("env", "abort"), ("env", "trace"), ("env", "seed")}


def test_an_assemblyscript_abort_fails_the_run_with_its_message(built: BuiltGenes,
                                                                store: MemoryStore) -> None:
    memory = store.for_gene(AGENT, gene_id("as_prefs"), "formatter")
    with pytest.raises(GeneFailed) as caught:
        run(built, "as_prefs", {"abort": True}, memory)
    assert re.fullmatch(r"as_prefs aborted: the gene was told to abort at \S*prefs\.ts:\d+:\d+",
                        caught.value.message), caught.value.message
    assert str(caught.value).startswith("GENE_FAILED: as_prefs aborted: ")


def test_assemblyscript_trace_goes_to_the_gene_log(built: BuiltGenes) -> None:
    logs: list[tuple[int, str]] = []
    run(built, "as_prefs", {"x": 1}, DeniedMemory(), logs=logs)
    assert logs == [(1, "trace: express 7, 1")]


def test_a_rust_wasi_express_gene_logs_stdout_and_reports_a_panic(built: BuiltGenes) -> None:
    logs: list[tuple[int, str]] = []
    assert run(built, "rust_prefs", {}, DeniedMemory(), logs=logs) == {"saved": {"result": -2}}
    assert (1, "rust gene got 2 bytes") in logs
    with pytest.raises(GeneFailed) as caught:
        run(built, "rust_prefs", {"panic": True}, DeniedMemory())
    assert "trapped: wasm trap" in caught.value.message
    assert "stderr: " in caught.value.message
    assert "panicked at 'the gene was told to panic'" in caught.value.message


def test_a_c_reactor_is_initialized_and_its_printf_is_logged(built: BuiltGenes) -> None:
    logs: list[tuple[int, str]] = []
    out = run(built, "c_prefs", {}, DeniedMemory(), logs=logs)
    assert out == {"saved": {"result": -2}, "initialized": "ok"}
    assert logs == [(1, "c gene got 2 bytes")]


# -- WASI command genes -------------------------------------------------------------------

ECHO_INPUTS = [{"a": [1, 2.5, None, True], "ü": "✓ \u2028"}, "just a string", 0, [],
               {"big": "x" * 200_000}]


@pytest.mark.parametrize("name", ["rust_echo", "c_echo"])
@pytest.mark.parametrize("input", ECHO_INPUTS, ids=["object", "string", "zero", "empty",
                                                    "big"])
def test_a_wasi_command_gene_echoes_its_input(built: BuiltGenes, name: str,
                                              input: Any) -> None:
    logs: list[tuple[int, str]] = []
    assert run(built, name, input, DeniedMemory(), logs=logs) == input
    language = name.split("_")[0]
    assert any(line.startswith(f"{language} echo read ") for _, line in logs), logs


def test_a_command_gene_that_never_reads_stdin_works(built: BuiltGenes) -> None:
    assert run(built, "c_quiet", {"x": "y" * 100_000}, DeniedMemory()) == {"ignored": "stdin"}


def test_a_non_zero_exit_fails_with_the_code_and_the_stderr_tail(built: BuiltGenes) -> None:
    logs: list[tuple[int, str]] = []
    with pytest.raises(GeneFailed) as caught:
        run(built, "c_fails", {}, DeniedMemory(), logs=logs)
    assert caught.value.message == (
        "c_fails exited with code 3; stderr: something broke | exiting with 3")
    assert logs == [(1, "something broke"), (1, "exiting with 3")]


def test_a_command_gene_sees_no_files_no_environment_and_only_its_name(
        built: BuiltGenes) -> None:
    out = run(built, "c_probes", {}, DeniedMemory())
    assert out == {"read": False, "write": False, "env": 0, "argc": 1, "argv0": "c_probes",
                   "cwd": True}


def test_a_command_gene_that_loops_forever_is_stopped(built: BuiltGenes) -> None:
    with pytest.raises(GeneFailed, match=r"c_loops ran past its deadline of 0.5 s"):
        run(built, "c_loops", {}, DeniedMemory(), deadline_s=0.5, fuel=10**15)
    with pytest.raises(GeneFailed, match=r"c_loops ran out of fuel \(1000000 units\)"):
        run(built, "c_loops", {}, DeniedMemory(), fuel=1_000_000)


def test_a_command_gene_flooding_stdout_fails_with_a_clear_message(built: BuiltGenes) -> None:
    limits = Limits(deadline_s=5.0, fuel=10**15, max_output_bytes=1 << 20)
    module = prepare_code(built.code("c_floods"), "gene.wasm")
    with GeneInstance(module, DeniedMemory(), limits, name="c_floods") as instance, \
            pytest.raises(GeneFailed) as caught:
        instance.start()
    assert caught.value.message == ("c_floods wrote more than 1048576 bytes to stdout (the "
                                    "most a WASI command gene's output may be)")
    assert instance.stdout.size <= 1 << 20
    # With the default cap too (16 MiB), through the ordinary entry point.
    with pytest.raises(GeneFailed, match="wrote more than 16777216 bytes to stdout"):
        run(built, "c_floods", {}, DeniedMemory(), deadline_s=5.0, fuel=10**15)


def test_a_command_gene_that_sleeps_does_not_hold_the_host(built: BuiltGenes) -> None:
    """WASI sleep (poll_oneoff) is refused: wasmtime's would block this thread
    past any deadline.  The gene goes on at once (its sleep() returns early)."""
    code = built.code("c_sleeps")  # built (or skipped) here: a skip in the thread would fail
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(
        run_wasm_code(code, "gene.wasm", {}, DeniedMemory(), name="c_sleeps",
                      deadline_s=2.0)), daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "the gene's sleep held the host thread"
    assert result == [{"slept": True}]


def test_command_genes_use_the_disk_cache(built: BuiltGenes, tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    code = built.code("c_echo")
    assert run_wasm_code(code, "gene.wasm", {"n": 1}, DeniedMemory(), name="e",
                         cache_dir=cache_dir) == {"n": 1}
    assert len(list(cache_dir.glob("*.cwasm"))) == 1
    wasm_cache.clear_memory_cache()
    before = wasm_cache.stats.disk_hits, wasm_cache.stats.compiled
    assert run_wasm_code(code, "gene.wasm", {"n": 2}, DeniedMemory(), name="e",
                         cache_dir=cache_dir) == {"n": 2}
    assert (wasm_cache.stats.disk_hits, wasm_cache.stats.compiled) == (before[0] + 1,
                                                                       before[1])


def test_genes_of_three_toolchains_run_in_parallel(built: BuiltGenes,
                                                   store: MemoryStore) -> None:
    """Express and command genes of every toolchain at once in threads (as a
    ``par`` composition runs them): each gets its own answer."""
    names = [*PREFS_GENES, "rust_echo", "c_echo"]
    codes = {name: built.code(name) for name in names}
    results: dict[str, Any] = {}
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            memory = store.for_gene(AGENT, gene_id(name), "formatter")
            results[name] = run_wasm_code(codes[name], "gene.wasm", {"who": name}, memory,
                                          name=name)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in names * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results["rust_echo"] == {"who": "rust_echo"}
    assert results["c_echo"] == {"who": "c_echo"}
    assert all(results[name]["saved"] is None for name in PREFS_GENES)
