from __future__ import annotations

from pathlib import Path

from .report import Result
from .timing import Settings


def run(root: Path, settings: Settings) -> list[Result]:
    return []
