"""The AssemblyScript example's build.sh, copied into another project's genes/
(as the README says to), finds the asc of the checkout that rotifer runs from
(issue 36): the copy is nowhere under this checkout's node_modules."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ASC = ROOT / "node_modules" / ".bin" / "asc"


@pytest.mark.skipif(not ASC.exists() or shutil.which("node") is None,
                    reason="needs make node-deps (assemblyscript) and Node.js")
def test_assemblyscript_build_finds_the_checkouts_asc(tmp_path: Path) -> None:
    gene = tmp_path / "elsewhere" / "genes" / "formatter-as"
    shutil.copytree(ROOT / "examples" / "wasm" / "formatter-as", gene)
    # only rotifer's own bin folder and the system's: no asc on PATH
    path = os.pathsep.join([str(Path(sys.executable).parent), str(Path(shutil.which("node")
                                                                        or "node").parent),
                            "/usr/bin", "/bin"])
    env = {k: v for k, v in os.environ.items() if k not in ("ASC", "ROTIFER_NODE_MODULES")}
    env["PATH"] = path
    assert shutil.which("asc", path=path) is None
    done = subprocess.run(["sh", str(gene / "build.sh")], cwd=gene, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert (gene / "gene.wasm").read_bytes().startswith(b"\0asm")
