"""run_agent and run_gene: memory per agent, stale genes, replacement, running alone."""

from __future__ import annotations

import pytest

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.agents.run import run_agent, run_gene, stale_hint
from rotifer.genes.errors import AgentNotFound, GeneNotFound, GeneRejected, InvalidInput
from rotifer.memory import AgentMemoryError, MemoryStore

from ..genes.helpers import BETTER_FORMATTER, FORMATTER, write_gene, write_wat_gene
from .conftest import audit_lines


@pytest.fixture
def fmt_agent(project: Project) -> Agents:
    write_gene(project.genes_dir, "fmt", FORMATTER)
    wrap_gene(project, "fmt")
    agents = Agents(project)
    agents.create("a", ["fmt"])
    return agents


def test_agent_remembers_between_runs(project: Project, fmt_agent: Agents) -> None:
    hints: list[str] = []
    assert run_agent(project, "a", {"code": "x", "indent": 4}, hints=hints)["indent"] == 4
    assert run_agent(project, "a", {"code": "x"}, hints=hints) == {"formatted": "    x",
                                                                   "indent": 4}
    assert hints == []
    with project.open_store() as store:
        [entry] = store.deployer("a").list()
    assert entry.created_by == project.load_gene("fmt").v2_id


def test_each_agent_has_its_own_memory(project: Project, fmt_agent: Agents) -> None:
    fmt_agent.create("b", ["fmt"])
    run_agent(project, "a", {"code": "x", "indent": 8})
    assert run_agent(project, "b", {"code": "x"})["indent"] == 2


def test_unknown_agent_and_removed_gene(project: Project, fmt_agent: Agents) -> None:
    with pytest.raises(AgentNotFound):
        run_agent(project, "nope", {})
    (project.genes_dir / "fmt" / "gene.py").unlink()
    (project.genes_dir / "fmt" / "phenotype.json").unlink()
    (project.genes_dir / "fmt").rmdir()
    with pytest.raises(GeneNotFound):
        run_agent(project, "a", {})


def test_stale_gene_is_denied_with_a_hint(project: Project, fmt_agent: Agents) -> None:
    run_agent(project, "a", {"code": "x", "indent": 4})
    path = project.genes_dir / "fmt" / "gene.py"
    path.write_text(path.read_text() + "\n# edited\n")
    hints: list[str] = []
    with pytest.raises(AgentMemoryError) as info:
        run_agent(project, "a", {"code": "x"}, hints=hints)
    assert info.value.code == "MEMORY_ACCESS_DENIED"
    assert "no v2 id" in str(info.value)
    assert hints == [stale_hint(project.load_gene("fmt"), project.registry())]
    assert "rotifer wrap fmt" in hints[0]
    denied = [line for line in audit_lines(project) if line["action"] == "access_denied"]
    assert denied and denied[-1]["agent"] == "a" and denied[-1]["key"] == "formatter/indent"
    # wrapping again gives memory back, and the preference is still there
    wrap_gene(project, "fmt")
    assert run_agent(project, "a", {"code": "x"}, hints=hints)["indent"] == 4
    assert len(hints) == 1


