"""The toolchain helper's rule: a missing toolchain skips a test locally and
fails it under CI (where .ci/run installs every toolchain)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .toolchains import require


def test_a_found_tool_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert require("clang", Path("/usr/bin/clang")) == Path("/usr/bin/clang")


def test_a_missing_tool_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="clang is not installed"):
        require("clang", None)


def test_a_missing_tool_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"clang is not installed .*CI must build"):
        require("clang", None)


@pytest.mark.slow  # ~9 s: a pytest run of its own
def test_a_gene_test_run_in_a_thread_skips_cleanly_without_clang(tmp_path: Path) -> None:
    """With no clang on PATH (and CI unset) the test that runs a C gene in a
    thread is skipped, not failed: the gene is built (and the skip raised) before
    the thread starts -- a skip raised inside it is a failure.  A real pytest run
    in a subprocess."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = str(tmp_path)  # an empty folder: no clang, no wasm-ld
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         "-W", "error::pytest.PytestUnhandledThreadExceptionWarning",
         "tests/wasm/test_toolchain_genes.py::"
         "test_a_command_gene_that_sleeps_does_not_hold_the_host"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-3000:]
    assert summary.startswith("1 skipped") and "failed" not in summary, summary
