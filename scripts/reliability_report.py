#!/usr/bin/env python3
"""Regenerate the table in docs/reliability.md from a run of tests/reliability.

Usage: ``python scripts/reliability_report.py [--doc docs/reliability.md]
[--junit FILE] [-- PYTEST ARGS...]``

It runs ``pytest tests/reliability -n 2 --junitxml=<temp file>`` (offline;
pytest and pytest-xdist from the dev dependencies), or reads an existing
``--junit`` file instead.  Every test of that suite carries
``@pytest.mark.reliability(area, attack, holds)`` and its docstring's first
paragraph says how it is tested; tests/reliability/conftest.py hands these to
the JUnit XML as properties, together with measured figures (kills, ops/s).
One row per test function (its parametrized cases together): area, the fault
or attack, how it is tested and the test id, what must hold, and the result
with the figures.  The rows replace whatever is between the marker comments
``<!-- reliability:begin -->`` and ``<!-- reliability:end -->``.

Exit status: 0 if every test passed (skips allowed), 1 if any failed, 2 for
a usage or file problem.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- reliability:begin -->", "<!-- reliability:end -->"
AREAS = ["Faults", "Isolation", "Load", "Poisoning"]


@dataclass
class Row:
    test_id: str
    area: str = ""
    attack: str = ""
    holds: str = ""
    how: str = ""
    cases: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)  # passed / failed / skipped
    figures: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    order: int = 0

    def result(self) -> str:
        passed = self.outcomes.count("passed")
        failed = self.outcomes.count("failed")
        skipped = self.outcomes.count("skipped")
        n = len(self.outcomes)
        if failed:
            text = f"**FAIL** ({failed} of {n} failed)"
        elif passed == 0:
            text = "skipped"
        else:
            text = "pass" if n == 1 else f"pass ({passed}/{n})"
            if skipped:
                text += f", {skipped} skipped"
        figures = "; ".join(f"{k} {', '.join(v)}" for k, v in self.figures.items())
        return f"{text}; {figures}" if figures else text


def run_pytest(junit: Path, extra: list[str]) -> int:
    cmd = [sys.executable, "-m", "pytest", "tests/reliability", "-n", "2", "-q",
           "-p", "no:cacheprovider", "-o", "junit_family=xunit1", f"--junitxml={junit}",
           *extra]
    print("+", " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, cwd=ROOT, check=False).returncode


def outcome(case: ET.Element) -> str:
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    if case.find("skipped") is not None:
        return "skipped"
    return "passed"


def read_rows(junit: Path) -> tuple[list[Row], dict[str, int]]:
    tree = ET.parse(junit)
    rows: dict[str, Row] = {}
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    for n, case in enumerate(tree.iter("testcase")):
        props = {}
        figures: list[tuple[str, str]] = []
        for prop in case.iter("property"):
            name, value = prop.get("name", ""), prop.get("value", "")
            if name.startswith("figure:"):
                figures.append((name[len("figure:"):], value))
            else:
                props[name] = value
        result = outcome(case)
        totals[result] += 1
        if "area" not in props:
            continue  # a guard test, not a row
        module = case.get("classname", "").rsplit(".", 1)[-1]
        name = case.get("name", "")
        base, _, param = name.partition("[")
        test_id = f"{module}.py::{base}"
        row = rows.setdefault(test_id, Row(test_id, order=n))
        row.area, row.attack, row.holds = props["area"], props["attack"], props["holds"]
        row.how = props.get("how", "")
        if param:
            row.cases.append(param.rstrip("]"))
        row.outcomes.append(result)
        row.seconds += float(case.get("time", "0") or 0)
        case_name = param.rstrip("]")
        for key, value in figures:
            row.figures.setdefault(key, []).append(f"{value} ({case_name})" if param else value)
    ordered = sorted(rows.values(), key=lambda r: (
        AREAS.index(r.area) if r.area in AREAS else len(AREAS), r.order))
    return ordered, totals


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: list[Row], totals: dict[str, int]) -> str:
    out = [
        f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped "
        f"({sum(totals.values())} test cases, {len(rows)} rows below).",
        "",
        "| Area | Fault or attack | How it is tested | What must hold | Result |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if len(r.cases) > 6:
            cases = f" x {len(r.cases)} cases"
        else:
            cases = f" [{', '.join(sorted(r.cases))}]" if r.cases else ""
        how = f"{r.how} (`{r.test_id}`{cases})"
        out.append(f"| {cell(r.area)} | {cell(r.attack)} | {cell(how)} | {cell(r.holds)} | "
                   f"{cell(r.result())} |")
    return "\n".join(out)


def write_doc(doc: Path, text: str) -> None:
    current = doc.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(current):
        raise SystemExit(f"{doc} has no {BEGIN} ... {END} markers")
    doc.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", current, count=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "reliability.md")
    parser.add_argument("--junit", type=Path, help="read this JUnit XML instead of running")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.junit is not None:
        rows, totals = read_rows(args.junit)
    else:
        fd, name = tempfile.mkstemp(suffix=".xml", prefix="reliability-")
        os.close(fd)
        junit = Path(name)
        try:
            status = run_pytest(junit, args.pytest_args)
            if status not in (0, 1) or junit.stat().st_size == 0:
                print(f"pytest did not run the suite (status {status})", file=sys.stderr)
                return 2
            rows, totals = read_rows(junit)
        finally:
            junit.unlink(missing_ok=True)
    write_doc(args.doc, table(rows, totals))
    print(f"{args.doc}: {len(rows)} rows; {totals}", file=sys.stderr)
    return 1 if totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
