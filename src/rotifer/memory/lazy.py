"""Names a package loads on first use (PEP 562), so importing it stays cheap.

``rotifer.memory`` and ``rotifer.memory.audit`` name what they offer in a
table (name -> the module, relative to the package, that defines it) and let
:func:`loader` make their module ``__getattr__``: a light part of either (the
error codes, the audit action names) can be imported without the store or the
log's writing machinery (tests/cli/test_startup_imports.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def loader(package: str, homes: Mapping[str, str],
           namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name in ``homes`` is
    imported from its module the first time it is asked for, then kept in
    ``namespace`` (the package's globals), so it is looked up only once."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # Here, not at the top: a process started with ``python -S`` (the fork
        # server) has not loaded importlib, and may never need it.
        from importlib import import_module

        value = getattr(import_module(home, package), name)
        namespace[name] = value
        return value

    return __getattr__
