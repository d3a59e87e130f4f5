"""The temporary memories of ``rotifer test``: whose they are, and which are
left over from a test run that died.

A test run's memory is the agent ``rotifer-test:GENE:OWNER:HEX``.  OWNER says
which process made it, as ``HOST/BOOT/PID/START``: the host name, the first
eight characters of the kernel's boot id, the process id and the process's
start time in clock ticks since boot (``/proc/PID/stat``).  BOOT and START are
``-`` where there is no ``/proc``.  ``:`` cannot occur in an agent or gene
name, so a test memory never collides with a real agent's.

A run drops its memory when it ends, also on Ctrl-C and SIGTERM (the CLI turns
SIGTERM and SIGHUP into an exception).  A run killed outright (SIGKILL, a
power cut) cannot, so each ``rotifer test`` first removes the memories whose
owner is certainly gone:

* same host, other boot id: the machine restarted since;
* same host and boot: no process with that id, or one with another start
  time (the id was reused), or a zombie;
* where there is no ``/proc``: no process with that id.

Anything else is kept: a live run (another ``rotifer test`` in the same
project, or a thread of this process) must never lose its memory, and a run
on another host that shares the store (PostgreSQL) cannot be judged from here.
Memories named in the older ``rotifer-test:GENE:HEX`` form carry no owner
and are kept too.
"""

from __future__ import annotations

import functools
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from rotifer.memory import MemoryStore

PREFIX = "rotifer-test:"
_UNKNOWN = "-"
_PROC = Path("/proc")


@dataclass(frozen=True)
class Owner:
    """The process a test memory belongs to."""

    host: str
    boot: str
    pid: int
    start: str

    def __str__(self) -> str:
        return f"{self.host}/{self.boot}/{self.pid}/{self.start}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        parts = text.split("/")
        if len(parts) != 4 or not parts[2].isdigit():
            return None
        host, boot, pid, start = parts
        return cls(host=host, boot=boot, pid=int(pid), start=start)


def _host() -> str:
    # Host names hold no "/" or ":"; replaced all the same, the id must parse.
    return socket.gethostname().replace("/", "_").replace(":", "_") or "localhost"


@functools.cache
def _boot_id() -> str:
    try:
        text = (_PROC / "sys" / "kernel" / "random" / "boot_id").read_text()
    except OSError:
        return _UNKNOWN
    return text.strip().replace("-", "")[:8] or _UNKNOWN


class _Stat(NamedTuple):
    """What ``/proc/PID/stat`` says of a process that matters here."""

    state: str
    #: Its start time in clock ticks since boot.
    start: str


def _stat(pid: int) -> _Stat | None:
    """Process ``pid``'s state and start time from ``/proc``; None if there is none."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and ")", so split after
    # its last ")"; starttime is field 22, the 20th after comm.
    fields = text[text.rindex(")") + 2:].split()
    return _Stat(state=fields[0], start=fields[19])


def current_owner() -> Owner:
    """This process, as a test memory names it."""
    stat = _stat(os.getpid()) if _boot_id() != _UNKNOWN else None
    return Owner(host=_host(), boot=_boot_id(), pid=os.getpid(),
                 start=stat.start if stat else _UNKNOWN)


def scratch_agent(gene: str) -> str:
    """A new agent id for a test run of ``gene`` in this process."""
    return f"{PREFIX}{gene}:{current_owner()}:{uuid.uuid4().hex}"


def owner_of(agent_id: str) -> Owner | None:
    """The owner named in a test memory's id (None: not one, or the older form)."""
    if not agent_id.startswith(PREFIX):
        return None
    parts = agent_id[len(PREFIX):].split(":")
    if len(parts) != 3:
        return None
    _gene, owner, _hex = parts
    return Owner.parse(owner)


def is_gone(owner: Owner, me: Owner | None = None) -> bool:
    """Whether ``owner`` has certainly exited (see the module's rules)."""
    me = me or current_owner()
    if owner.host != me.host or owner.pid <= 0:
        return False
    if owner.boot != me.boot:
        return _UNKNOWN not in (owner.boot, me.boot)
    if owner.boot != _UNKNOWN:
        stat = _stat(owner.pid)
        return stat is None or stat.state in ("Z", "X") or stat.start != owner.start
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, owned by someone else
        return False
    return False


def sweep(store: MemoryStore) -> list[str]:
    """Drop the test memories in ``store`` whose run has died; the ids dropped."""
    me = current_owner()
    dropped: list[str] = []
    for agent_id in store.agents():
        owner = owner_of(agent_id)
        if owner is not None and is_gone(owner, me):
            store.drop_agent(agent_id)  # a no-op if another run dropped it first
            dropped.append(agent_id)
    return dropped


__all__ = ["PREFIX", "Owner", "current_owner", "is_gone", "owner_of", "scratch_agent", "sweep"]
