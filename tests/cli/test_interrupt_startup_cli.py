"""Ctrl-C at any moment of a command's start-up: one ``INTERRUPTED`` line and
status 130 (or, before Python's own handler is installed or once the command
is over, the plain end by the signal), never a ``KeyboardInterrupt`` traceback
and never a blank line before ``INTERRUPTED``.

Real SIGINTs at random moments against the real console script.  The moments
are spread over the time one whole run of the command takes here (measured in
the same test), so the test does not depend on the machine's speed.  What runs
before rotifer's entry function belongs to Python -- the interpreter's start-up
(``site``) and the console script's import of ``rotifer.cli.entry`` -- and a
traceback there is tolerated (and counted); one through rotifer's code is not.
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import time
from pathlib import Path

from .helpers import clean_env, init_project, rotifer_command

#: A frame in the package (``src/rotifer/...``) or the console script, and its line.
FRAME = re.compile(r'File "([^"]*(?:/bin/rotifer|/rotifer/[^"]+\.py))", line \d+.*\n((?: {4}.*)?)')


#: The console script's lines before it calls the entry function.
SCRIPT_START = re.compile(r"^\s*(import \w+|from rotifer\.cli\.entry import (?:main|console))?\s*$")


def _before_rotifer_runs(err: str) -> bool:
    """A traceback raised before rotifer's entry function ran: the script was at
    its imports, and no module of rotifer but a package's ``__init__.py`` (a
    docstring and a version) was executing."""
    for path, line in FRAME.findall(err):
        if path.endswith("/bin/rotifer"):
            if not SCRIPT_START.match(line):
                return False
        elif not path.endswith("__init__.py"):
            return False
    return True


def _one(root: Path, delay: float) -> tuple[int, str, str]:
    proc = subprocess.Popen([*rotifer_command(), "agent", "list"], cwd=root, env=clean_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def test_ctrl_c_during_start_up_never_prints_a_traceback(tmp_path: Path) -> None:
    root = init_project(tmp_path / "proj")
    started = time.monotonic()
    ok = subprocess.run([*rotifer_command(), "agent", "list"], cwd=root, env=clean_env(),
                        capture_output=True, text=True, timeout=120, check=True)
    whole = time.monotonic() - started
    assert ok.stdout.startswith("No agents"), ok.stdout
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    tries = 12
    seen: dict[str, int] = {}
    for i in range(tries):
        # One moment in each twelfth of the run, at random within it.
        delay = whole * (i + rng.random()) / tries
        status, out, err = _one(root, delay)
        where = (seed, round(delay, 4), status, out, err)
        if "Traceback" in err:  # only before rotifer's code runs
            assert _before_rotifer_runs(err), where
            seen["python start-up"] = seen.get("python start-up", 0) + 1
            continue
        assert "\n\n" not in "\n" + err, where  # no blank line, before INTERRUPTED or anywhere
        if status == 130:
            assert err.splitlines() == ["INTERRUPTED: interrupted"], where
            seen["interrupted"] = seen.get("interrupted", 0) + 1
        else:
            assert status in (0, -signal.SIGINT), where
            assert err == "", where
            seen[str(status)] = seen.get(str(status), 0) + 1
    assert seen.get("interrupted", 0) >= 1, seen  # the tries reached rotifer's code
