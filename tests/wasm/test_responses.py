"""The host builds entry responses directly (``requests.entry_json``); they
must be exactly what encoding ``MemoryEntry.to_json()`` gives, for any entry."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from rotifer.genes.wasm import requests
from rotifer.memory import AccessPolicy, Category, MemoryEntry, RetentionPolicy, Scope, SharePolicy
from rotifer.memory.model import entry_id

texts = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30)
retentions = st.none() | st.builds(
    RetentionPolicy, st.none() | st.integers(0, 2**40), st.booleans(), st.booleans())
entries = st.builds(
    MemoryEntry,
    entry_id=texts | texts.map(lambda k: entry_id("agent", k)),
    category=st.sampled_from(list(Category)),
    key=texts,
    value=st.binary(max_size=200),
    created_by=texts,
    last_accessed_by=texts,
    created_at=texts,
    updated_at=texts,
    access_policy=st.builds(AccessPolicy, st.sampled_from(list(Scope)),
                            st.sampled_from(list(Scope)), st.sampled_from(list(SharePolicy))),
    retention_policy=retentions,
)


@given(entries)
def test_entry_json_is_the_generic_encoding_byte_for_byte(entry: MemoryEntry) -> None:
    built = requests.entry_json(entry).encode()
    assert built == requests.encode(entry.to_json())
    assert json.loads(built) == entry.to_json()


def test_a_key_with_quotes_controls_and_non_ascii_is_escaped_like_json() -> None:
    entry = MemoryEntry(entry_id("agent", "k"), Category.CACHE, 'a"b\\c\n\x01ü✓', b"\xff\x00",
                        "v2:g", "v2:g", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z",
                        AccessPolicy(), RetentionPolicy(7, True, False))
    built = requests.entry_json(entry)
    assert '"key":"a\\"b\\\\c\\n\\u0001ü✓"' in built
    assert json.loads(built)["key"] == entry.key
    assert json.loads(built)["retentionPolicy"] == {
        "maxRetentionDays": 7, "autoDeleteOnTermination": True, "anonymizationSupported": False}
