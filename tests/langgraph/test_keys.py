"""The documented mapping: every valid LangGraph namespace and key round-trips
through one memory key, namespace prefixes are key prefixes, and anything past
rotifer's limits is MEMORY_INVALID_INPUT."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rotifer.langgraph.keys import (
    ROOT,
    decode_value,
    encode_value,
    memory_key,
    namespace_prefix,
    parse_key,
)
from rotifer.memory import AgentMemoryError, ErrorCode

# Valid LangGraph labels: non-empty, no "." and no NUL; keys: any text
# (surrogates cannot be stored as UTF-8 by anyone).
_TEXT = st.characters(exclude_categories=("Cs",))
LABELS = st.text(st.one_of(st.sampled_from("/%*2F5"), _TEXT.filter(lambda c: c not in ".\x00")),
                 min_size=1, max_size=8)
KEYS = st.text(st.one_of(st.sampled_from("/%\x0025F"), _TEXT), max_size=10)
NAMESPACES = st.lists(LABELS, min_size=1, max_size=4).map(tuple)


@given(NAMESPACES, KEYS)
@settings(max_examples=150)
def test_every_namespace_and_key_round_trips(namespace: tuple[str, ...], key: str) -> None:
    mapped = memory_key(namespace, key)
    assert mapped.startswith(ROOT) and "\x00" not in mapped
    assert parse_key(mapped) == (namespace, key)


@given(NAMESPACES, KEYS, NAMESPACES, KEYS)
@settings(max_examples=150)
def test_distinct_items_never_share_a_memory_key(ns1: tuple[str, ...], k1: str,
                                                  ns2: tuple[str, ...], k2: str) -> None:
    assert (memory_key(ns1, k1) == memory_key(ns2, k2)) == ((ns1, k1) == (ns2, k2))


@given(NAMESPACES, KEYS, st.lists(LABELS, max_size=4).map(tuple))
@settings(max_examples=150)
def test_a_namespace_prefix_is_exactly_a_key_prefix(namespace: tuple[str, ...], key: str,
                                                    prefix: tuple[str, ...]) -> None:
    under = memory_key(namespace, key).startswith(namespace_prefix(prefix))
    assert under == (namespace[:len(prefix)] == prefix)


def test_the_mapping_is_readable() -> None:
    assert memory_key(("users", "alice"), "prefs") == "langgraph/users/alice/prefs"
    assert memory_key(("a/b", "50%"), "x/y\x00") == "langgraph/a%2Fb/50%25/x%2Fy%00"
    assert memory_key(("users",), "") == "langgraph/users/"


@pytest.mark.parametrize("foreign", [
    "formatter/indent",          # not under the root
    "langgraph/",                # no namespace
    "langgraph/key",             # no namespace
    "langgraph//key",            # an empty label
    "langgraph/a.b/key",         # a label LangGraph refuses
    "langgraph/a%00/key",        # NUL in a label
    "langgraph/a%2fb/key",       # not the escaping memory_key makes (lower case)
    "langgraph/50%/key",         # a bare %
    "langgraph/ns/50%41",        # an escape memory_key never makes
])
def test_keys_the_mapping_did_not_make_are_no_items(foreign: str) -> None:
    assert parse_key(foreign) is None


def test_a_key_past_1024_bytes_is_invalid_input() -> None:
    room = 1024 - len(namespace_prefix(("ns",)).encode())
    assert parse_key(memory_key(("ns",), "k" * room)) == (("ns",), "k" * room)
    with pytest.raises(AgentMemoryError) as caught:
        memory_key(("ns",), "k" * (room + 1))
    assert caught.value.code is ErrorCode.INVALID_INPUT
    with pytest.raises(AgentMemoryError) as caught:  # escaping counts: "/" is 3 bytes
        memory_key(("ns",), "/" * (room // 3 + 1))
    assert caught.value.code is ErrorCode.INVALID_INPUT


def test_values_are_canonical_json() -> None:
    assert encode_value({"b": 1, "a": [True, None, "é"]}) == '{"a":[true,null,"é"],"b":1}'.encode()
    assert decode_value(encode_value({"x": {"y": 1.5}})) == {"x": {"y": 1.5}}
    for bad in ({"x": math.nan}, {"x": {1, 2}}, {"x": b"bytes"}, {"x": "\ud800"},
                {"\udfff": 1}, {1: "a"}, {"x": [{None: 1}]}):
        with pytest.raises(AgentMemoryError) as caught:
            encode_value(bad)
        assert caught.value.code is ErrorCode.INVALID_INPUT
    with pytest.raises(AgentMemoryError):
        encode_value(["not", "a", "dict"])  # type: ignore[arg-type]
    assert decode_value(b"[1]") is None and decode_value(b"\xff") is None
    assert decode_value(b'{"x": NaN}') is None


def test_the_longest_namespace_prefix_picks_the_policy() -> None:
    from rotifer.langgraph.policy import NamespacePolicy, Policies
    from rotifer.memory import AccessPolicy, Category, Scope

    private = {"readScope": "CREATOR_GENE_ONLY", "writeScope": "CREATOR_GENE_ONLY",
               "sharePolicy": "PRIVATE"}
    policies = Policies({("users",): "PREFERENCE",
                         ("users", "secrets"): {"category": "PREFERENCE", "accessPolicy": private},
                         ("tmp",): NamespacePolicy("CACHE", retention=None)},  # type: ignore[arg-type]
                        default="PATTERN")
    assert policies.for_namespace(("users", "alice")).category is Category.PREFERENCE
    assert policies.for_namespace(("users", "alice")).access is None
    secret = policies.for_namespace(("users", "secrets", "x"))
    assert secret.access == AccessPolicy(Scope.CREATOR_GENE_ONLY, Scope.CREATOR_GENE_ONLY)
    assert policies.for_namespace(("tmp",)).retention is None
    assert policies.for_namespace(("other",)).category is Category.PATTERN
    assert Policies().for_namespace(("x",)) == NamespacePolicy(Category.CONTEXT)
    for bad in ({("a",): "NOPE"}, {("a",): {"category": "CACHE", "ttl": 5}},
                {("a",): {"retentionPolicy": {"maxRetentionDays": 0}}}, {"a": "CACHE"}):
        with pytest.raises(AgentMemoryError) as caught:
            Policies(bad)  # type: ignore[arg-type]
        assert caught.value.code is ErrorCode.INVALID_INPUT