def test_stale_hint_goes_to_stderr_by_default(project: Project, fmt_agent: Agents,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    write_gene(project.genes_dir, "fmt", FORMATTER + "\n# edited\n")
    with pytest.raises(AgentMemoryError):
        run_agent(project, "a", {"code": "x"})
    err = capsys.readouterr().err
    assert err.startswith("hint: gene 'fmt' changed since it was last wrapped, so its memory "
                          "calls are refused: run `rotifer wrap fmt` again")


def test_stale_gene_that_needs_no_memory_still_runs(project: Project, fmt_agent: Agents) -> None:
    write_gene(project.genes_dir, "fmt", FORMATTER + "\n# edited\n")
    hints: list[str] = []
    with pytest.raises(AgentMemoryError):  # writes are refused too
        run_agent(project, "a", {"code": "x", "indent": 1}, hints=hints)
    write_gene(project.genes_dir, "plain", "def express(i, ctx):\n    return i\n")
    wrap_gene(project, "plain")
    fmt_agent.set_genes("a", ["plain"])
    write_gene(project.genes_dir, "plain", "def express(i, ctx):\n    return i  # edited\n")
    assert run_agent(project, "a", 7, hints=hints) == 7
    assert any("'plain'" in h for h in hints)


def test_replacing_a_gene_keeps_the_memory(project: Project, fmt_agent: Agents) -> None:
    run_agent(project, "a", {"code": "x", "indent": 3})
    write_gene(project.genes_dir, "fmt2", BETTER_FORMATTER)  # same domain "formatter"
    wrap_gene(project, "fmt2")
    fmt_agent.set_genes("a", ["fmt2"])
    out = run_agent(project, "a", {"code": "y"})
    assert out == {"version": 2, "formatted": "   y", "indent": 3}


def test_updating_a_gene_keeps_same_domain_entries(project: Project, fmt_agent: Agents) -> None:
    run_agent(project, "a", {"code": "x", "indent": 6})
    old = project.load_gene("fmt").v2_id
    write_gene(project.genes_dir, "fmt", BETTER_FORMATTER)
    new = wrap_gene(project, "fmt").v2_id
    assert new != old
    assert run_agent(project, "a", {"code": "y"})["indent"] == 6


def test_creator_only_entries_are_lost_to_an_upgrade(project: Project) -> None:
    code = ("def express(i, ctx):\n    if i == 'w':\n"
            "        ctx.memory.write_memory('fmt/p', b'1', 'CONTEXT', {'readScope': "
            "'CREATOR_GENE_ONLY', 'writeScope': 'CREATOR_GENE_ONLY', 'sharePolicy': 'PRIVATE'})\n"
            "        return 'ok'\n    return ctx.memory.read_memory('fmt/p') is not None\n")
    write_gene(project.genes_dir, "g", code)
    wrap_gene(project, "g")
    Agents(project).create("a", ["g"])
    run_agent(project, "a", "w")
    assert run_agent(project, "a", "r") is True
    write_gene(project.genes_dir, "g", code + "# v2\n")
    wrap_gene(project, "g")
    with pytest.raises(AgentMemoryError) as info:
        run_agent(project, "a", "r")
    assert info.value.code == "MEMORY_ACCESS_DENIED"


def test_wasm_agent(project: Project) -> None:
    write_wat_gene(project.genes_dir, "prefs", "prefs")
    wrap_gene(project, "prefs")
    Agents(project).create("w", ["prefs"])
    assert run_agent(project, "w", {"indent": 7}) == {"indent": 7}
    assert run_agent(project, "w", {}) == {"indent": 7}


def test_run_gene_alone_is_denied_and_audited(project: Project) -> None:
    write_gene(project.genes_dir, "fmt", FORMATTER)
    gene = wrap_gene(project, "fmt")
    with pytest.raises(AgentMemoryError) as info:
        run_gene(project, "fmt", {"code": "x"})
    assert info.value.code == "MEMORY_ACCESS_DENIED"
    assert "part of an agent" in str(info.value)
    [line] = audit_lines(project)
    assert (line["action"], line["agent"], line["actor"], line["key"]) == (
        "access_denied", None, gene.v2_id, "formatter/indent")
    assert not (project.dot / "playground.db").exists()  # running alone opens no memory


def test_run_gene_alone_wasm_gets_minus_two(project: Project) -> None:
    write_wat_gene(project.genes_dir, "prefs", "prefs")
    with pytest.raises(GeneRejected) as info:
        run_gene(project, "prefs", {})
    assert info.value.code == "MEMORY_ACCESS_DENIED"
    assert audit_lines(project)[-1]["action"] == "access_denied"


def test_run_gene_without_memory_use(project: Project) -> None:
    write_gene(project.genes_dir, "echo", "def express(i, ctx):\n    return [i, ctx.agent]\n",
               inputSchema={"type": "integer"})
    assert run_gene(project, "echo", 3) == [3, None]
    with pytest.raises(InvalidInput):
        run_gene(project, "echo", "x")
    with pytest.raises(GeneNotFound):
        run_gene(project, "nope", 1)


def test_agent_bound_to_a_store_without_its_memory(project: Project, fmt_agent: Agents) -> None:
    other = project.root / "other.db"
    MemoryStore.open(project.dot, f"sqlite:{other}").close()  # a store, but not a's
    fmt_agent.bind("a", f"sqlite:{other}")
    with pytest.raises(AgentMemoryError) as info:
        run_agent(project, "a", {"code": "x"})
    assert info.value.code == "MEMORY_STORAGE_ERROR"
    assert f"agent 'a' has no memory in sqlite:{other}" in str(info.value)


def test_agent_bound_to_a_store_that_is_gone(project: Project, fmt_agent: Agents) -> None:
    other = project.root / "other.db"
    fmt_agent.bind("a", f"sqlite:{other}")
    with pytest.raises(AgentMemoryError) as info:
        run_agent(project, "a", {"code": "x"})
    assert info.value.code == "MEMORY_STORAGE_ERROR"
    assert str(other) in str(info.value)
    assert not other.exists()  # a run never creates the store
