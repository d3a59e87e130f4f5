"""Fixtures for the agent tests: a real project in a temp dir (SQLite memory)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rotifer.agents.project import Project


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests pick their project and store explicitly."""
    monkeypatch.delenv("ROTIFER_PROJECT", raising=False)
    monkeypatch.delenv("ROTIFER_MEMORY_URL", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project.init(tmp_path / "proj")


def audit_lines(project: Project) -> list[dict[str, Any]]:
    path = project.dot / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
