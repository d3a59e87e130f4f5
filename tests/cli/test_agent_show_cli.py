"""``rotifer agent show NAME``: the spec a deployer reads before a run -- each
gene's language, domain and version, and how it runs (contained with its TCP
ports and memory limit, TRUSTED, or the WASM sandbox) -- plus the memory.

In-process (``CliRunner``): only stdout, stderr and the status are read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.genes.helpers import FORMATTER

from .helpers import add_gene, add_wat_gene, init_project, ok, refused, run, wrap

#: A domain and a version that would move the cursor and recolour the screen.
EVIL_DOMAIN = "evil\x1b[2J\rdom\u202e"
EVIL_DOMAIN_SHOWN = "evil\\x1b[2J\\rdom\\u202e"
EVIL_VERSION = "1.0\n\x9b31m"
EVIL_VERSION_SHOWN = "1.0\\n\\x9b31m"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """Genes ``fmt`` and ``legacy`` (Python) and ``counter`` (WASM), wrapped."""
    root = init_project(tmp_path / "proj")
    add_gene(root, "fmt", FORMATTER)
    add_gene(root, "legacy", FORMATTER)
    add_wat_gene(root, "counter", "prefs")
    for name in ("fmt", "legacy"):
        wrap(root, name)
    ok(root, "compile", "counter")
    return root


def rows(stdout: str) -> dict[str, list[str]]:
    """The genes table: each gene's cells (split on two or more blanks)."""
    table = stdout.split("Genes:\n", 1)[1].splitlines()
    assert table[0].split() == ["GENE", "LANGUAGE", "DOMAIN", "VERSION", "RUNS", "TCP",
                                "PORTS", "GENE", "MEMORY"], table[0]
    cells = [[c for c in line.strip().split("  ") if c.strip()] for line in table[1:]
             if line.startswith("  ")]
    return {c[0]: [x.strip() for x in c[1:]] for c in cells}


def test_trust_tcp_and_gene_memory_are_shown(proj: Path) -> None:
    ok(proj, "agent", "create", "a", "--genes", "fmt,legacy,counter", "--trust", "legacy",
       "--allow-tcp", "fmt:5432", "--allow-tcp", "fmt:443", "--gene-memory", "256")
    ok(proj, "agent", "run", "a", "--input", json.dumps({"code": "x", "indent": 3}))
    out = ok(proj, "agent", "show", "a")
    assert out.startswith("Agent:        a\n"), out
    assert "Composition:  seq\n" in out
    assert "Memory:       17 B of 10 MB (0.0%), 1 entry (PREFERENCE 1)\n" in out, out
    assert "Data policy:  no retention limit, anonymization not supported" in out
    assert rows(out) == {
        "fmt": ["python", "formatter", "1.0.0", "contained", "443,5432", "256 MiB (--gene-memory)"],
        "legacy": ["python", "formatter", "1.0.0", "TRUSTED (uncontained)", "-", "-"],
        "counter": ["wasm", "formatter", "1.0.0", "WASM sandbox", "-", "-"]}
    assert "A TRUSTED gene runs uncontained" in out

    doc: dict[str, Any] = json.loads(ok(proj, "agent", "show", "a", "--json"))
    assert doc["genes"] == ["fmt", "legacy", "counter"] and doc["composition"] == "seq"
    assert doc["containment"] == {"trust": ["legacy"], "allowTcp": {"fmt": [443, 5432]},
                                  "geneMemoryMiB": 256}
    details = {d["name"]: d for d in doc["geneDetails"]}
    assert details["fmt"]["containment"] == {"runs": "contained", "allowTcp": [443, 5432],
                                             "memoryMiB": 256, "memoryIsDefault": False}
    assert details["legacy"]["containment"]["runs"] == "trusted"
    assert details["counter"]["kind"] == "wasm"
    assert details["counter"]["containment"]["runs"] == "wasm"
    assert details["fmt"]["v2Id"].startswith("v2:")
    memory = doc["memory"]
    assert (memory["usedBytes"], memory["quotaBytes"], memory["entries"]) == (17, 10 << 20, 1)
    assert memory["byCategory"]["PREFERENCE"] == {"entries": 1, "bytes": 17}


