"""Grant (rotifer.genes.contain.sandbox) is a plain class for start-up speed
(issue 33); it keeps what the frozen dataclass it was promised: defaults,
keywords, comparison and hashing by its fields, no assignment.  And the run's
temporary folder, made without tempfile, is where tempfile would make it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rotifer.genes.contain.sandbox import (
    CONTAINED,
    DEFAULT_MEMORY_MIB,
    DEFAULT_TASKS,
    DEFAULT_TEMP_MIB,
    Grant,
)


def test_a_grant_keeps_the_dataclass_s_promises() -> None:
    assert (CONTAINED.trusted, CONTAINED.tcp_ports, CONTAINED.memory_mib, CONTAINED.tasks,
            CONTAINED.temp_mib) == (False, (), DEFAULT_MEMORY_MIB, DEFAULT_TASKS,
                                    DEFAULT_TEMP_MIB)
    assert Grant() == CONTAINED and hash(Grant()) == hash(CONTAINED)
    granted = Grant(trusted=True, tcp_ports=(443,), memory_mib=64, tasks=8, temp_mib=16)
    assert granted == Grant(True, (443,), 64, 8, 16)
    assert granted != CONTAINED and granted != (True, (443,), 64, 8, 16)
    assert len({granted, Grant(True, (443,), 64, 8, 16), CONTAINED}) == 2
    assert repr(granted) == ("Grant(trusted=True, tcp_ports=(443,), memory_mib=64, tasks=8, "
                             "temp_mib=16)")
    with pytest.raises(AttributeError):
        granted.trusted = False
    with pytest.raises(AttributeError):
        del granted.tasks
    with pytest.raises(AttributeError):
        granted.other = 1
    assert granted.trusted is True


PROBE = """
import json, os, sys
from rotifer.genes.contain.sandbox import _private_folder, _remove
assert "tempfile" not in sys.modules
made = _private_folder("rotifer-probe-")
import tempfile
mode = os.stat(made).st_mode & 0o777
open(os.path.join(made, "left"), "w").close()  # a gene left a file: rmtree's turn
_remove(made)
print(json.dumps([os.path.dirname(made), tempfile.gettempdir(), mode, os.path.exists(made)]))
"""


@pytest.mark.parametrize("tmpdir", ["unset", "here", "missing"])
def test_a_run_s_folder_is_where_tempfile_would_make_it(tmp_path: Path, tmpdir: str) -> None:
    """The run's temporary folder is made without importing tempfile (speed),
    in the folder tempfile would choose for the same environment, 0700; it is
    removed with what was left in it."""
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    if tmpdir == "here":
        env["TMPDIR"] = str(tmp_path)
    elif tmpdir == "missing":
        env["TMPDIR"] = str(tmp_path / "missing")
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    folder, tempfile_s, mode, left = json.loads(done.stdout)
    assert folder == tempfile_s and mode == 0o700 and left is False
    if tmpdir == "here":
        assert folder == str(tmp_path)
