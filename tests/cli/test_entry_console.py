"""The console script's end (rotifer.cli.entry.console): what the
interpreter's exit does that matters -- wait for non-daemon threads, run the
atexit handlers, flush stdout and stderr, the status -- then ``os._exit``
without the teardown of every module (issue 33: ~10% of a command's
instructions).  Run in real processes, with ``main`` replaced by a probe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Output buffered, as a console script's is when it is not asked otherwise.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}

PROBE = """
import atexit, os, sys, threading, time
import rotifer.cli.entry as entry
out = sys.argv[1]
def note(text):
    with open(out, "a") as f:
        f.write(text + "\\n")
class Torn:
    def __del__(self, out=out, open=open):
        with open(out, "a") as f:
            f.write("torn down\\n")
kept = Torn()  # freed only by the interpreter's teardown
def main():
    atexit.register(note, "atexit ran")
    def late():
        time.sleep(0.2)
        note("thread finished")
    threading.Thread(target=late).start()
    sys.stdout.write("partial line, not flushed")
    sys.stderr.write("on stderr")
    sys.exit(int(sys.argv[2]))
entry.main = main
entry.console() if sys.argv[3] == "console" else entry.main()
"""


@pytest.mark.parametrize("status", [0, 1, 130])
def test_the_console_script_s_end_keeps_what_the_interpreter_s_exit_does(
        tmp_path: Path, status: int) -> None:
    notes = tmp_path / "notes"
    done = subprocess.run([sys.executable, "-c", PROBE, str(notes), str(status), "console"],
                          capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == status
    assert done.stdout == "partial line, not flushed"
    assert done.stderr == "on stderr"
    # The thread first (the interpreter waits for it before atexit), then atexit;
    # the teardown is skipped: that is the speed.
    assert notes.read_text().splitlines() == ["thread finished", "atexit ran"]


def test_with_the_interpreter_s_own_exit_the_teardown_runs(tmp_path: Path) -> None:
    """The same probe through the interpreter's exit: the teardown runs (so the
    test above sees the difference)."""
    notes = tmp_path / "notes"
    done = subprocess.run([sys.executable, "-c", PROBE, str(notes), "1", "main"],
                          capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 1
    assert notes.read_text().splitlines() == ["thread finished", "atexit ran", "torn down"]


def test_a_closed_stdout_is_reported_as_the_interpreter_does(tmp_path: Path) -> None:
    """stdout a pipe its reader closed: the flush fails, and the interpreter's
    own exit reports it as it always has (status 120), no ``os._exit`` hiding it."""
    probe = ("import sys, rotifer.cli.entry as entry\n"
             "def main():\n    sys.stdout.write('x' * 100)\n    sys.exit(0)\n"
             "entry.main = main\nentry.console()\n")
    proc = subprocess.Popen([sys.executable, "-c", probe], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 120, err
    assert "BrokenPipeError" in err
