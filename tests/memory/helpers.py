"""Small helpers shared by the memory tests (genes ids, audit reading)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def gene_id(name: str) -> str:
    return "v2:" + hashlib.sha256(name.encode()).hexdigest()


def audit_lines(rotifer_dir: Path) -> list[dict[str, Any]]:
    path = rotifer_dir / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def actions(rotifer_dir: Path) -> list[tuple[str, str | None]]:
    return [(line["action"], line["key"]) for line in audit_lines(rotifer_dir)]


RETAIN_1_DAY = {"maxRetentionDays": 1, "autoDeleteOnTermination": False,
                "anonymizationSupported": False}
