"""``rotifer doctor``: what this machine can enforce on a Python or Node gene.

Each promise is answered from the kernel's Landlock ABI and from a real
probe: a child confined exactly as a gene would be tries to open a socket,
read ``/etc/passwd`` and start a process, and must be refused each time.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

from . import kernel
from .sandbox import CONTAINED, missing, python_read_paths, sandbox

_PROBE = """
import os, socket, sys
def refused(f):
    try:
        f()
    except OSError as e:
        return e.errno in (1, 13)
    return False
print(refused(lambda: socket.socket(socket.AF_UNIX)),
      refused(lambda: open("/etc/passwd").close()), refused(os.fork))
"""


@dataclass(frozen=True)
class Promise:
    what: str
    enforced: bool
    why: str


def _probe() -> tuple[bool, bool, bool] | str:
    """(sockets refused, files outside refused, processes refused), or why the
    probe could not run."""
    try:
        with sandbox("doctor", python_read_paths(), CONTAINED) as box:
            done = subprocess.run([sys.executable, "-S", "-E", "-c", _PROBE],
                                  env=box.env, cwd=box.temp, capture_output=True, text=True,
                                  timeout=60, preexec_fn=box.plan.apply, check=False)
    except Exception as exc:  # doctor reports whatever went wrong
        return str(exc)
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 3:
        return f"the confined probe failed: {done.stderr.strip()[-300:]}"
    sock, files, procs = (w == "True" for w in words)
    return sock, files, procs


def promises() -> tuple[int, list[Promise], list[str]]:
    """(Landlock ABI, each promise, what is missing to contain genes)."""
    abi = kernel.landlock_abi()
    problems = missing()
    probe = _probe() if not problems else "containment is not available"
    probed = probe if isinstance(probe, tuple) else (False, False, False)
    reason = "" if isinstance(probe, tuple) else f" ({probe})"

    def need(level: int) -> tuple[bool, str]:
        return abi >= level, f"Landlock ABI {level}+ (this kernel: {abi})"

    rows = [
        ("read only the runtime and the gene's folder", *need(1)),
        ("write only a private temporary folder", *need(1)),
        ("no TCP bind or connect (but granted ports)", *need(4)),
        ("no signal to processes outside the gene", *need(6)),
        ("no abstract UNIX socket outside the gene", *need(6)),
        ("no new socket of any family (seccomp)", probed[0],
         "seccomp filter, probed" + reason),
        ("no new process, ptrace, bpf, io_uring, mount, ... (seccomp)", probed[2],
         "seccomp filter, probed" + reason),
        ("files outside refused in a confined child", probed[1], "probed" + reason),
        ("no_new_privs, rlimits, scrubbed environment, no inherited descriptor", True,
         "always (POSIX and Linux 3.5+)"),
    ]
    return abi, [Promise(w, bool(e), y) for w, e, y in rows], problems

