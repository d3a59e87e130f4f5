"""An audit line's JSON is built from a template (audit_text.line_text) for
speed; it must be byte for byte what the generic encoder makes of the line."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rotifer.memory.audit.text import ENCODER, BriefTemplate, line_text
from rotifer.memory.engine.changes import Change
from rotifer.memory.model import Category
from rotifer.memory.storage.backend import Brief

texts = st.text()  # every code point, quotes, backslashes, controls, lone surrogates
optional = st.none() | texts
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(texts, inner, max_size=3), max_leaves=6)
head = {"ts", "agent", "action", "key", "category", "actor", "bytes", "entryId", "seq"}
extras = st.dictionaries(texts.filter(lambda k: k not in head), values, max_size=4)


@given(ts=texts, agent=optional, action=texts, key=optional, category=optional, actor=optional,
       nbytes=st.integers(), entry=optional, extra=extras, seq=st.none() | st.integers())
def test_the_template_is_the_encoder(ts: str, agent: str | None, action: str, key: str | None,
                                     category: str | None, actor: str | None, nbytes: int,
                                     entry: str | None, extra: dict[str, Any],
                                     seq: int | None) -> None:
    line: dict[str, Any] = {"ts": ts, "agent": agent, "action": action, "key": key,
                            "category": category, "actor": actor, "bytes": nbytes,
                            "entryId": entry, **extra}
    if seq is not None:
        line["seq"] = seq
    assert line_text(ts, agent, action, key, category, actor, nbytes, entry, extra, seq) \
        == ENCODER.encode(line)


@given(agent=optional, key=optional, actor=optional, extra=extras,
       seq=st.none() | st.integers(min_value=0), now=st.integers(0, 253_402_300_799_000_000))
def test_every_line_a_change_records_has_its_text(agent: str | None, key: str | None,
                                                  actor: str | None, extra: dict[str, Any],
                                                  seq: int | None, now: int) -> None:
    change = Change(agent, now, actor, seq=seq)
    change.line("evict", key, Category.CACHE, 12, **extra)
    change.line("write", key, None, 0, actor="retention")
    assert change.texts == [ENCODER.encode(line) for line in change.lines]


def test_extra_fields_may_not_repeat_the_head() -> None:
    with pytest.raises(ValueError, match="repeat"):
        Change("a", 0, "g").line("write", "k", None, 0, entryId="x")


briefs = st.lists(st.builds(
    Brief, key=texts, category=st.sampled_from(list(Category)), size=st.integers(),
    updated_us=st.integers(), seq=st.integers(), created_by=texts), max_size=5)


@given(agent=optional, actor=optional, who=optional,
       shared=extras.filter(lambda d: "createdBy" not in d), items=briefs,
       seq=st.none() | st.integers(min_value=0), action=texts)
def test_brief_lines_are_the_lines_one_by_one(agent: str | None, actor: str | None,
                                              who: str | None, shared: dict[str, Any],
                                              items: list[Brief], seq: int | None,
                                              action: str) -> None:
    together = Change(agent, 1_780_000_000_000_001, actor, seq=seq)
    together.brief_lines(action, items, who, **shared)
    alone = Change(agent, 1_780_000_000_000_001, actor, seq=seq)
    for b in items:
        alone.line(action, b.key, b.category, b.size, who, createdBy=b.created_by, **shared)
    assert together.lines == alone.lines
    assert together.texts == alone.texts == [ENCODER.encode(line) for line in alone.lines]


def test_head_fields_of_another_type_go_to_the_encoder() -> None:
    odd: Any = True
    assert line_text("t", "a", "write", odd, None, None, odd, None, {}, 1) == ENCODER.encode(
        {"ts": "t", "agent": "a", "action": "write", "key": True, "category": None,
         "actor": None, "bytes": True, "entryId": None, "seq": 1})
    assert line_text("t", "a", "write", odd, None, None, 3, None, {}, None) == ENCODER.encode(
        {"ts": "t", "agent": "a", "action": "write", "key": True, "category": None,
         "actor": None, "bytes": 3, "entryId": None})



@pytest.mark.parametrize("odd", [7, ["v2:x"], {"id": 1}])
def test_an_actor_or_entry_id_of_another_type_goes_to_the_encoder(odd: Any) -> None:
    """The actor and the entry id are quoted through a cache: one that is no
    string (an unhashable one too) still goes to the encoder, as any field does."""
    for actor, entry in ((odd, "e"), ("v2:a", odd)):
        assert line_text("t", "a", "write", "k", "CACHE", actor, 3, entry, {}, 1) == \
            ENCODER.encode({"ts": "t", "agent": "a", "action": "write", "key": "k",
                            "category": "CACHE", "actor": actor, "bytes": 3, "entryId": entry,
                            "seq": 1})


@given(ts=texts, agent=texts, action=texts, actor=optional,
       shared=extras.filter(lambda d: "createdBy" not in d), seq=st.none() | st.integers(),
       key=texts, category=texts, nbytes=st.integers(), entry=texts, created_by=texts)
def test_a_brief_template_makes_the_line_line_text_makes(
        ts: str, agent: str, action: str, actor: str | None, shared: dict[str, Any],
        seq: int | None, key: str, category: str, nbytes: int, entry: str,
        created_by: str) -> None:
    """The cuts BriefTemplate makes in a sample line fit line_text's field order."""
    # entryId is the store's hex sha256 (spliced in unquoted); any hex string will do.
    eid = entry.encode("utf-8", "surrogatepass").hex()
    assert BriefTemplate(ts, agent, action, actor, shared, seq).text(
        key, category, nbytes, eid, created_by) == line_text(
        ts, agent, action, key, category, actor, nbytes, eid,
        {"createdBy": created_by, **shared}, seq)
