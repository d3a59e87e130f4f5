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

import hashlib
import os
import shutil
import subprocess
import tempfile
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


def build_example(toolchain: str, cache: Path) -> Path:
    """A copy of the example built with ``toolchain``: a gene folder holding
    ``gene.wasm``.  Built once per source content under ``cache``; parallel
    workers may both build, and the first to finish wins the rename."""
    name = EXAMPLE_OF[toolchain]
    source = EXAMPLES / name
    done = cache / f"{name}-{_digest(source)}"
    if (done / "gene.wasm").is_file():
        return done
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache)) / name
    shutil.copytree(source, work, ignore=shutil.ignore_patterns("gene.wasm"))
    result = run_build(work, work / "gene.wasm")
    if result.returncode == MISSING_TOOLCHAIN:
        missing(f"cannot build {name}: {result.stderr.strip()}")
    assert result.returncode == 0, (name, result.stdout, result.stderr)
    try:
        work.rename(done)
    except OSError:  # another worker got there first: use theirs
        assert (done / "gene.wasm").is_file()
    return done


def install(built_folder: Path, root: Path) -> str:
    """Copy a built example into the project at ``root``; the gene's name."""
    shutil.copytree(built_folder, root / "genes" / built_folder.name.rsplit("-", 1)[0])
    return built_folder.name.rsplit("-", 1)[0]
