"""seq, par, cond, try -- through run_agent, and the threading rule through run_composition."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from rotifer.agents.build import wrap_gene
from rotifer.agents.compositions import run_composition, runs_in_parallel, truthy
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.agents.run import run_agent
from rotifer.genes.errors import GeneFailed, GeneRejected, InvalidComposition
from rotifer.genes.execute import express
from rotifer.genes.gene import Gene
from rotifer.memory import GeneMemoryAccess

from ..genes.helpers import write_gene, write_wat_gene

PY_GENES = {
    "inc": "def express(i, ctx):\n    return i + 1\n",
    "double": "def express(i, ctx):\n    return i * 2\n",
    "is_even": "def express(i, ctx):\n    return i % 2 == 0\n",
    "fail": "def express(i, ctx):\n    raise ValueError('broken')\n",
    "reject": ("def express(i, ctx):\n    return {'__rotifer_error': "
               "{'code': 'NOPE', 'message': 'not for me'}}\n"),
    "writer": ("def express(i, ctx):\n    ctx.memory.write_memory('t/seen', str(i).encode(), "
               "'CACHE')\n    return 'wrote'\n"),
    "reader": ("def express(i, ctx):\n    e = ctx.memory.read_memory('t/seen')\n"
               "    return None if e is None else e.value.decode()\n"),
    "typed": "def express(i, ctx):\n    return 'typed'\n",
}


@pytest.fixture
def agents(project: Project) -> Agents:
    for name, code in PY_GENES.items():
        extra = {"inputSchema": {"type": "string"}} if name == "typed" else {}
        write_gene(project.genes_dir, name, code, domain="t", **extra)
        wrap_gene(project, name)
    write_wat_gene(project.genes_dir, "prefs", "prefs")
    write_wat_gene(project.genes_dir, "wwriter", "writer")
    write_wat_gene(project.genes_dir, "trap", "trap")
    for name in ("prefs", "wwriter", "trap"):
        wrap_gene(project, name)
    return Agents(project)


def run(project: Project, agents: Agents, composition: str, genes: list[str], input: Any) -> Any:
    name = f"{composition}-{'-'.join(genes)}"
    if not agents.exists(name):
        agents.create(name, genes, composition)
    return run_agent(project, name, input, hints=[])


def test_seq_pipes(project: Project, agents: Agents) -> None:
    assert run(project, agents, "seq", ["inc", "double"], 3) == 8
    assert run(project, agents, "seq", ["double", "inc"], 3) == 7
    assert run(project, agents, "seq", ["inc"], 3) == 4


def test_seq_stops_at_the_first_failure(project: Project, agents: Agents) -> None:
    with pytest.raises(GeneFailed, match="broken"):
        run(project, agents, "seq", ["inc", "fail", "writer"], 1)
    with project.open_store() as store:
        assert store.deployer("seq-inc-fail-writer").list() == []


def test_par_returns_every_output_in_order(project: Project, agents: Agents) -> None:
    assert run(project, agents, "par", ["inc", "double", "is_even"], 3) == [4, 6, False]


def test_par_of_python_genes_runs_one_after_another(project: Project, agents: Agents) -> None:
    assert run(project, agents, "par", ["writer", "reader"], 5) == ["wrote", "5"]


def test_par_failure_is_the_first_failing_gene(project: Project, agents: Agents) -> None:
    with pytest.raises(GeneRejected, match="NOPE"):
        run(project, agents, "par", ["inc", "reject", "fail", "writer"], 2)
    with project.open_store() as store:  # the genes after the failure still ran
        [entry] = store.deployer("par-inc-reject-fail-writer").list()
    assert entry.key == "t/seen"


def test_par_of_wasm_genes(project: Project, agents: Agents) -> None:
    out = run(project, agents, "par", ["prefs", "wwriter"], {"indent": 3, "id": 7, "n": 2})
    assert out == [{"indent": 3}, {"written": 2}]
    with project.open_store() as store:
        entries = {e.key: e.created_by for e in store.deployer("par-prefs-wwriter").list()}
    assert entries == {"formatter/indent": project.load_gene("prefs").v2_id,
                       "par/7/0": project.load_gene("wwriter").v2_id,
                       "par/7/1": project.load_gene("wwriter").v2_id}


def test_par_of_wasm_genes_with_a_trap(project: Project, agents: Agents) -> None:
    with pytest.raises(GeneFailed, match="trapped"):
        run(project, agents, "par", ["prefs", "trap"], {"indent": 3})


def threads_used(project: Project, genes: list[Gene], input: Any) -> list[str]:
    names: list[str] = []
    lock = threading.Lock()
    agent = f"threads-{len(genes)}-{genes[-1].name}"
    store = project.open_store()
    store.create_agent(agent)

    def runner(gene: Gene, value: Any, memory: GeneMemoryAccess) -> Any:
        with lock:
            names.append(threading.current_thread().name)
        return express(gene, value, memory)

    try:
        run_composition("par", genes, input,
                        lambda g: store.for_gene(agent, g.v2_id, g.domain), runner)
    finally:
        store.close()
    return names


def test_par_threads_only_when_all_genes_are_wasm(project: Project, agents: Agents) -> None:
    wasm = [project.load_gene("prefs"), project.load_gene("wwriter")]
    assert runs_in_parallel("par", wasm)
    names = threads_used(project, wasm, {"indent": 1, "id": 1, "n": 1})
    assert len(names) == 2 and all(n.startswith("rotifer-par") for n in names)
    mixed = [project.load_gene("prefs"), project.load_gene("reader")]
    assert not runs_in_parallel("par", mixed)
    assert not runs_in_parallel("seq", wasm)
    assert threads_used(project, mixed, {"indent": 1}) == [threading.current_thread().name] * 2


def test_cond_chooses_a_branch_on_the_original_input(project: Project, agents: Agents) -> None:
    assert run(project, agents, "cond", ["is_even", "inc", "double"], 4) == 5
    assert run(project, agents, "cond", ["is_even", "inc", "double"], 3) == 6


def test_cond_runs_only_the_chosen_branch(project: Project, agents: Agents) -> None:
    assert run(project, agents, "cond", ["is_even", "inc", "fail"], 2) == 3
    with pytest.raises(GeneFailed):
        run(project, agents, "cond", ["is_even", "inc", "fail"], 1)


def test_cond_predicate_failure(project: Project, agents: Agents) -> None:
    with pytest.raises(GeneFailed):
        run(project, agents, "cond", ["fail", "inc", "double"], 1)


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), (False, False), (None, False), (0, False), (0.0, False), (2, True),
    ("", False), ("no", True), ([], False), ([0], True), ({}, False), ({"a": False}, True),
])
def test_truthy(value: Any, expected: bool) -> None:
    assert truthy(value) is expected


def test_try_falls_back(project: Project, agents: Agents) -> None:
    assert run(project, agents, "try", ["fail", "inc"], 1) == 2
    assert run(project, agents, "try", ["reject", "inc"], 1) == 2
    assert run(project, agents, "try", ["typed", "inc"], 1) == 2  # input refused by schema
    assert run(project, agents, "try", ["trap", "inc"], 1) == 2
    assert run(project, agents, "try", ["inc", "fail"], 1) == 2
    assert run(project, agents, "try", ["fail", "reject", "double"], 5) == 10


def test_try_all_failing_raises_the_last_error(project: Project, agents: Agents) -> None:
    with pytest.raises(GeneRejected, match="NOPE"):
        run(project, agents, "try", ["fail", "reject"], 1)
    with pytest.raises(GeneFailed, match="broken"):
        run(project, agents, "try", ["reject", "fail"], 1)


def test_mixed_wasm_and_python_composition(project: Project, agents: Agents) -> None:
    # every gene acts under its own id: the wasm prefs gene and a python reader in one agent
    assert run(project, agents, "par", ["prefs", "writer", "reader"], {"indent": 2}) == [
        {"indent": 2}, "wrote", "{'indent': 2}"]


def test_run_composition_refuses_bad_shapes(project: Project, agents: Agents) -> None:
    gene = project.load_gene("inc")

    def no_memory(g: Gene) -> GeneMemoryAccess:
        raise AssertionError("not reached")

    for composition, genes in [("seq", []), ("cond", [gene]), ("try", [gene]), ("x", [gene])]:
        with pytest.raises(InvalidComposition):
            run_composition(composition, genes, 1, no_memory, lambda g, v, m: v)
