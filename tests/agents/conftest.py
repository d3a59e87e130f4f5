"""Helpers for the agent tests: a real project in a temp dir (SQLite memory).

The ``project`` fixture and the environment cleaning are in tests/conftest.py
(the Node tests use them too)."""

from __future__ import annotations

from typing import Any

from rotifer.agents.project import Project
from tests.audit_reading import audit_lines as _audit_lines


def audit_lines(project: Project) -> list[dict[str, Any]]:
    """The project's audit log, line by line (tests/audit_reading.py)."""
    return _audit_lines(project.dot)
