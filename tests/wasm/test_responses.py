"""The host builds entry responses directly (``requests.entry_json``); they
must be exactly what encoding ``MemoryEntry.to_json()`` gives, for any entry.
Likewise a request is parsed by a shortcut (``requests._parse``) that must
give what the strict decoder gives, values and errors alike."""

from __future__ import annotations

import json
from typing import Any

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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12)
spaces = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])
request_texts = (
    st.builds(lambda lead, value, tail, junk: lead + json.dumps(value) + tail + junk,
              spaces, json_values, spaces, st.sampled_from(["", "x", "}", ",1", " {}"]))
    | st.text(max_size=40)
    | st.sampled_from(['{"key":"a","key":"b"}', "NaN", "[Infinity]", " ", "", '{"a":1}  ',
                       '{"a":', '"\\ud800"', "1e999", "-0"]))


def _outcome(parse: Any, text: str) -> tuple[Any, ...]:
    try:
        return ("value", parse(text))
    except Exception as exc:  # the error's type and message must match too
        return ("error", type(exc), str(exc))


@given(request_texts)
def test_the_request_shortcut_parses_like_the_strict_decoder(text: str) -> None:
    assert _outcome(requests._parse, text) == _outcome(requests._DECODER.decode, text)
