"""Node.js gene tests run real ``node`` processes.

Without ``node`` on PATH they are skipped, except under CI (``$CI`` set),
where a missing runtime is a failure: CI installs Node.js.  The TypeScript
tests need the pinned ``typescript`` package (``make node-deps``); they fail
with that hint, never skip, when it is missing.
"""

from __future__ import annotations

import os
import shutil

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shutil.which("node") or os.environ.get("ROTIFER_NODE") or os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason="node is not installed (Node.js genes need Node.js 18+)")
    for item in items:
        if "tests/node/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)
