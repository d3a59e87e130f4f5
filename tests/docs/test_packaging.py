"""pyproject.toml states its license the way current setuptools wants it, so
installing rotifer prints no deprecation warning about it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_license_is_an_spdx_string_and_setuptools_reads_it() -> None:
    doc = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    # A table ({text = "MIT"}) makes every `pip install` warn that it is deprecated.
    assert doc["project"]["license"] == "MIT"
    # The SPDX string form needs setuptools 77 or newer to build.
    requires = doc["build-system"]["requires"]
    setuptools = [r for r in requires if re.match(r"setuptools\b", r)]
    assert len(setuptools) == 1
    found = re.fullmatch(r"setuptools\s*>=\s*(\d+)(\.\d+)*", setuptools[0])
    assert found is not None and int(found.group(1)) >= 77, setuptools
