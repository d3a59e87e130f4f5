"""``python -m bench [--quick|--tiny] [--out docs/benchmarks.md] [--no-write] [--only SUITE ...]``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from . import memory
from .report import Result, block, render, table_block, write_doc
from .timing import FULL, QUICK, TINY, Settings

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"

Suite = Callable[[Path, Settings], list[Result]]
#: A suite whose figures do not fit the ratio table: it returns its own markdown,
#: written between its own markers (``report.markers(name)``).
TableSuite = Callable[[Path, Settings], str]


def suites() -> dict[str, Suite]:
    from . import cli, peer, wasm

    return {"memory": memory.run, "peer": peer.run, "wasm": wasm.run, "cli": cli.run}


def table_suites() -> dict[str, TableSuite]:
    from . import (
        adapter,
        audit,
        console,
        eviction,
        history,
        langgraph_async,
        langgraph_pages,
        latency,
        lean,
        mcp,
        peer_pg,
        prefix,
        roundtrips,
        scaling,
        startup,
    )

    return {"lean": lean.table, "scaling": scaling.table, "latency": latency.run, "roundtrips": roundtrips.run,
            "peer_pg": peer_pg.table, "audit": audit.run, "console": console.run, "history": history.run,
            "langgraph": adapter.run, "langgraph_pages": langgraph_pages.table,
            "langgraph_async": langgraph_async.table,
            "eviction": eviction.table, "prefix": prefix.table, "mcp": mcp.run,
            "startup": startup.table}


def describe(settings: Settings) -> str:
    return (f"medians of {settings.rounds} interleaved rounds of {settings.iters} calls "
            f"({settings.cli_rounds} rounds for commands)")


def describe_tables(settings: Settings) -> str:
    return (f"{settings.loops} loops per latency process; per-call times are medians of "
            f"{settings.rounds} interleaved rounds of {settings.iters} calls")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, scales up to 10,000")
    parser.add_argument("--tiny", action="store_true",
                        help="a handful of calls on tiny agents: checks the harness, not speed")
    parser.add_argument("--out", type=Path, default=DOC, help="the markdown file to update")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--only", nargs="+", choices=sorted([*suites(), *table_suites()]),
                        help="run these suites")
    args = parser.parse_args(argv)
    settings = TINY if args.tiny else QUICK if args.quick else FULL
    chosen = [name for name in suites() if not args.only or name in args.only]
    results: list[Result] = []
    tables: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="rotifer-bench-") as tmp:
        # As root, contained genes run as nobody, who must pass through it.
        Path(tmp).chmod(0o711)
        for name in chosen:
            start = time.perf_counter()
            part = suites()[name](Path(tmp) / name, settings)
            print(f"bench: {name}: {len(part)} rows in {time.perf_counter() - start:.1f} s",
                  file=sys.stderr)
            results += part
        for name, table_suite in table_suites().items():
            if args.only and name not in args.only:
                continue
            start = time.perf_counter()
            tables[name] = table_suite(Path(tmp) / name, settings)
            print(f"bench: {name}: table in {time.perf_counter() - start:.1f} s",
                  file=sys.stderr)
    if chosen:
        print(render(results))
    for table in tables.values():
        print(table)
    if not args.no_write:
        # Only the blocks of the suites that ran: `--only latency` keeps the main table.
        if chosen:
            write_doc(args.out, block(results, describe(settings)))
        for name, table in tables.items():
            write_doc(args.out, table_block(name, table, describe_tables(settings)), name)
        print(f"bench: wrote {args.out}", file=sys.stderr)
    return 0  # a missed target is a finding, not a failure of the harness


if __name__ == "__main__":
    sys.exit(main())
