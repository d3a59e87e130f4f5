"""Helpers for the agent tests: a real project in a temp dir (SQLite memory).

The ``project`` fixture and the environment cleaning are in tests/conftest.py
(the Node tests use them too)."""

from __future__ import annotations

import json
from typing import Any

from rotifer.agents.project import Project


def audit_lines(project: Project) -> list[dict[str, Any]]:
    path = project.dot / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
