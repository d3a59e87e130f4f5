"""``agent show`` and ``agent list`` flag a gene changed since it was wrapped,
as the console does, and ``agent list`` says WASM sandbox for an agent whose
genes are all WASM (issue 36, 4 and 8)."""

from __future__ import annotations

import json
from pathlib import Path

from .helpers import add_gene, add_wat_gene, init_project, ok, wrap

GENE = "def express(input, ctx):\n    return input\n"


def test_a_gene_edited_after_wrap_is_flagged(tmp_path: Path) -> None:
    root = init_project(tmp_path / "p")
    add_gene(root, "echo", GENE)
    wrap(root, "echo")
    ok(root, "agent", "create", "bot", "--genes", "echo")
    assert "changed" not in ok(root, "agent", "show", "bot")
    listed = ok(root, "agent", "list")
    assert "echo*" not in listed and "changed since" not in listed
    assert json.loads(ok(root, "agent", "list", "--json"))[0]["changedGenes"] == []

    (root / "genes" / "echo" / "gene.py").write_text(GENE + "# edited\n")
    shown = ok(root, "agent", "show", "bot")
    assert "Gene 'echo' changed since it was last wrapped" in shown
    assert "`rotifer wrap echo` again" in shown
    details = json.loads(ok(root, "agent", "show", "bot", "--json"))["geneDetails"]
    assert details[0]["changedSinceWrapped"] is True
    listed = ok(root, "agent", "list")
    assert "echo*" in listed and "changed since it was wrapped" in listed
    assert json.loads(ok(root, "agent", "list", "--json"))[0]["changedGenes"] == ["echo"]
    # wrapped again: no flag
    wrap(root, "echo")
    assert "changed" not in ok(root, "agent", "show", "bot")
    assert "echo*" not in ok(root, "agent", "list")


def test_list_says_wasm_sandbox_for_a_wasm_only_agent(tmp_path: Path) -> None:
    root = init_project(tmp_path / "p")
    add_wat_gene(root, "prefs", "prefs")
    ok(root, "compile", "prefs")
    add_gene(root, "echo", GENE)
    wrap(root, "echo")
    ok(root, "agent", "create", "w", "--genes", "prefs")
    ok(root, "agent", "create", "py", "--genes", "echo")
    ok(root, "agent", "create", "t", "--genes", "echo", "--trust", "echo")
    rows = {line.split()[0]: line for line in ok(root, "agent", "list").splitlines()[1:]}
    assert rows["w"].endswith("WASM sandbox"), rows
    assert rows["py"].endswith("contained"), rows
    assert "trusted: echo" in rows["t"]
    assert "WASM sandbox" in ok(root, "agent", "show", "w")
