"""Keys, values and agent ids: what each must be, and the id of an entry.

The checks every call makes of what a gene or a deployer passes in, before
the store is touched (MEMORY_INVALID_INPUT otherwise), and the entry id the
contract defines.  :mod:`rotifer.memory.model` imports them (and they are
importable from there as well).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Final

from .errors import invalid

MAX_KEY_BYTES: Final = 1024
MAX_VALUE_BYTES: Final = 1024 * 1024


def check_agent_id(agent_id: object) -> str:
    """A new agent's id: a non-empty string without control or format characters
    (a trailing line break or a bidi override would make two agents look alike)."""
    if not isinstance(agent_id, str) or not agent_id:
        raise invalid("agent id must be a non-empty string")
    import unicodedata  # speed: hashlib and unicodedata where used (issue 33)

    bad = next((c for c in agent_id if unicodedata.category(c) in _HIDDEN), None)
    if bad is not None:
        raise invalid(f"agent id {agent_id!r} contains the control or format character "
                      f"U+{ord(bad):04X}")
    return agent_id


#: Unicode categories of characters that do not show: controls, formats (bidi
#: overrides, zero-width ones), line and paragraph separators, surrogates.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def check_key(key: object) -> bytes:
    """Validate a key and return its UTF-8 bytes."""
    if not isinstance(key, str):
        raise invalid("key must be a string")
    if not key:
        raise invalid("key must not be empty")
    if "\x00" in key:
        raise invalid("key must not contain a NUL character")
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid("key must be valid Unicode (no lone surrogates)") from None
    if len(raw) > MAX_KEY_BYTES:
        raise invalid(f"key is {len(raw)} bytes; at most {MAX_KEY_BYTES} are allowed")
    return raw


def check_value(value: object) -> bytes:
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, bytearray | memoryview):
        data = bytes(value)
    else:
        raise invalid(f"value must be bytes, not {type(value).__name__}")
    if len(data) > MAX_VALUE_BYTES:
        raise invalid(f"value is {len(data)} bytes; at most {MAX_VALUE_BYTES} (1 MiB) are allowed")
    return data


@functools.lru_cache(maxsize=8192)
def entry_id(agent_id: str, key: str) -> str:
    """SHA-256 of the agent id, a NUL byte and the key (the contract's rule).

    Cached: every entry a query or read returns needs its id, and the same
    keys come back again and again.
    """
    import hashlib  # speed: OpenSSL's loading, only where an id is made (~12 M instructions)

    return hashlib.sha256(agent_id.encode() + b"\x00" + key.encode()).hexdigest()


def entry_ids(agent_id: str, keys: Iterable[str]) -> list[str]:
    """:func:`entry_id` of many keys of one agent, for entries being removed (an
    eviction, an expiry): their ids are not asked for again, so they bypass the
    cache (and do not push out ids that are), and the agent's part of the hash
    is taken once and copied for each key: half the cost of one id."""
    import hashlib

    agent_part = hashlib.sha256(agent_id.encode() + b"\x00")
    ids = []
    for key in keys:
        digest = agent_part.copy()
        digest.update(key.encode())
        ids.append(digest.hexdigest())
    return ids
