"""Run LangGraph's own store test suites against rotifer's LangGraph store.

    python scripts/langgraph_suites.py [--backend sqlite|postgres|both] [-- PYTEST ARGS]

Fetches the source distributions of the pinned langgraph-checkpoint,
langgraph-checkpoint-sqlite and langgraph-checkpoint-postgres with pip (their
versions are the installed ones, pinned in constraints.txt), unpacks their
``tests/`` under ``.cache/langgraph-suites/`` and runs the store test files
there (sync and async) with pytest and the plugin
``scripts/langgraph_upstream/rotifer_upstream.py``, which swaps the store's
construction for a RotiferStore and leaves out the tests it lists, each with
its reason -- on rotifer's SQLite memory, and on PostgreSQL (a throwaway
server, as the test suite starts one; or ``ROTIFER_TEST_PG_URL``).
checkpoint-postgres's fixtures create a database per store on that server in
both passes (docs/langgraph.md says what the plugin stands in for).  Needs
pytest-asyncio and pytest-mock (the dev extra).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "langgraph-suites"
SUITES = {
    "langgraph-checkpoint": ["tests/test_store.py"],
    "langgraph-checkpoint-sqlite": ["tests/test_store.py", "tests/test_async_store.py"],
    "langgraph-checkpoint-postgres": ["tests/test_store.py", "tests/test_async_store.py"],
}


def unpacked(package: str) -> Path:
    version = importlib.metadata.version(package)
    name = package.replace("-", "_") + "-" + version
    where = CACHE / name
    if where.is_dir():
        return where
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--no-binary", ":all:", "-d", str(CACHE), f"{package}=={version}"],
                   check=True)
    with tarfile.open(CACHE / f"{name}.tar.gz") as archive:
        archive.extractall(CACHE, filter="data")
    return where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "scripts" / "langgraph_upstream"), os.environ.get("PYTHONPATH", "")]))
    env.pop("ROTIFER_UPSTREAM_PG_URL", None)
    suites = [(package, unpacked(package), files) for package, files in SUITES.items()]
    failed = 0
    with ExitStack() as stack:
        # checkpoint-postgres's fixtures make a database per store on a server,
        # whichever memory the stores stand on: one throwaway server for both.
        try:
            server = stack.enter_context(postgres())
        except SystemExit:
            if args.backend != "sqlite":
                raise
            print("== no PostgreSQL: langgraph-checkpoint-postgres's suites are not run",
                  flush=True)
            server = ""
            suites = [suite for suite in suites if "postgres" not in suite[0]]
        env["ROTIFER_UPSTREAM_FIXTURE_PG_URL"] = server
        for backend in ("sqlite", "postgres"):
            if args.backend not in (backend, "both"):
                continue
            if backend == "postgres":
                env["ROTIFER_UPSTREAM_PG_URL"] = server
            for package, where, files in suites:
                print(f"== {package} on rotifer's {backend} memory: {' '.join(files)}",
                      flush=True)
                failed |= subprocess.run(
                    [sys.executable, "-m", "pytest", "-p", "rotifer_upstream", "-p", "asyncio",
                     "-o", "asyncio_mode=auto", "-o",
                     "asyncio_default_fixture_loop_scope=function", "-p", "no:cacheprovider",
                     "-q", *files, *args.pytest_args], cwd=where, env=env).returncode
    return 1 if failed else 0


@contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL for the memory: ROTIFER_TEST_PG_URL, or a throwaway server."""
    given = os.environ.get("ROTIFER_TEST_PG_URL")
    if given:
        yield given
        return
    sys.path.insert(0, str(ROOT))
    from tests.pg_servers import PgServer, find_pg_bindir

    bindir = find_pg_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL found: install it or set ROTIFER_TEST_PG_URL")
    server = PgServer(bindir)
    try:
        server.start()
        yield server.url()
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
