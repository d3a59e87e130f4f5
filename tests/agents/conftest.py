"""Helpers for the agent tests: a real project in a temp dir (SQLite memory).

The ``project`` fixture and the environment cleaning are in tests/conftest.py
(the Node tests use them too)."""

from __future__ import annotations

from typing import Any

from rotifer.agents.project import Project
from tests.auditing import audit_lines as read_audit_lines


def audit_lines(project: Project) -> list[dict[str, Any]]:
    return read_audit_lines(project.dot)
