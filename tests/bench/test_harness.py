"""The benchmark harness itself works: tiny comparisons yield well-formed rows.

No timing is asserted; these only check that the harness runs, that its
operations really do what they claim (against the real store), and that the
table and the markers in the docs file come out right.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import memory, report
from bench.report import BEGIN, END, Result
from bench.timing import TINY, compare

ROW = re.compile(r"^\| [^|]+ \| [^|]+ \| [0-9.]+ (µs|ms|s) \| [^|]+ \| ([0-9.]+×|–) \| [^|]+ \| "
                 r"(met|\*\*missed\*\*|–) \|$")


def test_compare_gives_a_median_per_operation() -> None:
    calls = {"a": 0, "b": 0}

    def op(name: str) -> None:
        calls[name] += 1

    t = compare({"a": lambda: op("a"), "b": lambda: op("b")}, rounds=3, iters=4)
    assert set(t) == {"a", "b"}
    assert all(v >= 0 for v in t.values())
    assert calls == {"a": 1 + 3 * 4, "b": 1 + 3 * 4}  # one warm-up call each


def test_result_judges_ratios_both_ways() -> None:
    slow = Result("g", "n", 2.0, 1.0, "base", "max", 1.5)
    assert slow.ratio == 2.0 and slow.met is False
    fast = Result("g", "n", 1.0, 3.0, "base", "min", 2.0)
    assert fast.ratio == 3.0 and fast.met is True
    assert Result("g", "n", 0.1, None, "", "abs", 0.15).met is True
    assert Result("g", "n", 0.1, None, "", "info", None).met is None


def test_floor_suite_rows_are_well_formed(tmp_path: Path) -> None:
    deletes = TINY.rounds * memory.delete_iters(TINY) + 4
    scale = memory.open_scale(tmp_path, 200, TINY, deletes)
    try:
        agent = scale.agents[100]
        assert scale.store.usage(agent)[0] == scale.store.backend.conn.execute(  # type: ignore[attr-defined]
            "SELECT sum(size) FROM memory_entries WHERE agent_id = ?", (agent,)).fetchone()[0]
        results = memory.floor_suite(scale, TINY)
    finally:
        scale.close()
    assert [r.name for r in results] == [
        "write_memory 100 B (update)", "read_memory 100 B (same gene)",
        "query_memory 100 × 100 B", "delete_memory 100 B"]
    table = report.render(results).splitlines()
    assert len(table) == 2 + len(results)
    for line in table[2:]:
        assert ROW.match(line), line
    assert all(r.baseline and r.ratio for r in results)


def test_eviction_suite_really_evicts(tmp_path: Path) -> None:
    results = memory.eviction_suite(tmp_path, TINY)
    assert [r.name for r in results] == ["write that evicts 1 (108 B)",
                                         "write that evicts 100 (3200 B)"]
    audit = (tmp_path / "evict" / "audit.jsonl").read_text()
    assert '"action":"evict"' in audit


def test_doc_block_is_replaced_between_markers(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# Title\n\nintro\n\n{BEGIN}\nold table\n{END}\n\nafter\n")
    rows = [Result("g", "one", 1e-4, 5e-5, "floor", "max", 1.5)]
    report.write_doc(doc, report.block(rows, "tiny"))
    report.write_doc(doc, report.block(rows, "tiny"))  # idempotent
    text = doc.read_text()
    assert text.startswith("# Title\n\nintro\n\n") and text.endswith("\n\nafter\n")
    assert "old table" not in text and text.count(BEGIN) == 1 and text.count(END) == 1
    assert "| g | one | 100 µs | floor: 50 µs | 2.00× | ≤ 1.5× | **missed** |" in text


def test_main_writes_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import __main__ as entry

    monkeypatch.setattr(entry, "QUICK", TINY)
    doc = tmp_path / "out.md"
    assert entry.main(["--quick", "--only", "wasm", "--out", str(doc)]) == 0
    text = doc.read_text()
    assert BEGIN in text and END in text and "readMemory host call" in text
