"""What a package imports, read from its source: the tests that keep an
integration (tests/mcp, tests/langgraph) a room of its own on top of the layers
it may use."""

from __future__ import annotations

import ast
from pathlib import Path


def rotifer_imports(package: Path) -> set[str]:
    """The ``rotifer`` modules the package's files import by absolute name."""
    used: set[str] = set()
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                used.add(node.module)
            elif isinstance(node, ast.Import):
                used.update(alias.name for alias in node.names)
    return {name for name in used if name.startswith("rotifer")}
