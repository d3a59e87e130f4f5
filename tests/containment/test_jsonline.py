"""The bridge's decoder (contain/jsonline.py) takes and refuses what
``json.loads`` does: it only skips ``decode``'s frames for a text that is
exactly one JSON value."""

from __future__ import annotations

import json

import pytest

from rotifer.genes.contain.jsonline import decode

SAME = ['{"ok":null}', ' {"a": [1, 2.5, "x\\u00e9"]} ', '{"a":1}\n', "[]", '"s"', "0",
        '{"type":"call","op":"write","args":{"key":"b/\\ud800"}}', "null", "  7"]
BAD = ["", " ", '{"a":1} x', '{"a":1}{"b":2}', "{", '{"a":}', "NaNx", "[1,]", '"\\x"']


@pytest.mark.parametrize("text", SAME)
def test_a_value_is_what_json_loads_makes(text: str) -> None:
    assert decode(text) == json.loads(text)
    assert type(decode(text)) is type(json.loads(text))


@pytest.mark.parametrize("text", BAD)
def test_what_json_loads_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as got:
        decode(text)
    assert str(got.value) == str(expected.value)
