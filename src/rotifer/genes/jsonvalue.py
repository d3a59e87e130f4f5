"""What may cross a gene's boundary: JSON values that are exactly JSON.

Python's ``json`` is laxer than JSON in two ways a caller can reach from the
command line: ``1e999999`` parses to ``inf`` (and ``NaN``/``Infinity`` parse
at all), and ``"\\ud800"`` parses to a string holding a lone surrogate, which
no UTF-8 encoder (our stdout, a WASM gene's memory, SQLite) accepts.  A value
holding either would fail later, far from the cause and blamed on the wrong
party.  So every gene input is checked before the gene runs (INVALID_INPUT,
the caller's fault) and every output after (GENE_FAILED, the gene's).

Messages never contain the offending text itself, only its escaped form
(``\\ud800``), so nothing raw is echoed to a terminal.
"""

from __future__ import annotations

import json
import math
from typing import Any

_MAX_SHOWN = 40


def reject_constant(name: str) -> Any:
    """``parse_constant`` for :func:`json.loads`: NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not JSON")


class DuplicateField(ValueError):
    """An object gave one field twice (``json.loads`` would keep the last, silently)."""

    def __init__(self, field: str) -> None:
        super().__init__(f"the field {field!r} appears twice")
        self.field = field


def unique_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An ``object_pairs_hook`` that refuses a field given twice (DuplicateField)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateField(key)
        result[key] = value
    return result


def finite_float(text: str) -> float:
    """``parse_float`` for :func:`json.loads`: a number too large for a float is an error,
    not Infinity."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."
        raise ValueError(f"the number {shown} is too large for JSON (it would be Infinity)")
    return value


def loads(text: str) -> Any:
    """Parse JSON text strictly: no NaN/Infinity, no number that overflows to
    Infinity.  Raises ValueError (or RecursionError) saying why.  The value may
    still hold lone surrogates (``"\\ud800"`` is valid JSON text): check it with
    :func:`problem_of`."""
    return json.loads(text, parse_constant=reject_constant, parse_float=finite_float)


def escaped(text: str, limit: int = _MAX_SHOWN) -> str:
    """``text`` as a message may show it: every character that is not printable
    (controls, surrogates, bidi overrides) and the backslash as a Python-style
    escape, at most ``limit`` characters of ``text``."""
    out = []
    for c in text[:limit]:
        o = ord(c)
        if c == "\\":
            out.append("\\\\")
        elif c.isprintable():
            out.append(c)
        elif o <= 0xFF:
            out.append(f"\\x{o:02x}")
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out) + ("..." if len(text) > limit else "")


def problem_of(value: Any, where: str = "input") -> str | None:
    """Why ``value`` cannot cross as JSON, naming where in it; None when it can.

    Fast path: one C-level dump and encode of the whole value; only a value
    that fails is walked to find the place to name.
    """
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, TypeError, RecursionError):
        pass
    else:
        return None
    return _walk(value, where, 0) or f"{where} is not a JSON value"


def _bad_text(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return escaped(text[exc.start:exc.end])
    return None


def _walk(value: Any, where: str, depth: int) -> str | None:
    if depth > 200:
        return f"{where} is nested too deeply"
    if isinstance(value, str):
        bad = _bad_text(value)
        return None if bad is None else (f"{where} holds {bad}, which is not valid Unicode "
                                         "(a lone surrogate, or bytes that are not UTF-8)")
    if isinstance(value, float):
        if math.isnan(value):
            return f"{where} is NaN, which is not JSON"
        if math.isinf(value):
            sign = "-" if value < 0 else ""
            return f"{where} is {sign}Infinity (a number too large for JSON)"
        return None
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _walk(item, f"{where}[{i}]", depth + 1)
            if found:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                continue  # json.dumps turns such keys into strings; not our concern
            bad = _bad_text(key)
            if bad is not None:
                return (f"{where} has a key holding {bad}, which is not valid Unicode "
                        "(a lone surrogate, or bytes that are not UTF-8)")
            found = _walk(item, f"{where}.{escaped(key)}", depth + 1)
            if found:
                return found
        return None
    return f"{where} is a {type(value).__name__}, which is not JSON"
