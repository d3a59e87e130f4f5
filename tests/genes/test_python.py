"""Python genes through rotifer.genes.execute.express, on a real SQLite store."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rotifer.genes.contain.sandbox import Grant
from rotifer.genes.errors import (
    GeneFailed,
    GeneRejected,
    GeneUnavailable,
    InvalidGene,
    InvalidInput,
)
from rotifer.genes.execute import express
from rotifer.genes.gene import Gene, load_gene, register_gene
from rotifer.genes.registry import Registry
from rotifer.memory import AgentMemoryError, DeniedMemory, MemoryStore

from .helpers import FORMATTER, write_gene, write_wat_gene

AGENT = "agent"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / ".rotifer") as s:
        s.create_agent(AGENT)
        yield s


def gene(tmp_path: Path, name: str, code: str, **extra: Any) -> Gene:
    write_gene(tmp_path / "genes", name, code, **extra)
    registry = Registry(tmp_path / ".rotifer")
    return register_gene(load_gene(tmp_path / "genes", name, registry), registry, via="wrap")


def test_formatter_uses_memory(tmp_path: Path, store: MemoryStore) -> None:
    g = gene(tmp_path, "fmt", FORMATTER)
    memory = store.for_gene(AGENT, g.v2_id, g.domain)
    assert express(g, {"code": "x", "indent": 4}, memory) == {"formatted": "    x", "indent": 4}
    assert express(g, {"code": "y"}, memory) == {"formatted": "    y", "indent": 4}
    [entry] = store.deployer(AGENT).list()
    assert entry.key == "formatter/indent" and entry.created_by == g.v2_id


def test_ctx_exposes_agent_gene_and_log(tmp_path: Path, store: MemoryStore) -> None:
    g = gene(tmp_path, "who", """
def express(input, ctx):
    ctx.log("hello", 1)
    return {"agent": ctx.agent, "name": ctx.gene.name, "domain": ctx.gene.domain,
            "id": ctx.gene.v2_id, "version": ctx.gene.version, "logs": ctx.logs}
""", domain="d")
    lines: list[tuple[str, str]] = []
    out = express(g, None, store.for_gene(AGENT, g.v2_id, g.domain), agent=AGENT,
                  log_sink=lambda name, line: lines.append((name, line)))
    assert out == {"agent": AGENT, "name": "who", "domain": "d", "id": g.v2_id,
                   "version": "1.0.0", "logs": ["hello 1"]}
    assert lines == [("who", "hello 1")]


def test_runs_the_bytes_that_were_hashed(tmp_path: Path, store: MemoryStore) -> None:
    g = gene(tmp_path, "g", "def express(input, ctx):\n    return 'old'\n")
    (g.code_file).write_text("def express(input, ctx):\n    return 'new'\n")
    assert express(g, None, DeniedMemory()) == "old"


def test_output_is_plain_json(tmp_path: Path) -> None:
    g = gene(tmp_path, "g", "def express(input, ctx):\n    return {'t': (1, 2)}\n")
    assert express(g, None, DeniedMemory()) == {"t": [1, 2]}


def test_module_state_is_fresh_each_run(tmp_path: Path) -> None:
    g = gene(tmp_path, "g", "N = []\ndef express(input, ctx):\n    N.append(1)\n"
                            "    return len(N)\n")
    assert [express(g, None, DeniedMemory()) for _ in range(2)] == [1, 1]


def test_memory_error_escapes_as_is(tmp_path: Path) -> None:
    g = gene(tmp_path, "g", "def express(input, ctx):\n    ctx.memory.read_memory('k')\n")
    with pytest.raises(AgentMemoryError) as info:
        express(g, None, DeniedMemory("alone"))
    assert str(info.value) == "MEMORY_ACCESS_DENIED: alone"


def test_rejection_by_output(tmp_path: Path) -> None:
    g = gene(tmp_path, "g", "def express(input, ctx):\n    return {'__rotifer_error': "
                            "{'code': 'INVALID_INPUT', 'message': 'no code'}}\n")
    with pytest.raises(GeneRejected) as info:
        express(g, None, DeniedMemory())
    assert str(info.value) == "INVALID_INPUT: no code"


def test_rejection_by_raising(tmp_path: Path) -> None:
    g = gene(tmp_path, "g", "from rotifer.genes.errors import GeneRejected\n"
                            "def express(input, ctx):\n"
                            "    raise GeneRejected('TOO_LONG', 'at most 3')\n")
    with pytest.raises(GeneRejected) as info:
        express(g, None, DeniedMemory())
    assert (info.value.code, info.value.message) == ("TOO_LONG", "at most 3")


def test_an_object_with_more_than_the_error_key_is_output(tmp_path: Path) -> None:
    g = gene(tmp_path, "g", "def express(input, ctx):\n    return {'__rotifer_error': 1, 'a': 2}\n")
    assert express(g, None, DeniedMemory()) == {"__rotifer_error": 1, "a": 2}


@pytest.mark.parametrize(("code", "message"), [
    ("def express(input, ctx):\n    raise ValueError('bad value')\n",
     "GENE_FAILED: gene 'g' crashed: ValueError: bad value"),
    ("def express(input, ctx):\n    return {}['k']\n", "gene 'g' crashed: KeyError: 'k'"),
    ("def express(input, ctx):\n    return express(input, ctx)\n", "RecursionError"),
    ("import sys\ndef express(input, ctx):\n    sys.exit(3)\n", "called exit(3)"),
    ("def express(input, ctx):\n    return object()\n", "returned a value that is not JSON"),
    ("def express(input, ctx):\n    return float('nan')\n", "not JSON"),
    ("def express(input, ctx:\n", "gene.py line 1: SyntaxError"),
    ("raise RuntimeError('at import')\n",
     "failed while loading: RuntimeError: at import"),
    (b"\xff\xfe", "gene.py is not UTF-8"),
])
def test_crashes_are_gene_failed(tmp_path: Path, code: str | bytes, message: str) -> None:
    write_gene(tmp_path / "genes", "g", code)
    g = load_gene(tmp_path / "genes", "g")
    with pytest.raises(GeneFailed) as info:
        express(g, None, DeniedMemory())
    assert message in str(info.value)
    assert info.value.__traceback__ is not None  # raised, with no chained runtime context
    assert info.value.__cause__ is None


def test_a_real_sigint_is_an_interruption_even_if_the_gene_swallows_it(tmp_path: Path) -> None:
    """A trusted gene (in this process) sends itself a real SIGINT (what Ctrl-C
    delivers) and catches the KeyboardInterrupt: the run is still interrupted,
    and the handler is restored.  Contained, the same signal reaches only the
    gene's own process (the user's Ctrl-C never does: a session of its own), so
    it is the gene's failure (issue 30, finding 6)."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    g = gene(tmp_path, "g", "import os, signal, time\n\ndef express(input, ctx):\n"
                            "    try:\n        os.kill(os.getpid(), signal.SIGINT)\n"
                            "        time.sleep(5)\n"
                            "    except KeyboardInterrupt:\n        return 'swallowed'\n")
    with pytest.raises(KeyboardInterrupt):
        express(g, None, DeniedMemory(), grant=Grant(trusted=True))
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(GeneFailed, match="interrupted by a signal to its own process"):
        express(g, None, DeniedMemory())
    g = gene(tmp_path, "h", "def express(input, ctx):\n    raise KeyboardInterrupt('mine')\n")
    with pytest.raises(GeneFailed, match=r"KeyboardInterrupt \(raised by the gene itself\)"):
        express(g, None, DeniedMemory())


