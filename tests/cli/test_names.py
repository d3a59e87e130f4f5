"""Names are whole strings: a trailing line break, a control or a bidi character never
passes ``agent create``, ``wrap`` or the store (``^...$`` with ``re.match`` let
``fmt\\n`` through, and ``fmt`` and ``fmt\\n`` then looked alike everywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rotifer.agents.genome import Agents, validate_agent_name
from rotifer.agents.project import Project
from rotifer.genes.errors import InvalidAgent, InvalidGene
from rotifer.genes.gene import validate_gene_name
from rotifer.genes.ids import is_v2_id
from rotifer.memory import AgentMemoryError
from tests.cli.helpers import add_gene, init_project, refused, wrap

GENE = "def express(input, ctx):\n    return input\n"
SNEAKY = ["fmt\n", "fmt\r\n", "fmt\t", "\nfmt", "fmt\x00", "fm\u202et"]


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = init_project(tmp_path / "proj")
    add_gene(root, "fmt", GENE)
    wrap(root, "fmt")
    return root


@pytest.mark.parametrize("name", SNEAKY)
def test_agent_create_refuses_a_name_with_a_hidden_character(proj: Path, name: str) -> None:
    refused(proj, "INVALID_AGENT", "agent", "create", name, "--genes", "fmt")
    assert sorted(p.name for p in (proj / ".rotifer" / "agents").glob("*")) == []
    with pytest.raises(InvalidAgent):
        validate_agent_name(name)


@pytest.mark.parametrize("name", SNEAKY)
def test_wrap_refuses_a_gene_name_with_a_hidden_character(proj: Path, name: str) -> None:
    refused(proj, "INVALID_GENE", "wrap", name)
    with pytest.raises(InvalidGene):
        validate_gene_name(name)


def test_an_agent_of_an_older_version_named_with_a_line_break_is_still_reached(
        proj: Path) -> None:
    """Such an agent's file exists (an older rotifer made it): it is read by its exact
    name and kept apart from ``fmt``, never taken for it."""
    project = Project(proj)
    agents = Agents(project)
    agents.create("fmt", ["fmt"])
    (project.agents_dir / "fmt\n.json").write_text(
        (project.agents_dir / "fmt.json").read_text().replace('"name": "fmt"', '"name": "fmt\\n"'))
    names = sorted(spec.name for spec in agents.scan()[0])
    assert names == ["fmt", "fmt\n"]
    assert agents.get("fmt\n").name == "fmt\n"


def test_the_store_refuses_a_new_agent_id_with_a_hidden_character(tmp_path: Path) -> None:
    from rotifer.memory import MemoryStore

    with MemoryStore.open(tmp_path / ".rotifer") as store:
        for name in SNEAKY:
            with pytest.raises(AgentMemoryError) as caught:
                store.create_agent(name)
            assert caught.value.code.value == "MEMORY_INVALID_INPUT", name
            assert not store.has_agent(name)
        store.create_agent("fmt")
        assert store.has_agent("fmt")


def test_a_v2_id_is_the_whole_string() -> None:
    good = "v2:" + "a" * 64
    assert is_v2_id(good)
    assert not is_v2_id(good + "\n") and not is_v2_id(" " + good)
