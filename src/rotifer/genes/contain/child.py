"""A gene's child process as the parent holds it: started here with
``subprocess`` (:class:`Started`, by :func:`popen`), or forked by the Python
fork server (:class:`rotifer.genes.contain.forkserver.ServedChild`); the
channel (:mod:`.channel`) talks to either through :class:`Child`.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found,unused-ignore]  # speed: not signal's enums
import contextlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from rotifer.genes.errors import GeneUnavailable

if TYPE_CHECKING:  # speed: subprocess where a child is started with it (Node)
    import subprocess


class Child(Protocol):
    """The child at the other end: a process this one started
    (:class:`Started`), or one the Python fork server forked for it
    (:class:`rotifer.genes.contain.forkserver.ServedChild`)."""

    @property
    def pid(self) -> int: ...

    def wait(self, timeout: float | None = None, status: bool = True) -> int | None:
        """Its exit status once it has ended (negative: a signal; None: unknown,
        or not asked for: ``status`` False); ``subprocess.TimeoutExpired`` when
        it has not within ``timeout``."""

    def kill(self) -> None:
        """SIGKILL its process group: the child and whatever it started."""

    def release(self) -> None:
        """The run is over (after :meth:`kill` and :meth:`wait`)."""


#: Starts the child given (its input pipe, its message pipe, its output pipe).
Spawn = Callable[[int, int, int], Child]


class Started:
    """A child started here with ``subprocess.Popen``, leader of its own session."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float | None = None, status: bool = True) -> int | None:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """The group's id is the child's pid, which POSIX does not hand to another
        process while the group has members (and this process has not reaped
        the child); once it has none, this finds nothing (ESRCH) and does nothing."""
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, _signal.SIGKILL)

    def release(self) -> None:
        pass


def popen(argv: Sequence[str], *, name: str, what: str, cwd: str,
          env: dict[str, str] | None, preexec: Callable[[], None] | None,
          keep_stdout: bool) -> Spawn:
    """Start ``argv`` (the two message descriptors' numbers appended) in a
    session of its own, confined by ``preexec`` between fork and exec."""

    def spawn(to_child_r: int, from_child_w: int, err_w: int) -> Child:
        import subprocess

        try:
            return Started(subprocess.Popen(
                [*argv, str(to_child_r), str(from_child_w)],
                stdin=subprocess.DEVNULL,
                stdout=err_w if keep_stdout else subprocess.DEVNULL, stderr=err_w,
                pass_fds=(to_child_r, from_child_w), cwd=cwd, env=env,
                start_new_session=True, preexec_fn=preexec,
            ))
        except (OSError, subprocess.SubprocessError) as exc:
            if preexec is not None and isinstance(exc, subprocess.SubprocessError):
                raise GeneUnavailable(f"gene '{name}': the {what} process could not be "
                                      "confined; run `rotifer doctor` to see what this "
                                      "machine can enforce") from None
            raise GeneUnavailable(f"cannot start {what} ({argv[0]}): {exc}") from None

    return spawn
