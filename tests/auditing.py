"""Reading the audit log in tests: the one reader every suite uses.

The log is JSON lines (``.rotifer/audit.jsonl``); a test that wants the lines
as written reads them here, so a change to where or how the log is kept is
made once.  Checks of the chain and of torn lines are rotifer's own
(``rotifer.memory.audit.verify``) and the reliability suite's
(tests/reliability/helpers.py), not this plain reader's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def audit_lines(rotifer_dir: Path) -> list[dict[str, Any]]:
    """Every line of ROTIFER_DIR/audit.jsonl, parsed; none when there is no log yet."""
    path = rotifer_dir / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