def test_the_default_gene_memory_is_named(proj: Path) -> None:
    ok(proj, "agent", "create", "plain", "--genes", "fmt")
    out = ok(proj, "agent", "show", "plain")
    assert rows(out) == {"fmt": ["python", "formatter", "1.0.0", "contained", "-",
                                 "1024 MiB (default)"]}
    assert "TRUSTED" not in out
    assert "0 B of 10 MB (0.0%), 0 entries\n" in out
    detail = json.loads(ok(proj, "agent", "show", "plain", "--json"))["geneDetails"][0]
    assert detail["containment"] == {"runs": "contained", "allowTcp": [], "memoryMiB": 1024,
                                     "memoryIsDefault": True}


@pytest.mark.parametrize("name, code", [("nope", "AGENT_NOT_FOUND"),
                                        ("bad/name", "INVALID_AGENT")])
def test_an_unknown_agent_is_refused(proj: Path, name: str, code: str) -> None:
    for extra in ((), ("--json",)):
        done = run(proj, "agent", "show", name, *extra)
        assert done.stdout == ""
        refused(proj, code, "agent", "show", name, *extra)


def test_hostile_phenotype_text_is_shown_escaped(proj: Path) -> None:
    add_gene(proj, "evil", FORMATTER, domain=EVIL_DOMAIN, version=EVIL_VERSION)
    wrap(proj, "evil")
    ok(proj, "agent", "create", "bot", "--genes", "evil")
    out = ok(proj, "agent", "show", "bot")
    for raw in ("\x1b", "\r", "\u202e", "\x9b"):
        assert raw not in out, repr(out)
    assert rows(out)["evil"][1:3] == [EVIL_DOMAIN_SHOWN, EVIL_VERSION_SHOWN], out
    detail = json.loads(ok(proj, "agent", "show", "bot", "--json"))["geneDetails"][0]
    assert (detail["domain"], detail["version"]) == (EVIL_DOMAIN, EVIL_VERSION)


def test_a_gene_removed_since_is_reported_and_the_rest_shown(proj: Path) -> None:
    ok(proj, "agent", "create", "a", "--genes", "fmt,legacy", "--trust", "legacy")
    shutil.rmtree(proj / "genes" / "legacy")
    done = run(proj, "agent", "show", "a")
    assert done.returncode == 1, done
    assert done.stderr.strip().startswith("GENE_NOT_FOUND: no gene 'legacy'"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert rows(done.stdout) == {
        "fmt": ["python", "formatter", "1.0.0", "contained", "-", "1024 MiB (default)"],
        "legacy": ["?", "?", "?", "TRUSTED (uncontained)", "-", "-"]}


def test_a_memory_that_is_gone_is_reported_and_the_spec_shown(proj: Path) -> None:
    ok(proj, "agent", "create", "a", "--genes", "fmt")
    doc = json.loads((proj / ".rotifer" / "agents" / "a.json").read_text())
    doc["memoryUrl"] = f"sqlite:{proj / 'elsewhere.db'}"
    (proj / ".rotifer" / "agents" / "a.json").write_text(json.dumps(doc))
    done = run(proj, "agent", "show", "a", "--json")
    assert done.returncode == 1, done
    assert done.stderr.startswith("MEMORY_STORAGE_ERROR: "), done.stderr
    shown = json.loads(done.stdout)
    assert shown["memory"] is None and shown["geneDetails"][0]["name"] == "fmt"
    text = run(proj, "agent", "show", "a")
    assert text.returncode == 1 and "Memory:" not in text.stdout and "fmt" in text.stdout
