"""An audit line as text: its JSON, and the hash chain that links the lines.

:mod:`rotifer.memory.audit` says what the lines mean and
:mod:`rotifer.memory.audit.file` puts them in the file; this module is the
bytes in between.  A line is compact JSON (``ensure_ascii=False``, no spaces)
with ``"prev"`` spliced in as its last field: the hex SHA-256 of the line
before it.
"""

from __future__ import annotations

import functools
import json
from binascii import hexlify
from collections.abc import Iterable, Mapping, Sequence
from hashlib import sha256
from json.encoder import encode_basestring as quote  # the escaping ENCODER uses for strings
from typing import Any

from .actions import ROLLED_BACK

# One encoder for every line: json.dumps with non-default options builds a
# new JSONEncoder on each call, which costs more than encoding a line.
ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

#: The fields every line starts with, in this order (see :func:`line_text`).
HEAD = ("ts", "agent", "action", "key", "category", "actor", "bytes", "entryId")


#: ``quote`` of a string a line repeats from change to change, cached (see
#: :func:`line_text`; a hit costs a quarter of quoting 64 characters).
quoted = functools.lru_cache(maxsize=4096)(quote)


def json_value(value: Any) -> str:
    """``ENCODER.encode(value)``, with the common cases done without the encoder."""
    kind = value.__class__
    if kind is str:
        return quote(value)
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)
    return ENCODER.encode(value)


def line_text(ts: str, agent: str | None, action: str, key: str | None,
              category: str | None, actor: str | None, nbytes: int, entry: str | None,
              extra: Mapping[str, Any], seq: int | None, epoch: str = "") -> str:
    """The JSON of the line ``{HEAD fields..., **extra, "epoch": epoch, "seq": seq}``
    (no ``epoch`` if empty, no ``seq`` if ``None``), byte for byte what
    ``ENCODER.encode`` makes of that dict.

    Built from a template because every change writes at least one line and
    an eviction one per victim: the generic encoder takes about four times as
    long (its per-call setup and per-field dispatch).  The HEAD fields are
    strings or ``None`` (``nbytes`` an int) as the store makes them; anything
    else goes to the encoder.  ``extra`` must not repeat a HEAD field."""
    if nbytes.__class__ is not int:
        return ENCODER.encode(audit_line(ts, agent, action, key, category, actor, nbytes, entry,
                                         extra, seq, epoch))
    try:
        # One f-string (one allocation, not one per ``+``); an exact int as
        # ``{n}`` (its repr, without the call).  The actor and the entry id (a
        # gene's v2 id, a SHA-256: 64 characters or more) are quoted through a
        # cache: a view writes as one actor, often the same key again.  Together
        # ~12k of the ~28k instructions a write's line took (callgrind).
        text = (f'{{"ts":{quote(ts)},"agent":{"null" if agent is None else quote(agent)},'
                f'"action":{quote(action)},"key":{"null" if key is None else quote(key)},'
                f'"category":{"null" if category is None else quote(category)},'
                f'"actor":{"null" if actor is None else quoted(actor)},"bytes":{nbytes},'
                f'"entryId":{"null" if entry is None else quoted(entry)}')
    except TypeError:  # a field that is not a string
        return ENCODER.encode(audit_line(ts, agent, action, key, category, actor, nbytes, entry,
                                         extra, seq, epoch))
    for name, value in extra.items():
        text += f",{quote(name)}:{value if value.__class__ is int else json_value(value)}"
    if epoch:
        text += f',"epoch":{quote(epoch)}'
    if seq.__class__ is int:
        return f'{text},"seq":{seq}}}'
    if seq is not None:
        text += f',"seq":{json_value(seq)}'
    return text + "}"


