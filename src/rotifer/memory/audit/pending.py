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
:func:`last_numbered` looks for the agent's last line backwards from the end,
a block at a time, parsing only the lines that hold the agent's name.  Lines
of the agent without a number (a refusal before any change, an export) are
passed over.  How far back it looks is bounded (:data:`SEARCH_BYTES`: an idle
agent in a busy log); past that, or past the start of the live file, the
killed change's line is left to ``audit verify``, whose late line the replay
reads as the killed change's (:mod:`.replay`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from json.encoder import encode_basestring as quote
from typing import Any

#: How many bytes before the end of the live file are searched.
SEARCH_BYTES = 16 << 20
_FIRST_BLOCK = 4096
_BLOCK = 1 << 16


def last_numbered(fd: int, end: int, agent: str,
                  limit: int = SEARCH_BYTES) -> Mapping[str, Any] | None:
    """The last line of ``agent`` that carries a ``seq`` in the file ``fd`` before
    byte ``end`` (which ends a line), if one is within ``limit`` bytes of it."""
    marker = quote(agent).encode("utf-8", "surrogatepass")
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
            at = first
            try:
                line = json.loads(body[first:last if last >= 0 else len(body)])
            except ValueError:
                continue  # not a line of this agent's to judge (a torn one is cut off first)
            if isinstance(line, dict) and line.get("agent") == agent \
                    and isinstance(line.get("seq"), int):
                return line
    return None
