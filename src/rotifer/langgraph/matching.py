"""What ``search`` filters and ``list_namespaces`` conditions mean, in Python.

Both follow LangGraph's ``InMemoryStore`` (the reference LangGraph's own
documentation tells store authors to test against), with one deliberate
difference: an ordering operator (``$gt``, ``$gte``, ``$lt``, ``$lte``) on a
value that is missing, ``None`` or of another kind than the operand does not
match, where ``InMemoryStore`` raises ``TypeError``/``ValueError`` from
``float()``.  Numbers (not booleans) compare as numbers, strings as strings
(code point order, as ``SqliteStore`` and ``PostgresStore`` compare text).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.store.base import MatchCondition

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Does an item's ``value`` match every field of a ``search`` filter?"""
    if not filter:
        return True
    return all(_compare(_field(value, field), wanted) for field, wanted in filter.items())


def _field(value: Mapping[str, Any], field: str) -> Any:
    """The value at a filter key: a dotted key is a path into nested objects
    (``"user.level"`` is ``value["user"]["level"]``), as SqliteStore reads it
    (``json_extract(value, '$.user.level')``); missing anywhere is ``None``."""
    if "." not in field:
        return value.get(field)
    found: Any = value
    for part in field.split("."):
        if not isinstance(found, Mapping):
            return None
        found = found.get(part)
    return found


def check_filter(filter: Mapping[str, Any] | None) -> None:
    """Refuse an unknown ``$`` operator up front (``ValueError``, as LangGraph's stores)."""
    for wanted in (filter or {}).values():
        if isinstance(wanted, Mapping):
            for name in wanted:
                if isinstance(name, str) and name.startswith("$") and name not in OPERATORS:
                    raise ValueError(f"Unsupported operator: {name}")
            if not any(isinstance(k, str) and k.startswith("$") for k in wanted):
                check_filter(wanted)


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_operator(actual, op, operand) for op, operand in wanted.items())
        if not isinstance(actual, Mapping):
            return False
        return all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(actual, list | tuple) and len(actual) == len(wanted)
                and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True)))
    return bool(actual == wanted)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    if op not in OPERATORS:
        raise ValueError(f"Unsupported operator: {op}")
    if _number(actual) and _number(operand):
        a, b = float(actual), float(operand)
    elif isinstance(actual, str) and isinstance(operand, str):
        a, b = actual, operand  # type: ignore[assignment]
    else:
        return False  # nothing to order by: no match (InMemoryStore raises here)
    if op == "$gt":
        return a > b
    if op == "$gte":
        return a >= b
    if op == "$lt":
        return a < b
    return a <= b


def namespace_matches(namespace: tuple[str, ...],
                      conditions: Iterable[MatchCondition] | None) -> bool:
    """Does ``namespace`` meet every prefix/suffix condition (``*`` matches any label)?"""
    for condition in conditions or ():
        path = tuple(condition.path)
        if len(namespace) < len(path):
            return False
        if condition.match_type == "prefix":
            pairs = zip(namespace, path, strict=False)
        elif condition.match_type == "suffix":
            pairs = zip(reversed(namespace), reversed(path), strict=False)
        else:
            raise ValueError(f"Unsupported match type: {condition.match_type}")
        if any(p != "*" and n != p for n, p in pairs):
            return False
    return True


def fixed_prefix(conditions: Iterable[MatchCondition] | None) -> tuple[str, ...]:
    """The labels every matching namespace must start with (a prefix condition's
    labels before its first ``*``): it narrows the memory query."""
    for condition in conditions or ():
        if condition.match_type == "prefix":
            fixed: list[str] = []
            for label in condition.path:
                if label == "*":
                    break
                fixed.append(label)
            return tuple(fixed)
    return ()
