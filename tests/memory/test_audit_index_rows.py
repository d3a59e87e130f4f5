"""The history index's rows of an eviction's lines are made with the lines
(issue 33, target 3): ``Change.brief_lines`` keeps each line's columns and
``rows_with`` places them, and they must be the rows ``rows_for`` reads back
from the lines; ``place`` must say where each line went, and with which
SHA-256, as the bytes written do."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rotifer.memory.audit.index import key_hash, key_hashes, rows_for, rows_with
from rotifer.memory.audit.places import Places, place
from rotifer.memory.audit.text import chain, line_text
from rotifer.memory.engine.changes import Change
from rotifer.memory.model import Category
from rotifer.memory.storage.backend import Brief

GENE = "v2:" + "b" * 64


def placed_lines(change: Change, offset: int = 40) -> Places:
    """Where the change's lines would go, written at ``offset`` of file 2."""
    places = Places()
    if not change.texts:
        return places
    digests: list[bytes] = []
    lengths: list[int] = []
    data, _ = chain([t.encode() for t in change.texts], None, digests, lengths)
    place(places, change.lines, len(data), 2, offset, digests, lengths)
    return places


victims_strategy = st.lists(st.tuples(st.text(min_size=1, max_size=6), st.integers(0, 500),
                                      st.sampled_from(list(Category))), max_size=12)


@given(st.lists(st.tuples(victims_strategy, st.booleans()), min_size=1, max_size=3),
       st.sampled_from(["", "0123456789ab"]), st.booleans())
def test_a_change_s_own_columns_are_rows_for_s(
        groups: list[tuple[list[tuple[str, int, Category]], bool]], epoch: str,
        line_first: bool) -> None:
    """Lines of the change's own before, between and after its evictions, and
    the evictions' (a run per category evicted), all take the columns made with
    them (a run of one per ``line``): the same rows as rows_for reads back from
    the lines, of the same types."""
    change = Change("agent", 1_780_000_000_000_001, GENE, seq=7, epoch=epoch)
    if line_first:
        change.line("write", "before", Category.CACHE, 3)
    for victims, line_after in groups:
        change.brief_lines("evict", [Brief(k, c, n, 1, 1, GENE) for k, n, c in victims],
                           forKey="new")
        if line_after:
            change.line("write", "new", Category.PREFERENCE, 9)
    places = placed_lines(change)
    placed = places.placed()
    assert sum(len(run[2]) for run in change.index_runs) == len(change.lines)
    rows = rows_with("agent", places, change.index_runs)
    assert rows == rows_for("agent", placed)
    assert [type(v) for row in rows for v in row] == \
        [type(v) for row in rows_for("agent", placed) for v in row]


def test_no_columns_are_kept_without_a_change_number() -> None:
    """A change outside an agent's transaction (no seq): nothing is made ahead,
    so rows_for reads every line, as before."""
    change = Change("agent", 1_780_000_000_000_001, GENE)
    change.brief_lines("evict", [Brief("k", Category.CACHE, 3, 1, 1, GENE)])
    change.line("write", "k", Category.CACHE, 3)
    assert change.index_runs == []


@pytest.mark.parametrize(("key", "nbytes", "extra"), [
    ("k", 3, {}), ("ü/k", 3, {"previousBytes": 2}),
    (None, 0, {"operation": "write", "code": "X", "reason": "no"}),
    ("k", True, {}), ("k", 3, {"epoch": "feedfeedfeed"}), ("k", 3, {"seq": 9}),
])
def test_a_line_s_own_columns_are_rows_for_s_or_none_are_kept(
        key: str | None, nbytes: int, extra: dict[str, Any]) -> None:
    """One ``line``'s row made with it is the row rows_for reads back from it (a
    refusal's line has no key); a line whose fields are not what the change
    itself would write (a bool for bytes, an epoch or a seq among the extra
    fields) keeps no columns and takes rows_for's way."""
    change = Change("agent", 1_780_000_000_000_001, GENE, seq=7, epoch="0123456789ab")
    change.line("write", key, Category.CACHE, nbytes, **extra)
    places = placed_lines(change)
    assert len(change.index_runs) == (1 if nbytes.__class__ is int and not extra.keys()
                                      & {"seq", "epoch"} else 0)
    assert rows_with("agent", places, change.index_runs) == rows_for("agent", places.placed())


@given(st.lists(st.text(max_size=12), max_size=20))
@example(["a", "\ud800", "ü"])  # a lone surrogate among others: key_hash's encoding
def test_key_hashes_are_key_hash_s(keys: list[str]) -> None:
    assert key_hashes(keys) == [key_hash(k) for k in keys]


@given(st.lists(st.text(max_size=20), min_size=1, max_size=8), st.integers(0, 10**6))
def test_places_and_digests_are_the_bytes_written(keys: list[str], offset: int) -> None:
    lines = [{"ts": "t", "agent": "a", "action": "write", "key": k} for k in keys]
    bodies = [line_text("t", "a", "write", k, None, None, 0, None, {}, None).encode()
              for k in keys]
    digests: list[bytes] = []
    lengths: list[int] = []
    data, _ = chain(bodies, None, digests, lengths)
    placed: list[Any] = []
    place(placed, lines, len(data), 4, offset, digests, lengths)
    assert [p[0] for p in placed] == lines
    places = Places()
    place(places, lines, len(data), 4, offset, digests, lengths)
    assert places.placed() == placed  # the same places, by column
    for _line, number, off, length, digest in placed:
        assert number == 4
        text = data[off - offset:off - offset + length]
        assert text.endswith(b"\n") and b"\n" not in text[:-1]
        assert digest == hashlib.sha256(text[:-1]).digest()
    assert sum(p[3] for p in placed) == len(data)


def test_placing_other_lines_than_were_written_fails() -> None:
    bodies = [b'{"a":1}', b'{"a":2}']
    digests: list[bytes] = []
    lengths: list[int] = []
    data, _ = chain(bodies, None, digests, lengths)
    lines: list[dict[str, Any]] = [{"a": 1}, {"a": 2}]
    place([], lines, len(data), 1, 0, digests, lengths)  # as written: placed
    for wrong_lines, total, wrong_digests in ((lines, len(data) + 8, digests),
                                              ([*lines, {"a": 3}], len(data), digests),
                                              (lines[:1], len(data), digests[:1]),
                                              (lines, len(data), digests[:1])):
        with pytest.raises(ValueError):
            place([], wrong_lines, total, 1, 0, wrong_digests, lengths)
