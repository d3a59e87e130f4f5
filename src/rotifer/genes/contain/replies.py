"""The Python bridge's short reply: one definition that the parent builds a
read's or write's entry from (:func:`entry_line`, in
:mod:`~rotifer.genes.contain.python_host`) and the child reads it by
(:class:`ShortEntry`, in :mod:`~rotifer.genes.contain.pychild`).

An entry a read or write returns goes as one line built from a template
instead of ``{"ok": entry.to_json()}`` through the encoder: a JSON array of
the fields of :class:`ShortEntry` in their order -- without the key (the
child asked for it) and, for a write, with the value ``null`` (the child sent
it).  An entry with a retention policy, a query's entries, and every refusal
go as the seed's JSON objects (:mod:`rotifer.genes.calls`).
"""

from __future__ import annotations

import binascii
from json.encoder import encode_basestring_ascii
from typing import Final, NamedTuple

from rotifer.memory import AccessPolicy, MemoryEntry


class ShortEntry(NamedTuple):
    """An entry in the short reply's array, field by field in this order."""

    entry_id: str
    category: str
    #: base64, or None when the child sent the value (a write).
    value: str | None
    created_by: str
    last_accessed_by: str
    created_at: str
    updated_at: str
    read_scope: str
    write_scope: str
    share_policy: str


#: A read that found nothing, or a delete.
NOTHING: Final = b'{"ok":null}\n'

#: How each field is written into the line: enum values (categories, scopes)
#: are plain ASCII words, quoted here; every other field arrives as JSON already.
_SLOT: Final = {"category": '"%s"', "read_scope": '"%s"', "write_scope": '"%s"',
                "share_policy": '"%s"'}
_LINE: Final = '{"ok":[' + ",".join(_SLOT.get(f, "%s") for f in ShortEntry._fields) + "]}\n"
_quote = encode_basestring_ascii

#: The three scopes of an access policy as text, by the policy object (the
#: store hands out one shared object per combination), so the enums' ``value``
#: properties are read once.
_SCOPES: dict[int, tuple[AccessPolicy, tuple[str, str, str]]] = {}


def _scopes(policy: AccessPolicy) -> tuple[str, str, str]:
    seen = _SCOPES.get(id(policy))
    if seen is not None:
        same, scopes = seen
        if same is policy:
            return scopes
    scopes = (policy.read_scope.value, policy.write_scope.value, policy.share_policy.value)
    if len(_SCOPES) >= 256:  # at most 48 combinations, unless copies
        _SCOPES.clear()
    _SCOPES[id(policy)] = (policy, scopes)  # kept alive: its id stays its own
    return scopes


def entry_line(entry: MemoryEntry, with_value: bool) -> bytes | None:
    """The reply carrying ``entry`` (its value only ``with_value``); None when
    it has a retention policy (then it goes as the full object)."""
    if entry.retention_policy is not None:
        return None
    read_scope, write_scope, share_policy = _scopes(entry.access_policy)
    short = ShortEntry(
        entry_id=_quote(entry.entry_id), category=entry.category.value,
        value=('"' + binascii.b2a_base64(entry.value, newline=False).decode("ascii") + '"'
               if with_value else "null"),
        created_by=_quote(entry.created_by), last_accessed_by=_quote(entry.last_accessed_by),
        created_at=_quote(entry.created_at), updated_at=_quote(entry.updated_at),
        read_scope=read_scope, write_scope=write_scope, share_policy=share_policy)
    return (_LINE % short).encode("ascii")
