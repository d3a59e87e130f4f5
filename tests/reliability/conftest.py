"""Fixtures and report plumbing for the reliability suite (tests/reliability).

Every test here carries ``@pytest.mark.reliability(area, attack, holds)``:
the area (Faults, Isolation, Load, Poisoning), the fault or attack in a few
words, and what must still hold afterwards.  Its docstring's first paragraph
says how it is tested.  ``scripts/reliability_report.py`` runs this suite with
``--junitxml`` and turns those three fields, the docstring and the result
into the table in ``docs/reliability.md``; they travel as the test's
``user_properties`` (``area``, ``attack``, ``holds``, ``how``), and a test can
add measured figures with the ``figure`` fixture (``figure("kills", 200)``).

The PostgreSQL fixtures (``backend``, ``store_factory``, ``pg_url``, ...) come
from the shared plugin, tests/pg_plugin.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "reliability(area, attack, holds): a row of docs/reliability.md (see "
        "tests/reliability/conftest.py)")


def how_tested(item: pytest.Item) -> str:
    """The first paragraph of the test function's docstring, on one line."""
    func = getattr(item, "function", None)
    doc = inspect.getdoc(func) if func is not None else None
    if not doc:
        return ""
    return " ".join(doc.split("\n\n")[0].split())


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("reliability")
    if marker is None:
        return
    area, attack, holds = marker.args
    item.user_properties.extend(
        [("area", area), ("attack", attack), ("holds", holds), ("how", how_tested(item))])


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """``figure(name, value)``: a measured figure for the report (kills, ops/s, ...)."""

    def record(name: str, value: object) -> None:
        request.node.user_properties.append((f"figure:{name}", str(value)))

    return record
