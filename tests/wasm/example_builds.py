"""Building the toolchain examples of ``examples/wasm/`` from source, once per session.

Each example folder has a ``build.sh`` that finds its toolchain (rustc with the
wasm32 target, clang, asc) and writes ``gene.wasm``; it exits with status 3
when the toolchain is missing.  The tests run exactly those scripts, on a copy
of the folder in a temporary directory (nothing built is ever written into the
repository), so what a gene author runs is what is tested.

A missing toolchain skips the tests that need it -- except under ``CI``, where
it fails them, because ``.ci/run`` installs every toolchain (the rule of
``tests/wasm/toolchains.py``, which builds the other toolchain test genes).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.wasm.toolchains import in_ci

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "wasm"

#: Toolchain -> the example gene folder (and gene name) built with it.
EXAMPLE_OF = {"rust": "formatter-rust", "c": "formatter-c", "assemblyscript": "formatter-as"}

#: What build.sh exits with when its toolchain is missing.
MISSING_TOOLCHAIN = 3


def build_env() -> dict[str, str]:
    """The environment build.sh runs in: AssemblyScript's ``asc`` is the
    project's pinned one (``npm ci``), unless ASC already names one."""
    env = dict(os.environ)
    asc = REPO / "node_modules" / ".bin" / "asc"
    if "ASC" not in env and asc.exists():
        env["ASC"] = str(asc)
    return env


def missing(reason: str) -> None:
    if in_ci():
        pytest.fail(reason + " (CI must build the toolchain examples; .ci/run installs them)")
    pytest.skip(reason)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != "gene.wasm":
            h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def run_build(folder: Path, out: Path, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    """``sh folder/build.sh out``."""
    return subprocess.run(["sh", str(folder / "build.sh"), str(out)], env=env or build_env(),
                          capture_output=True, text=True, timeout=600, check=False)


def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for builds, shared by the pytest-xdist workers of one run."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / "wasm-builds"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (made if missing): one worker builds
    while the others wait for its result instead of building it again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(cache: Path, name: str, build: Callable[[Path], Path]) -> Path:
    """``build(out_dir)`` -> a file, run once per ``name`` under ``cache``."""
    done = cache / name
    with locked(cache / f"{name}.lock"):
        if not done.is_dir():
            work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache))
            build(work)
            work.rename(done)
    [built] = [p for p in done.iterdir() if p.suffix == ".wasm"]
    return built


def build_example(toolchain: str, cache: Path) -> Path:
    """A copy of the example built with ``toolchain`` by its own build.sh: a
    gene folder holding ``gene.wasm``, built once per source content."""
    name = EXAMPLE_OF[toolchain]
    source = EXAMPLES / name

    def build(work: Path) -> Path:
        folder = work / name
        shutil.copytree(source, folder, ignore=shutil.ignore_patterns("gene.wasm"))
        result = run_build(folder, folder / "gene.wasm")
        if result.returncode == MISSING_TOOLCHAIN:
            missing(f"cannot build {name}: {result.stderr.strip()}")
        assert result.returncode == 0, (name, result.stdout, result.stderr)
        return folder / "gene.wasm"

    done = cache / f"{name}-{_digest(source)}"
    with locked(cache / f"{done.name}.lock"):
        if not (done / "gene.wasm").is_file():
            work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache))
            build(work)
            (work / name).rename(done)
    return done


def install(built_folder: Path, root: Path) -> str:
    """Copy a built example into the project at ``root``; the gene's name."""
    shutil.copytree(built_folder, root / "genes" / built_folder.name.rsplit("-", 1)[0])
    return built_folder.name.rsplit("-", 1)[0]
