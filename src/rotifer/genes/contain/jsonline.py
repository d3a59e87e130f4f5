"""One bridge message's text to its object, for both ends of the bridge
(contain/channel.py in rotifer, contain/pychild.py in the gene's process).

Why not ``json.loads``: of bytes it first guesses their encoding, and any
``decode`` call goes through two Python frames and two regular-expression
matches for the whitespace around the value.  Both ends write exactly one
JSON value a line, so the C scanner is called at once and only a text that is
not exactly one value (surrounding whitespace, extra data, an error) goes
through ``JSONDecoder.decode``, which accepts or refuses it as ``json.loads``
does.  Measured (instruction counts of a write's whole bridge, one thread):
see docs/benchmarks.md, "Containment".
"""

from __future__ import annotations

from json import JSONDecoder
from json.scanner import make_scanner
from typing import Any

_DECODER = JSONDecoder()
_decode = _DECODER.decode
_scan = make_scanner(_DECODER)  # type: ignore[arg-type]  # typeshed: the context is a decoder


def decode(text: str) -> Any:
    """``json.loads(text)`` of a ``str``: the same value, or the same error."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:  # no value at the very start: let decode say why
        return _decode(text)
    if end != len(text):
        return _decode(text)  # whitespace after it, or more: decode decides
    return value
