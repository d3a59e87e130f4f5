"""``stored_entry`` builds a MemoryEntry through its slot setters (for speed);
it must be exactly ``MemoryEntry(...)``, field by field."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from rotifer.memory import AccessPolicy, Category, MemoryEntry, RetentionPolicy
from rotifer.memory.model import _slot_setter, stored_entry


def test_stored_entry_is_the_constructor_field_by_field() -> None:
    # Every field gets a value no other field of its type has, so two swapped
    # setters would show.
    fields = {
        "entry_id": "e" * 64, "category": Category.PATTERN, "key": "the key",
        "value": b"the value", "created_by": "creator", "last_accessed_by": "reader",
        "created_at": "2026-03-01T12:00:00.000001Z", "updated_at": "2026-03-02T12:00:00Z",
        "access_policy": AccessPolicy.parse({"readScope": "ALL_GENES", "writeScope": "SAME_DOMAIN",
                                             "sharePolicy": "PRIVATE"}),
        "retention_policy": RetentionPolicy.parse({"maxRetentionDays": 3,
                                                   "autoDeleteOnTermination": True,
                                                   "anonymizationSupported": False}),
    }
    built = stored_entry(**fields)
    assert built == MemoryEntry(**fields)
    assert {name: getattr(built, name) for name in fields} == fields


def test_stored_entry_takes_every_field() -> None:
    """A field added to MemoryEntry must be added to stored_entry too."""
    assert list(inspect.signature(stored_entry).parameters) == \
        [f.name for f in dataclasses.fields(MemoryEntry)]


def test_a_slot_setter_is_found_by_name() -> None:
    entry = MemoryEntry.__new__(MemoryEntry)
    _slot_setter("updated_at")(entry, "then")
    assert entry.updated_at == "then"
    with pytest.raises(AttributeError, match="no field 'size'"):
        _slot_setter("size")