class BriefTemplate:
    """The lines of one removal of many entries (an eviction, a cleanup), which
    differ only in key, category, bytes, entryId and createdBy.

    ``text(key, category, nbytes, entry, created_by)`` is byte for byte
    ``line_text(ts, agent, action, key, category, actor, nbytes, entry,
    {"createdBy": created_by, **shared}, seq, epoch)`` for string fields and an int
    ``nbytes``: the parts all of them share are cut from one sample line here,
    beside :func:`line_text`, whose field order the cuts rely on; :meth:`texts`
    makes many at once.  What it saves: one f-string builds a line in one
    allocation, where a chain of ``+`` makes a new string per field and the
    generic encoder dispatches per field (docs/benchmarks.md, "Figures behind
    the code's choices").
    ``shared`` must not hold ``createdBy`` or a HEAD field.
    """

    __slots__ = ("head", "middle", "tail")

    def __init__(self, ts: str, agent: str, action: str, actor: str | None,
                 shared: Mapping[str, Any], seq: int | None, epoch: str = "") -> None:
        sample = line_text(ts, agent, action, "", "", actor, 0, "", {"createdBy": "", **shared},
                           seq, epoch)
        # A quoted string holds no bare '"', so each cut finds its field's own name.
        self.head = sample[:sample.index(',"key":') + 7]
        self.middle = sample[sample.index(',"actor":'):sample.index(',"bytes":') + 9]
        self.tail = sample[sample.index(',"createdBy":""') + 15:]

    def text(self, key: str, category: str, nbytes: int, entry: str, created_by: str) -> str:
        return self.texts((key,), (category,), (nbytes,), (entry,), (created_by,))[0]

    def texts(self, keys: Iterable[str], categories: Iterable[str], sizes: Iterable[int],
              entries: Iterable[str], creators: Iterable[str]) -> list[str]:
        """:meth:`text` of each (key, category, nbytes, entry, created_by) taken
        from the five in turn.  ``nbytes`` must be an ``int`` exactly (the
        f-string writes a bool as ``True``, not JSON's ``true``)."""
        head, middle, tail = self.head, self.middle, self.tail
        categories, creators = list(categories), list(creators)
        # A few categories and creators among many lines: each quoted once.
        quoted = {text: quote(text) for text in {*categories, *creators}}
        return [f'{head}{quote(key)},"category":{quoted[category]}{middle}{nbytes},'
                f'"entryId":"{entry}","createdBy":{quoted[creator]}{tail}'
                for key, category, nbytes, entry, creator
                in zip(keys, categories, sizes, entries, creators, strict=True)]


def audit_line(ts: str, agent: str | None, action: str, key: str | None = None,
               category: str | None = None, actor: str | None = None, nbytes: int = 0,
               entry: str | None = None, extra: Mapping[str, Any] | None = None,
               seq: int | None = None, epoch: str = "") -> dict[str, Any]:
    """The one way an audit line's dict is made: the :data:`HEAD` fields in order,
    then ``extra``, then ``epoch`` (when not empty) and ``seq`` (when not
    ``None``) -- the order :func:`line_text` writes, so a line's dict and its
    JSON always agree.  ``action`` is one of :mod:`.actions`."""
    line = {"ts": ts, "agent": agent, "action": action, "key": key, "category": category,
            "actor": actor, "bytes": nbytes, "entryId": entry}
    if extra:
        line.update(extra)
    if epoch:
        line["epoch"] = epoch
    if seq is not None:
        line["seq"] = seq
    return line


def line_hash(line: bytes) -> str:
    """The chain link: hex SHA-256 of a line's bytes, without its newline."""
    return sha256(line).hexdigest()


def rolled_back_line(ts: str, agent: str, seq: int, reason: str,
                     actor: str | None = None, epoch: str = "") -> dict[str, Any]:
    """The line that says change ``seq`` was logged but never committed
    (``reason`` follows ``seq``: the order these lines have always had)."""
    line = audit_line(ts, agent, ROLLED_BACK, actor=actor, seq=seq, epoch=epoch)
    line["reason"] = reason
    return line


#: A line's length with its newline, from its length without.
_PLUS_NEWLINE = (1).__add__


def chain(bodies: Sequence[bytes], prev: str | None, digests: list[bytes] | None = None,
          lengths: list[int] | None = None) -> tuple[bytes, str]:
    """Each encoded line (``{...}``, no newline) with ``"prev"`` spliced in as its
    last field, linked to the line before it; with the last line's hash.
    ``digests`` and ``lengths``, if given, get each line's SHA-256 and its
    length with its newline (where it went, for the history index).

    Each link is kept as the bytes it is spliced in as (``hexlify`` of the
    digest: no hex string made and encoded again), so a line costs its SHA-256
    and two concatenations; the SHA-256 is most of what is left."""
    tail = b',"prev":null}' if prev is None else b',"prev":"' + prev.encode() + b'"}'
    if len(bodies) == 1:  # one line (most changes'): no loop, no join (~6k instructions)
        line = bodies[0][:-1] + tail
        digest = sha256(line).digest()
        if digests is not None:
            digests.append(digest)
        if lengths is not None:
            lengths.append(len(line) + 1)
        return line + b"\n", digest.hex()
    out: list[bytes] = []
    append = out.append
    keep = None if digests is None else digests.append
    link = None
    for body in bodies:
        line = body[:-1] + tail
        append(line)
        digest = sha256(line).digest()
        if keep is not None:
            keep(digest)
        link = hexlify(digest)
        tail = b',"prev":"' + link + b'"}'
    if link is None:
        assert prev is not None
        return b"\n", prev  # pragma: no cover - never called without lines
    if lengths is not None:
        lengths += map(_PLUS_NEWLINE, map(len, out))
    return b"\n".join(out) + b"\n", link.decode()
