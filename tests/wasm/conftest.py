"""Fixtures for the WASM tests: a real SQLite store in a temp dir, the WAT
genes in ``genes/``, a harness that calls the host functions directly, and
``built``: genes from ``sources/`` built with the real toolchains
(``toolchains.py``) on first use."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from rotifer.genes.wasm import GeneInstance, Limits, prepare, rawcall
from rotifer.genes.wasm.engine import wasmtime_version
from rotifer.memory import GeneMemoryAccess, MemoryStore
from tests.audit_reading import audit_lines as audit_lines

GENES = Path(__file__).parent / "genes"
AGENT = "agent"

#: Limits for long-lived harness instances: the budget must never be what a
#: test sees, unless the test says so.
ROOMY = Limits(deadline_s=3600.0, fuel=10**15, max_host_calls=10**9)


def gene(name: str) -> Path:
    return GENES / f"{name}.wat"


def gene_id(name: str) -> str:
    return "v2:" + hashlib.sha256(name.encode()).hexdigest()


@pytest.fixture
def rotifer_dir(tmp_path: Path) -> Path:
    return tmp_path / ".rotifer"


@pytest.fixture
def store(rotifer_dir: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(rotifer_dir) as s:
        s.create_agent(AGENT)
        yield s


@pytest.fixture(scope="session")
def harness_module() -> wasmtime.Module:
    return prepare(gene("harness"))


REQ = 0x1000
OUT = 0x80000
PAGES = 16  # 1 MiB: room for a request up to OUT and an out buffer after it
SENTINEL = 0xAA


class Harness:
    """Drives the host functions through harness.wat's forwarding exports."""

    def __init__(self, instance: GeneInstance) -> None:
        self.instance = instance
        self.guest = instance.guest
        assert instance.call("grow", PAGES - 1) == 1

    def call(self, op: str, request: Any, cap: int = 4096, *, out: int = OUT,
             req: int = REQ) -> int:
        """Write ``request`` (bytes, or JSON) at ``req``, fill out with a
        sentinel, call ``op`` (read/write/query/delete) and return its result."""
        raw = request if isinstance(request, bytes) else json.dumps(request).encode()
        self.guest.write(req, raw)
        if out >= 0 and out + cap + 16 <= self.guest.size():
            self.guest.write(out, bytes([SENTINEL]) * (cap + 16))
        return int(self.instance.call(f"call_{op}", req, len(raw), out, cap))

    def raw(self, op: str, req_ptr: int, req_len: int, out_ptr: int, out_cap: int) -> int:
        return int(self.instance.call(f"call_{op}", req_ptr, req_len, out_ptr, out_cap))

    def response(self, result: int, *, out: int = OUT) -> Any:
        assert result >= 0, result
        return json.loads(self.guest.read(out, result))

    def body(self, *, out: int = OUT) -> Any:
        """The NUL-terminated error body the host left at out, or None."""
        raw = self.guest.read_c_string(out, 1 << 20)
        assert raw is not None
        if raw.startswith(bytes([SENTINEL])):
            return None
        return json.loads(raw)

    def untouched(self, cap: int, *, out: int = OUT) -> bool:
        return self.guest.read(out, cap + 16) == bytes([SENTINEL]) * (cap + 16)


def open_harness(module: wasmtime.Module, memory: GeneMemoryAccess,
                 limits: Limits = ROOMY) -> GeneInstance:
    return GeneInstance(module, memory, limits, name="harness")


@pytest.fixture(params=["c-callback", "define_func"])
def host_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the memory host functions are defined: through wasmtime's C callback
    (``rawcall``, wherever this wasmtime-py allows it) or, as the fallback, with
    wasmtime-py's ``define_func``.  Every harness test runs both ways."""
    if request.param == "define_func":
        monkeypatch.setattr(rawcall, "_define_unchecked", lambda: None)
    elif not rawcall.available():
        # Another wasmtime-py than constraints.txt pins: the host falls back to
        # define_func (said once on the log), which the other param tests.
        pytest.skip(f"wasmtime-py {wasmtime_version()} is not one of rawcall.TESTED_MAJORS")
    return str(request.param)


@pytest.fixture
def harness(harness_module: wasmtime.Module, store: MemoryStore,
            host_path: str) -> Iterator[Harness]:
    with open_harness(harness_module, store.for_gene(AGENT, gene_id("harness"), "probe")) as inst:
        yield Harness(inst)


# -- genes built from tests/wasm/sources with the real toolchains ----------------------

SOURCES = Path(__file__).parent / "sources"

#: Misbehaving WASI command genes of sources/commands.c, by -DMODE.
COMMAND_MODES = {"quiet": 1, "fails": 2, "loops": 3, "floods": 4, "sleeps": 5, "probes": 6}


def _recipes() -> dict[str, Callable[[Path], Path]]:
    from .toolchains import build_as, build_c, build_rust

    recipes: dict[str, Callable[[Path], Path]] = {
        "as_prefs": lambda out: build_as(SOURCES / "prefs.ts", out, name="as_prefs"),
        "rust_prefs": lambda out: build_rust(SOURCES / "prefs_wasi.rs", out, name="rust_prefs"),
        "c_prefs": lambda out: build_c(SOURCES / "prefs_wasi.c", out, name="c_prefs"),
        "rust_echo": lambda out: build_rust(SOURCES / "echo.rs", out, crate_type="bin",
                                            name="rust_echo"),
        "c_echo": lambda out: build_c(SOURCES / "echo.c", out, command=True, name="c_echo"),
    }
    for mode, number in COMMAND_MODES.items():
        recipes[f"c_{mode}"] = functools.partial(
            lambda out, mode, number: build_c(SOURCES / "commands.c", out, command=True,
                                              flags=[f"-DMODE={number}"], name=f"c_{mode}"),
            mode=mode, number=number)
    return recipes


class BuiltGenes:
    """Test genes built on first use (once per test session and worker).

    ``built["as_prefs"]`` is the path of the ``.wasm``; a missing toolchain
    skips the asking test (fails it under CI), see ``toolchains.py``.
    """

    def __init__(self, out: Path) -> None:
        self.out = out
        self.recipes = _recipes()
        self.paths: dict[str, Path] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self.paths:
            self.paths[name] = self.recipes[name](self.out)
        return self.paths[name]

    def code(self, name: str) -> bytes:
        return self[name].read_bytes()


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltGenes:
    return BuiltGenes(tmp_path_factory.mktemp("built-genes"))
