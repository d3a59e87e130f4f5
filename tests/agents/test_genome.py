"""Agents: create (all or nothing), list, get, set_genes, bind."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.genes.errors import (
    AgentExists,
    AgentNotFound,
    GeneNotFound,
    InvalidAgent,
    InvalidComposition,
    InvalidPhenotype,
    RotiferError,
)
from rotifer.memory import AgentMemoryError, DataPolicy, parse_size

from ..genes.helpers import FORMATTER, write_gene


@pytest.fixture
def agents(project: Project) -> Agents:
    for name in ("fmt", "lint", "check"):
        write_gene(project.genes_dir, name, FORMATTER)
        wrap_gene(project, name)
    return Agents(project)


def nothing_created(project: Project, name: str) -> None:
    assert not (project.agents_dir / f"{name}.json").exists()
    with project.open_store() as store:
        assert not store.has_agent(name)


def test_create_get_list(project: Project, agents: Agents) -> None:
    spec = agents.create("a", ["fmt", "lint"], "par", quota_bytes=parse_size("50MB"),
                         data_policy=DataPolicy.from_json(
                             {"maxRetentionDays": 30, "anonymizationSupported": True}))
    assert (spec.name, spec.genes, spec.composition, spec.memory_url) == (
        "a", ["fmt", "lint"], "par", None)
    assert agents.get("a") == spec
    agents.create("b", ["fmt"])
    assert [s.name for s in agents.list()] == ["a", "b"]
    doc = json.loads((project.agents_dir / "a.json").read_text())
    assert doc["genes"] == ["fmt", "lint"] and doc["composition"] == "par"
    with project.open_store() as store:
        assert store.usage("a") == (0, 50 * 1024 * 1024)
        assert store.agent_record("a").data_policy == DataPolicy(30, True)
        assert store.usage("b") == (0, 10 * 1024 * 1024)
        assert store.agent_record("b").data_policy == DataPolicy()


def test_list_without_agents(agents: Agents) -> None:
    assert agents.list() == []


def test_agent_exists(project: Project, agents: Agents) -> None:
    agents.create("a", ["fmt"])
    with pytest.raises(AgentExists, match="AGENT_EXISTS: agent 'a' already exists"):
        agents.create("a", ["lint"])
    assert agents.get("a").genes == ["fmt"]


def test_memory_left_without_spec_is_not_reused(project: Project, agents: Agents) -> None:
    with project.open_store() as store:
        store.create_agent("ghost")
    with pytest.raises(AgentExists, match="already holds a memory"):
        agents.create("ghost", ["fmt"])
    assert not (project.agents_dir / "ghost.json").exists()


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"name": "bad name"}, InvalidAgent, "invalid agent name"),
    ({"name": "../x"}, InvalidAgent, "invalid agent name"),
    ({"name": ""}, InvalidAgent, "invalid agent name"),
    ({"genes": []}, InvalidAgent, "at least one gene"),
    ({"genes": "fmt"}, InvalidAgent, "list of gene names"),
    ({"genes": ["fmt", ""]}, InvalidAgent, "invalid gene name"),
    ({"genes": ["fmt", "missing"]}, GeneNotFound, "no gene 'missing'"),
    ({"composition": "loop"}, InvalidComposition, "unknown composition 'loop'"),
    ({"composition": "cond", "genes": ["fmt", "lint"]}, InvalidComposition, "exactly 3"),
    ({"composition": "try", "genes": ["fmt"]}, InvalidComposition, "at least 2"),
    ({"quota_bytes": 0}, InvalidAgent, "positive number of bytes"),
    ({"quota_bytes": -5}, InvalidAgent, "positive number of bytes"),
    ({"quota_bytes": True}, InvalidAgent, "positive number of bytes"),
    ({"quota_bytes": 1.5}, InvalidAgent, "positive number of bytes"),
    ({"data_policy": {"maxRetentionDays": 1}}, InvalidAgent, "DataPolicy"),
])
def test_invalid_agents_are_not_created(project: Project, agents: Agents, kwargs: dict[str, Any],
                                        error: type[RotiferError], words: str) -> None:
    args: dict[str, Any] = {"name": "a", "genes": ["fmt"], **kwargs}
    with pytest.raises(error) as info:
        agents.create(**args)
    assert words in str(info.value)
    if isinstance(args["name"], str) and args["name"].isalnum():
        nothing_created(project, args["name"])


def test_broken_gene_is_not_accepted(project: Project, agents: Agents) -> None:
    (project.genes_dir / "lint" / "phenotype.json").write_text("{}")
    with pytest.raises(InvalidPhenotype):
        agents.create("a", ["fmt", "lint"])
    nothing_created(project, "a")


@pytest.mark.parametrize("size", ["50", "0MB", "-1KB", "2000GB", "ten MB"])
def test_quota_sizes_are_refused_before_create(size: str) -> None:
    with pytest.raises(AgentMemoryError) as info:
        parse_size(size)
    assert info.value.code == "MEMORY_INVALID_INPUT"


def test_spec_write_failure_drops_the_memory(project: Project, agents: Agents) -> None:
    project.agents_dir.rmdir()  # made by init, and replaced by a file:
    project.agents_dir.write_text("not a folder")  # the spec cannot be written
    with pytest.raises(RotiferError) as info:
        agents.create("a", ["fmt"])
    assert info.value.code == "AGENT_STORAGE_ERROR"
    with project.open_store() as store:
        assert not store.has_agent("a")


def test_get_missing(agents: Agents) -> None:
    with pytest.raises(AgentNotFound, match="AGENT_NOT_FOUND: no agent 'x'"):
        agents.get("x")
    with pytest.raises(AgentNotFound):
        agents.set_genes("x", ["fmt"])
    with pytest.raises(AgentNotFound):
        agents.bind("x", None)


@pytest.mark.parametrize("content", ["{", "[]", '{"name": "a", "genes": "fmt"}',
                                     '{"name": "b", "genes": ["fmt"]}',
                                     '{"name": "a", "genes": ["fmt"], "composition": "x"}'])
def test_corrupt_spec(project: Project, agents: Agents, content: str) -> None:
    project.agents_dir.mkdir(exist_ok=True)
    (project.agents_dir / "a.json").write_text(content)
    with pytest.raises(InvalidAgent, match=r"a\.json"):
        agents.get("a")
    with pytest.raises(InvalidAgent):
        agents.list()


def test_set_genes_and_bind_keep_the_rest(project: Project, agents: Agents) -> None:
    created = agents.create("a", ["fmt"], "seq")
    changed = agents.set_genes("a", ["lint", "fmt", "check"], "cond")
    assert (changed.genes, changed.composition, changed.created_at) == (
        ["lint", "fmt", "check"], "cond", created.created_at)
    assert agents.set_genes("a", ["check", "fmt", "lint"]).composition == "cond"
    with pytest.raises(InvalidComposition):
        agents.set_genes("a", ["fmt"])
    with pytest.raises(GeneNotFound):
        agents.set_genes("a", ["nope", "fmt", "lint"])
    assert agents.get("a").genes == ["check", "fmt", "lint"]
    assert agents.bind("a", "postgresql://x/y").memory_url == "postgresql://x/y"
    assert agents.get("a").genes == ["check", "fmt", "lint"]
    assert agents.bind("a", None).memory_url is None
    with pytest.raises(InvalidAgent):
        agents.bind("a", "")
