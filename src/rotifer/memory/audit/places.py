"""Where an append's lines went: the history index's places and digests.

:meth:`.file.LogFile.append` fills one of these when asked -- a list of
:data:`Placed` tuples, or a :class:`Places` of columns for a change of many
lines (an eviction's) -- from the lengths and SHA-256 digests
:func:`.text.chain` made while chaining the lines, so no line is hashed or
measured twice.  :mod:`.index` turns them into index rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from typing import Any

#: Where each appended line went: (its dict, file number, byte offset, length with
#: its newline, its SHA-256), in order; filled by :meth:`LogFile.append` when asked.
Placed = list[tuple[Mapping[str, Any], int, int, int, bytes]]


@dataclass(slots=True)
class Places:
    """Where one append's lines went, by column instead of a tuple per line
    (:data:`Placed`): for a change of many lines whose index rows are made from
    columns (an eviction's: ``audit.index.rows_with``).  Filled by
    :meth:`LogFile.append` when passed instead of a list; ``lines`` are the
    lines written (a phantom's ``rolled_back`` line first, if there was one)."""

    lines: Sequence[Mapping[str, Any]] = ()
    number: int = 0
    #: Each line's byte offset in file ``number``.
    offsets: list[int] = field(default_factory=list)
    #: Each line's length with its newline, and its SHA-256.
    lengths: list[int] = field(default_factory=list)
    digests: list[bytes] = field(default_factory=list)

    def placed(self, start: int = 0, end: int | None = None) -> Placed:
        """Lines ``start`` to ``end`` as :data:`Placed` tuples."""
        window = slice(start, end)
        return list(zip(self.lines[window], repeat(self.number), self.offsets[window],
                        self.lengths[window], self.digests[window]))


def place(placed: Placed | Places, lines: Sequence[Mapping[str, Any]], total: int,
           number: int, offset: int, digests: list[bytes], lengths: list[int]) -> None:
    """Record where each of ``lines`` (written as ``total`` bytes at ``offset``
    of file ``number``) went and its SHA-256 (the digest the next line's
    ``prev`` names): ``digests`` and ``lengths`` as :func:`.text.chain` made
    them (each line's place its predecessors' lengths on from ``offset``: the
    tuples, or the columns of :class:`Places`, made with no Python step per line)."""
    if len(lengths) != len(lines) or len(digests) != len(lines) or sum(lengths) != total:
        raise ValueError("the lines placed are not the bytes written")
    if isinstance(placed, Places):
        placed.lines, placed.number, placed.lengths, placed.digests = lines, number, lengths, digests
        # One line (a write's): its offset as it is, no accumulate.
        placed.offsets = [offset] if len(lengths) == 1 \
            else list(accumulate(lengths[:-1], initial=offset))
        return
    offsets = accumulate(lengths[:-1], initial=offset)
    placed += zip(lines, repeat(number, len(lines)), offsets, lengths, digests, strict=True)
