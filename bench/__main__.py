"""``python -m bench [--quick|--tiny] [--out docs/benchmarks.md] [--no-write] [--only SUITE ...]``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from . import memory
from .report import Result, block, render, write_doc
from .timing import FULL, QUICK, TINY, Settings

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"

Suite = Callable[[Path, Settings], list[Result]]


def suites() -> dict[str, Suite]:
    from . import cli, peer, wasm

    return {"memory": memory.run, "peer": peer.run, "wasm": wasm.run, "cli": cli.run}


def describe(settings: Settings) -> str:
    return (f"medians of {settings.rounds} interleaved rounds of {settings.iters} calls "
            f"({settings.cli_rounds} rounds for commands)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, scales up to 10,000")
    parser.add_argument("--tiny", action="store_true",
                        help="a handful of calls on tiny agents: checks the harness, not speed")
    parser.add_argument("--out", type=Path, default=DOC, help="the markdown file to update")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--only", nargs="+", choices=sorted(suites()), help="run these suites")
    args = parser.parse_args(argv)
    settings = TINY if args.tiny else QUICK if args.quick else FULL
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="rotifer-bench-") as tmp:
        for name, suite in suites().items():
            if args.only and name not in args.only:
                continue
            start = time.perf_counter()
            part = suite(Path(tmp) / name, settings)
            print(f"bench: {name}: {len(part)} rows in {time.perf_counter() - start:.1f} s",
                  file=sys.stderr)
            results += part
    print(render(results))
    if not args.no_write:
        write_doc(args.out, block(results, describe(settings)))
        print(f"bench: wrote {args.out}", file=sys.stderr)
    return 0  # a missed target is a finding, not a failure of the harness


if __name__ == "__main__":
    sys.exit(main())
