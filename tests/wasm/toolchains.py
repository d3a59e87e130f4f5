"""Finding the real WASM toolchains and building test genes with them.

Tests build their genes from source into a temporary directory (built
``.wasm`` files are never committed).  When a toolchain is missing, a test
that needs it is skipped -- except under ``CI`` (any non-empty value), where
it fails, because ``.ci/run`` installs every toolchain (the same rule as for
PostgreSQL in ``tests/pg_plugin.py``).

How to use it (from any test module under ``tests/``)::

    from tests.wasm.toolchains import build_as, build_c, build_rust

    def test_something(tmp_path: Path) -> None:
        wasm = build_rust(SRC / "gene.rs", tmp_path, target="wasm32-wasi",
                          crate_type="cdylib")      # an express gene
        wasm = build_c(SRC / "gene.c", tmp_path, exports=["express", "alloc"])
        wasm = build_as(SRC / "index.ts", tmp_path)  # default asc options
        command = build_c(SRC / "echo.c", tmp_path, command=True)

Each ``build_*`` returns the path of the ``.wasm`` it wrote (named after the
source unless ``name=`` is given), skips (or fails under CI) when the
toolchain is missing, and fails the test with the compiler's output when the
source does not build.  ``find_rustc(target)``, ``find_clang()`` and
``find_asc()`` only look (they return None when missing); ``require(tool,
found)`` turns None into the skip/fail.  A session-scoped fixture can build
once with ``tmp_path_factory.mktemp(...)``.

The toolchains (Debian package names, as ``.ci/run`` installs them):

* Rust: ``rustc`` with ``libstd-rust-dev-wasm32`` (targets ``wasm32-wasi``
  and ``wasm32-unknown-unknown``).  A rustup ``rustc`` earlier on PATH often
  has no wasm targets, so every candidate is asked for its sysroot and the
  first with the target is used (``/usr/bin/rustc`` is always tried).
* C: ``clang`` and ``lld`` (``wasm-ld``), ``wasi-libc`` (headers in
  ``/usr/include/wasm32-wasi``, libraries in ``/usr/lib/wasm32-wasi``, used
  with ``--sysroot=/usr``) and ``libclang-rt-<version>-dev-wasm32`` (the
  compiler-rt builtins wasm-ld links).  Freestanding builds need only clang
  and lld.
* AssemblyScript: ``node_modules/.bin/asc`` (``assemblyscript`` pinned in
  ``package-lock.json``, installed by ``make node-deps``).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 300


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def require(tool: str, found: Path | None) -> Path:
    """``found``, or skip the test (fail it under CI) saying what is missing."""
    if found is not None:
        return found
    reason = f"{tool} is not installed"
    if in_ci():
        pytest.fail(reason + " (CI must build the WASM test genes; .ci/run installs it)")
    pytest.skip(reason)


def _run(cmd: Sequence[str | Path], what: str, cwd: Path | None = None) -> None:
    try:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT_S, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"building {what} failed: {exc}")
    if proc.returncode != 0:
        pytest.fail(f"building {what} failed ({' '.join(map(str, cmd))}):\n"
                    f"{proc.stdout}\n{proc.stderr}")


# -- finding ------------------------------------------------------------------------------


@functools.cache
def find_rustc(target: str = "wasm32-wasi") -> Path | None:
    """A rustc whose sysroot has the standard library for ``target``."""
    candidates: list[str] = []
    on_path = shutil.which("rustc")
    for candidate in ("/usr/bin/rustc", on_path):
        if candidate and candidate not in candidates and os.access(candidate, os.X_OK):
            candidates.append(candidate)
    for rustc in candidates:
        try:
            sysroot = subprocess.run([rustc, "--print", "sysroot"], capture_output=True,
                                     text=True, timeout=60, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if (Path(sysroot) / "lib" / "rustlib" / target / "lib").is_dir():
            return Path(rustc)
    return None


@functools.cache
def find_clang() -> Path | None:
    """clang with wasm-ld next to it (lld); versioned names are tried too."""
    if shutil.which("wasm-ld") is None and not any(
            shutil.which(f"wasm-ld-{v}") for v in range(20, 13, -1)):
        return None
    for name in ("clang", *(f"clang-{v}" for v in range(20, 13, -1))):
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


def _resource_dir(clang: Path) -> Path | None:
    try:
        out = subprocess.run([str(clang), "-print-resource-dir"], capture_output=True,
                             text=True, timeout=60, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out) if out else None


@functools.cache
def find_wasi_clang() -> Path | None:
    """clang that can link against wasi-libc: the sysroot's libc and the
    wasm32 compiler-rt builtins are both installed."""
    clang = find_clang()
    if clang is None or not Path("/usr/lib/wasm32-wasi/libc.a").is_file():
        return None
    resource = _resource_dir(clang)
    if resource is None or not (resource / "lib" / "wasi"
                                / "libclang_rt.builtins-wasm32.a").is_file():
        return None
    return clang


@functools.cache
def find_asc() -> Path | None:
    asc = ROOT / "node_modules" / ".bin" / "asc"
    return asc if asc.exists() and shutil.which("node") else None


# -- building -----------------------------------------------------------------------------


def build_rust(src: Path, out_dir: Path, *, target: str = "wasm32-wasi",
               crate_type: str = "cdylib", name: str | None = None) -> Path:
    """``rustc --target TARGET --crate-type CRATE_TYPE -O`` (no crates); a
    ``bin`` crate for ``wasm32-wasi`` is a WASI command gene."""
    rustc = require(f"rustc with the {target} target (libstd-rust-dev-wasm32)",
                    find_rustc(target))
    out = out_dir / f"{name or src.stem}.wasm"
    _run([rustc, "--target", target, "--crate-type", crate_type, "-O", "-C",
          "strip=debuginfo", "--edition", "2021", "-o", out, src], f"{src.name} with rustc")
    return out


def build_c(src: Path, out_dir: Path, *, command: bool = False, wasi: bool = True,
            exports: Sequence[str] = ("express", "alloc"), flags: Sequence[str] = (),
            name: str | None = None) -> Path:
    """clang for wasm32: with wasi-libc (``wasi=True``) as a reactor exporting
    ``exports`` (an express gene) or, with ``command=True``, as a WASI command
    (``main`` becomes ``_start``); freestanding with ``wasi=False``."""
    if wasi:
        clang = require("clang with wasi-libc and libclang-rt-dev-wasm32", find_wasi_clang())
        base = ["--target=wasm32-wasi", "--sysroot=/usr", "-O2"]
        base += [] if command else ["-mexec-model=reactor"]
    else:
        clang = require("clang and lld (wasm-ld)", find_clang())
        base = ["--target=wasm32", "-O2", "-nostdlib", "-Wl,--no-entry"]
    if not command:
        base += [f"-Wl,--export={e}" for e in exports]
    out = out_dir / f"{name or src.stem}.wasm"
    _run([clang, *base, *flags, "-o", out, src], f"{src.name} with clang")
    return out


def build_as(src: Path, out_dir: Path, *, flags: Sequence[str] = (),
             name: str | None = None) -> Path:
    """``asc SRC -o OUT`` with asc's default options (plus ``flags``)."""
    asc = require("AssemblyScript (make node-deps)", find_asc())
    out = out_dir / f"{name or src.stem}.wasm"
    _run([asc, src, "-o", out, *flags], f"{src.name} with asc", cwd=ROOT)
    return out
