"""Reading a project's audit log in tests: one JSON object a line, in order.

The tests read the file itself, not through rotifer's readers, so that what
they check is what is on disk.  A torn last line is a JSON error here; the
reliability tests, which expect torn lines, read through
``rotifer.memory.audit`` instead (tests/reliability/helpers.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rotifer.memory.audit import archives


def audit_lines(rotifer_dir: Path) -> list[dict[str, Any]]:
    """The lines of ``ROTIFER_DIR/audit.jsonl``; none when there is no log yet."""
    path = rotifer_dir / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def all_audit_lines(rotifer_dir: Path) -> list[dict[str, Any]]:
    """Every line of the log, its rolled-over files first (oldest first), then
    ``audit.jsonl``: what :func:`audit_lines` reads is only the live file, which
    starts afresh at each roll-over."""
    path = rotifer_dir / "audit.jsonl"
    return [json.loads(line) for part in (*archives(path), path) if part.exists()
            for line in part.read_text().splitlines()]


def project_audit(root: Path) -> list[dict[str, Any]]:
    """The lines of the audit log of the project at ``root`` (its ``.rotifer/``)."""
    return audit_lines(root / ".rotifer")
