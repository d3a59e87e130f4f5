"""No silent exposure (issue 30, finding 11).

A contained gene may read its runtime's folders.  A project that lies under
one of them (here: inside the virtualenv's prefix for a Python gene, inside
the ``node_modules`` folder rotifer uses for a Node gene) would have its
``.rotifer/`` and every gene's folder readable by every contained gene.  Such
a run is refused before the gene starts, naming the path; with the check
switched off (in this process) the same contained gene reads another gene's
code, which shows the refusal is what stands in the way; trusted it reads it
anyway.  (The store itself is also private: ``.rotifer/`` is 0700, which binds a
gene running as ``nobody`` when rotifer runs as root.)
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotifer.genes.contain import python_host
from tests.cli.helpers import (
    add_gene,
    init_project,
    last_line,
    ok,
    ok_process,
    refused_process,
    wrap,
)

SECRET = "# TOP SECRET 42\n"
PY_READER = ("def express(input, ctx):\n"
             "    with open(input + '/genes/other/gene.py', 'rb') as f:\n"
             "        return f.read(15).decode()\n")
NODE_READER = ("exports.express = (root) => require('fs').readFileSync(root + "
               "'/genes/other/gene.py').subarray(0, 15).toString();\n")


@pytest.fixture
def in_the_venv() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="rotifer-exposed-", dir=sys.prefix))
    base.chmod(0o711)  # as root, genes run as nobody, who must pass through it
    try:
        yield base
    finally:
        shutil.rmtree(base)


def make(base: Path, reader: str, file: str) -> Path:
    root = init_project(base / "proj")
    add_gene(root, "reader", reader, file=file)
    add_gene(root, "other", SECRET + "def express(input, ctx):\n    return {}\n",
             file="gene.py")
    wrap(root, "reader")
    ok_process(root, "agent", "create", "t", "--genes", "reader", "--trust", "reader")
    return root


def test_a_project_inside_the_python_prefix_is_refused(
        in_the_venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make(in_the_venv, PY_READER, "gene.py")
    value = json.dumps(str(root))
    # agent create loads the gene as its run would: refused there already.
    line = last_line(refused_process(root, "GENE_UNAVAILABLE", "agent", "create", "a", "--genes",
                                     "reader"))
    assert f"the project ({root.resolve()}) lies under" in line, line
    assert json.loads(ok_process(root, "agent", "run", "t", "--input", value)) == SECRET[:15]
    monkeypatch.setattr(python_host, "refuse_exposed", lambda *args: None)
    ok(root, "agent", "create", "a", "--genes", "reader")  # in process: the patch applies
    line = last_line(refused_process(root, "GENE_UNAVAILABLE", "agent", "run", "a", "--input", value))
    assert f"the project ({root.resolve()}) lies under" in line, line
    # With the check switched off, the contained gene reads another gene's code.
    assert json.loads(ok(root, "agent", "run", "a", "--input", value)) == SECRET[:15]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_project_inside_the_node_modules_folder_is_refused(tmp_path: Path) -> None:
    modules = tmp_path / "node_modules"
    modules.mkdir()
    env = {"ROTIFER_NODE_MODULES": str(modules)}
    root = make(modules, NODE_READER, "index.js")
    value = json.dumps(str(root))
    line = last_line(refused_process(root, "GENE_UNAVAILABLE", "agent", "create", "a", "--genes",
                                     "reader", env=env))
    assert f"lies under {modules.resolve()}" in line, line
    assert json.loads(ok_process(root, "agent", "run", "t", "--input", value,
                                 env=env)) == SECRET[:15]
    # The same project elsewhere runs contained, and the gene cannot read the store.
    moved = tmp_path / "elsewhere"
    shutil.move(str(root), moved)
    ok_process(moved, "agent", "create", "a", "--genes", "reader", env=env)
    assert "GENE_FAILED" in last_line(refused_process(moved, "GENE_FAILED", "agent", "run", "a",
                                                      "--input", json.dumps(str(moved)), env=env))
