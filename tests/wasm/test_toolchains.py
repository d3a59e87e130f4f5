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
