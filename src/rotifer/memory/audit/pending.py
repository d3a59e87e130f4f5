"""The agent's last numbered line in the log: is a killed change of it pending there?

A change appends its lines before it commits.  When its process is killed in
between, the lines stay in the log with nothing after them to say the change
never committed, and the agent's next change takes the same number.  That
change must write the killed one's ``rolled_back`` line *before* its own
lines: a ``rolled_back`` line naming N written after them (by ``audit
verify``, say) would follow the committed change N too.

The append (:mod:`.file`) holds the agent (its store transaction) and the
log's lock, so no other change of the agent is between its append and its
commit: if the agent's last numbered line in the log is one of change N --
the number being appended now, which the store has not counted -- and not a
``rolled_back`` line, that change was logged and never committed.  When the
log's last line is the agent's, the append knows that already; otherwise
:func:`earlier_line` looks for the agent's last numbered line backwards from
the end, a block at a time, by its bytes (a line is parsed only when it is of
change N).  What the process appended itself it need not read: :class:`Known`
remembers, for the file it keeps open, each agent's last numbered line it
wrote since another process last appended, so interleaved changes of several
agents in one process search nothing.  Lines
of the agent without a number (a refusal before any change, an export) are
passed over.  How far back it looks is bounded (:data:`SEARCH_BYTES`: an idle
agent in a busy log); past that, or past the start of the live file, the
killed change's line is left to ``audit verify``, whose late line the replay
reads as the killed change's (:mod:`.replay`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring as quote
from typing import Any

from .actions import ROLLED_BACK
from .text import rolled_back_line

#: How many bytes before the end of the live file are searched.
SEARCH_BYTES = 16 << 20
_FIRST_BLOCK = 4096
_BLOCK = 1 << 16


#: What the phantom check needs of a line: (agent, seq, action, epoch).
Mark = tuple[Any, Any, Any, Any]


def line_mark(line: Mapping[str, Any]) -> Mark:
    return line.get("agent"), line.get("seq"), line.get("action"), line.get("epoch", "")


def parsed_mark(last: bytes, seq: int) -> Mark | None:
    """The mark of a line read from the file, if it can be change ``seq``'s."""
    if b'"seq":' + str(seq).encode() + b"," not in last:
        return None  # cheap: most last lines are not the same change number
    try:
        before = json.loads(last)
    except ValueError:
        return None
    return line_mark(before) if isinstance(before, dict) else None


def phantom_line(last: Mark | None, first: Mapping[str, Any]) -> dict[str, Any] | None:
    """A ``rolled_back`` line when the log's last line is a change of the same
    agent numbered like the one being appended: that change was logged and
    never committed (its writer died; the caller holds the agent, so nobody
    else is between appending and committing)."""
    seq, agent = first.get("seq"), first.get("agent")
    if last is None or seq is None or agent is None or first.get("action") == ROLLED_BACK:
        return None  # a rolled_back line says so itself already
    if last[0] != agent or last[1] != seq or last[2] == ROLLED_BACK \
            or last[3] != first.get("epoch", ""):
        return None  # another change, or the same number in another memory of the agent
    return rolled_back_line(first["ts"], agent, seq,
                            "found at the next change: its process ended before the commit",
                            epoch=last[3])


class Known:
    """What a process knows of the file it keeps open without reading it: from
    which byte on every line is its own (``ours_from``; -1: none known), and each
    agent's last numbered line among those.  An agent with a line there needs no
    search; one without needs one only before ``ours_from``."""

    __slots__ = ("last", "ours_from")

    def __init__(self) -> None:
        self.ours_from = -1
        self.last: dict[str, Mapping[str, Any]] = {}

    def appending(self, start: int, foreign: bool) -> None:
        """An append at byte ``start``; ``foreign``: others appended since ours."""
        if foreign:
            self.ours_from = start
            self.last.clear()
        elif self.ours_from < 0:
            self.ours_from = start

    def wrote(self, lines: Sequence[Mapping[str, Any]]) -> None:
        for line in lines:
            agent = line.get("agent")
            if isinstance(agent, str) and isinstance(line.get("seq"), int):
                self.last[agent] = line


def earlier_line(fd: int, end: int, agent: str, seq: int, known: Known | None = None,
                 limit: int = SEARCH_BYTES) -> Mapping[str, Any] | None:
    """The agent's last numbered line in the file ``fd`` before byte ``end``, if it
    is one of change ``seq`` (else ``None``: not found within ``limit`` bytes, or
    of another change).  ``known``: what this process knows of the file."""
    if known is not None and known.ours_from >= 0:
        if agent in known.last:
            line = known.last[agent]
            return line if line.get("seq") == seq else None
        end = known.ours_from  # the lines after it are ours, none the agent's
    marker = b'"agent":' + quote(agent).encode("utf-8", "surrogatepass")
    numbered = b'"seq":'
    wanted = numbered + str(seq).encode() + b","
    pos = end
    carry = b""  # the start of the line the block after began in
    block = _FIRST_BLOCK
    while pos > 0 and end - pos < limit:
        size = min(block, pos)
        pos -= size
        block = _BLOCK
        data = os.pread(fd, size, pos) + carry
        cut = 0 if pos == 0 else data.find(b"\n") + 1
        if cut == 0 and pos != 0:
            carry = data  # all of it one line, begun further back
            continue
        carry, body = data[:cut], data[cut:]
        at = len(body)
        while (hit := body.rfind(marker, 0, at)) >= 0:
            first = body.rfind(b"\n", 0, hit) + 1
            last = body.find(b"\n", hit)
            text = body[first:last if last >= 0 else len(body)]
            at = first
            if numbered not in text:
                continue  # a line of the agent outside any change (a refusal, an export)
            if wanted not in text:
                return None  # its last numbered line is of another change
            try:
                line = json.loads(text)
            except ValueError:
                return None  # not a line to judge (a torn one is cut off first)
            return line if isinstance(line, dict) and line.get("agent") == agent \
                and line.get("seq") == seq else None
    return None
