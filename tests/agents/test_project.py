"""Finding the project and choosing its memory store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.genes.errors import InvalidAgent, ProjectNotFound, RotiferError

from ..genes.helpers import FORMATTER, write_gene


def test_init_makes_the_folders_and_is_idempotent(tmp_path: Path) -> None:
    p = Project.init(tmp_path / "new")
    assert (tmp_path / "new" / ".rotifer").is_dir() and (tmp_path / "new" / "genes").is_dir()
    assert Project.init(tmp_path / "new").root == p.root


def test_init_failure(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(RotiferError, match="cannot create the project"):
        Project.init(tmp_path / "file")


def test_find_upward(project: Project) -> None:
    deep = project.genes_dir / "a" / "b"
    deep.mkdir(parents=True)
    assert Project.find(start=deep).root == project.root


def test_find_not_found(tmp_path: Path) -> None:
    with pytest.raises(ProjectNotFound) as info:
        Project.find(start=tmp_path)
    assert str(info.value).startswith("PROJECT_NOT_FOUND: no .rotifer/ folder")


def test_explicit_beats_env_beats_search(project: Project, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    other = Project.init(tmp_path / "other")
    monkeypatch.setenv("ROTIFER_PROJECT", str(other.root))
    assert Project.find(start=project.root).root == other.root
    assert Project.find(explicit=project.root, start=other.root).root == project.root


def test_named_folder_must_be_a_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProjectNotFound, match="--project"):
        Project.find(explicit=tmp_path)
    monkeypatch.setenv("ROTIFER_PROJECT", str(tmp_path))
    with pytest.raises(ProjectNotFound, match=r"\$ROTIFER_PROJECT"):
        Project.find()


def test_memory_url_order(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    write_gene(project.genes_dir, "fmt", FORMATTER)
    wrap_gene(project, "fmt")
    Agents(project).create("a", ["fmt"])
    assert project.memory_url("a") is None
    (project.dot / "config.json").write_text(json.dumps({"memoryUrl": "sqlite:/tmp/x.db"}))
    assert project.memory_url("a") == project.memory_url() == "sqlite:/tmp/x.db"
    Agents(project).bind("a", "postgresql://h/db")
    assert project.memory_url("a") == "postgresql://h/db"
    assert project.memory_url("unknown") == "sqlite:/tmp/x.db"
    monkeypatch.setenv("ROTIFER_MEMORY_URL", "postgresql://env/db")
    assert project.memory_url("a") == "postgresql://env/db"


def test_open_store_follows_the_binding(project: Project, tmp_path: Path) -> None:
    write_gene(project.genes_dir, "fmt", FORMATTER)
    wrap_gene(project, "fmt")
    Agents(project).create("a", ["fmt"])
    elsewhere = tmp_path / "elsewhere.db"
    with project.open_store() as store:
        assert store.has_agent("a")
    Agents(project).bind("a", f"sqlite:{elsewhere}")
    with project.open_store("a") as store:
        assert not store.has_agent("a")
    assert elsewhere.exists()


@pytest.mark.parametrize("content", ["{", "[]", '{"memoryUrl": 3}'])
def test_bad_config(project: Project, content: str) -> None:
    (project.dot / "config.json").write_text(content)
    with pytest.raises(RotiferError) as info:
        project.memory_url()
    assert info.value.code == "INVALID_CONFIG"


def test_bad_agent_spec_in_memory_url(project: Project) -> None:
    project.agents_dir.mkdir(exist_ok=True)
    (project.agents_dir / "a.json").write_text("{")
    with pytest.raises(InvalidAgent):
        project.memory_url("a")
