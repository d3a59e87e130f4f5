"""Measure what the on-disk module cache saves (not a test; run by hand).

    python tests/wasm/measure_cache.py

Each measurement runs in a fresh Python process, so nothing is cached in
memory: "compile" is a first run (no cache file yet), "disk" a second run
that deserializes the cached module.  Timed is load_module() alone and a
whole run_wasm_gene() call; medians of several rounds.  The figures go into
docs/wasm.md.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GENES = Path(__file__).parent / "genes"

CHILD = r"""
import json, sys, time
from pathlib import Path
from rotifer.genes.wasm.compile import read_wasm
from rotifer.genes.wasm.cache import load_module, stats
from rotifer.genes.wasm.engine import get_engine
from rotifer.genes.wasm import run_wasm_gene
from rotifer.memory import DeniedMemory
path, cache_dir = Path(sys.argv[1]), Path(sys.argv[2])
get_engine()
wasm = read_wasm(path)
t0 = time.perf_counter(); load_module(wasm, cache_dir); t1 = time.perf_counter()
from rotifer.genes.wasm import cache
cache.clear_memory_cache()
t2 = time.perf_counter()
try:
    run_wasm_gene(path, {}, DeniedMemory(), cache_dir=cache_dir)
except Exception:
    pass
t3 = time.perf_counter()
print(json.dumps({"load_ms": (t1 - t0) * 1e3, "run_ms": (t3 - t2) * 1e3,
                  "compiled": stats.compiled}))
"""


def big_gene(folder: Path, functions: int = 2000) -> Path:
    """A module with many small functions: compile time grows with code size."""
    body = "\n".join(
        f'(func $f{i} (param i32) (result i32) (i32.add (i32.mul (local.get 0) (i32.const {i})) '
        f'(i32.const {i % 7})))' for i in range(functions))
    calls = "".join(f"(drop (call $f{i} (local.get 0)))" for i in range(0, functions, 50))
    text = (f'(module (memory (export "memory") 1) (data (i32.const 16) "{{}}\\00") {body} '
            f'(func (export "express") (param i32 i32) (result i32) {calls} (i32.const 16)))')
    path = folder / "big" / "gene.wat"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def child(path: Path, cache_dir: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(cache_dir)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def measure(path: Path, rounds: int = 5) -> dict[str, float]:
    cold_load, cold_run, warm_load, warm_run = [], [], [], []
    for _ in range(rounds):
        cache_dir = Path(tempfile.mkdtemp())
        try:
            first = child(path, cache_dir)
            second = child(path, cache_dir)
        finally:
            shutil.rmtree(cache_dir)
        assert first["compiled"] == 1 and second["compiled"] == 0, (first, second)
        cold_load.append(first["load_ms"])
        warm_load.append(second["load_ms"])
        cold_run.append(first["run_ms"])
        warm_run.append(second["run_ms"])
    return {"compile_ms": statistics.median(cold_load), "disk_ms": statistics.median(warm_load),
            "run_ms": statistics.median(warm_run)}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        targets = {"prefs.wat": GENES / "prefs.wat", "2000 functions": big_gene(Path(tmp))}
        for name, path in targets.items():
            m = measure(path)
            print(f"{name:>16}: compile {m['compile_ms']:8.2f} ms   load from disk cache "
                  f"{m['disk_ms']:6.2f} ms   ({m['compile_ms'] / m['disk_ms']:.0f}x)   "
                  f"whole warm run {m['run_ms']:.2f} ms")


if __name__ == "__main__":
    main()
