"""The LangGraph benches of issue 32 run end to end at a tiny size (the
figures are for `python -m bench`; here only that each table is whole)."""

from __future__ import annotations

from pathlib import Path

from bench import langgraph_async, langgraph_pages
from bench.timing import Settings

TINY = Settings(rounds=1, iters=1, scales=(100, 200), sizes=(100,))


def test_the_pages_table(tmp_path: Path) -> None:
    table = langgraph_pages.table(tmp_path, TINY)
    rows = [line for line in table.splitlines() if line.startswith("| 200 × 100 B")]
    assert [row.split(" | ")[1] for row in rows] == [
        "limit=10", "limit=10, offset=190", "limit=10, filter 1 in 10",
        "list_namespaces(limit=1)"]
    assert all(row.rstrip(" |").endswith("×") for row in rows)


def test_the_gathered_async_table(tmp_path: Path) -> None:
    got = langgraph_async.measure(tmp_path, 10, 2, 1)
    assert set(got) == {"RotiferStore", "AsyncSqliteStore"}
    assert all(wall > 0 and cpu > 0 for wall, cpu in got.values())


def test_the_gathered_puts_shape(tmp_path: Path) -> None:
    got = langgraph_async.measure(tmp_path, 1, 2, 1, shape=langgraph_async.puts)
    assert set(got) == {"RotiferStore", "AsyncSqliteStore"}
    assert all(wall > 0 and cpu > 0 for wall, cpu in got.values())