def test_no_express_function(tmp_path: Path) -> None:
    g = gene(tmp_path, "g", "express = 3\n")
    with pytest.raises(InvalidGene, match="defines no function express"):
        express(g, None, DeniedMemory())


def test_deadline(tmp_path: Path) -> None:
    g = gene(tmp_path, "g", "def express(input, ctx):\n"
                            "    try:\n        while True: pass\n"
                            "    except Exception:\n        return 'swallowed'\n")
    with pytest.raises(GeneFailed, match=r"ran past its deadline of 0\.2 s"):
        express(g, None, DeniedMemory(), deadline_s=0.2)


def test_input_is_checked_against_the_schema_first(tmp_path: Path) -> None:
    g = gene(tmp_path, "g", "def express(input, ctx):\n    raise AssertionError\n",
             inputSchema={"type": "object", "required": ["code"]})
    with pytest.raises(InvalidInput, match="input is missing required field 'code'"):
        express(g, {}, DeniedMemory())


def test_wasm_gene_through_express(tmp_path: Path, store: MemoryStore) -> None:
    write_wat_gene(tmp_path / "genes", "prefs", "prefs")
    g = load_gene(tmp_path / "genes", "prefs")
    assert g.kind == "wasm"
    memory = store.for_gene(AGENT, "v2:" + "c" * 64, g.domain)
    assert express(g, {"indent": 5}, memory) == {"indent": 5}
    assert express(g, {}, memory) == {"indent": 5}
    with pytest.raises(GeneRejected, match="MEMORY_ACCESS_DENIED"):
        express(g, {}, DeniedMemory())


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_gene_through_express(tmp_path: Path, store: MemoryStore,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    write_gene(tmp_path / "genes", "n", "exports.express = (i) => i;", file="index.js")
    g = load_gene(tmp_path / "genes", "n")
    assert g.kind == "node"
    assert express(g, [1, "a"], DeniedMemory()) == [1, "a"]
    monkeypatch.setenv("ROTIFER_NODE", str(tmp_path / "missing-node"))
    with pytest.raises(GeneUnavailable, match=r"Node\.js"):
        express(g, 1, DeniedMemory())
