"""A TypeScript gene through the real ``rotifer`` command (in-process): wrap, agent run
(remembers), run alone (refused), test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import add_gene, init_project, ok_process, refused_process, wrap

SEED = Path(__file__).parents[1] / "node" / "genes" / "seed_formatter.ts"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def test_a_typescript_gene_through_the_cli(tmp_path: Path) -> None:
    proj = init_project(tmp_path / "proj")
    folder = add_gene(proj, "tsfmt", SEED.read_text(), file="index.ts")
    gene_id = wrap(proj, "tsfmt")
    ok_process(proj, "agent", "create", "a", "--genes", "tsfmt")
    assert json.loads(ok_process(proj, "agent", "run", "a", "--input", '{"code": "x", "indent": 3}')
                      )["indent"] == 3
    assert json.loads(ok_process(proj, "agent", "run", "a", "--input", '{"code": "x"}'))["indent"] == 3
    listed = json.loads(ok_process(proj, "agent", "memory", "list", "a", "--json"))
    assert [(e["key"], e["createdBy"]) for e in listed["entries"]] == [
        ("formatter/indent", gene_id)]
    refused_process(proj, "MEMORY_ACCESS_DENIED", "run", "tsfmt", "--input", '{"code": "x"}')
    (folder / "tests.json").write_text(json.dumps([
        {"input": {"code": "x", "indent": 1}}, {"input": {"code": "x"}, "expect":
                                                 {"formatted": "x", "indent": 1}}]))
    assert "2 passed, 0 failed" in ok_process(proj, "test", "tsfmt")
