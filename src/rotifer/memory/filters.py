"""A query's filter: what ``query_memory`` accepts and the checked form the
store runs (times in epoch microseconds, the limit within bounds)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .clock import parse_time
from .errors import invalid
from .model import DEFAULT_QUERY_LIMIT, MAX_QUERY_LIMIT, Category, is_int, parse_category


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """A query filter; every given field must match."""

    category: Category | None = None
    key_prefix: str | None = None
    since: str | None = None
    until: str | None = None
    limit: int = DEFAULT_QUERY_LIMIT

    FIELDS = ("category", "keyPrefix", "since", "until", "limit")

    @classmethod
    def parse(cls, value: object) -> ParsedFilter:
        if value is None:
            return ParsedFilter(None, None, None, None, DEFAULT_QUERY_LIMIT)
        if isinstance(value, MemoryFilter):
            data: dict[str, Any] = {
                "category": value.category,
                "keyPrefix": value.key_prefix,
                "since": value.since,
                "until": value.until,
                "limit": value.limit,
            }
        elif isinstance(value, Mapping):
            unknown = sorted(set(value) - set(cls.FIELDS), key=str)
            if unknown:
                raise invalid(f"unknown filter field(s): {', '.join(map(str, unknown))}")
            data = dict(value)
        else:
            raise invalid("a filter must be an object")
        category = data.get("category")
        prefix = data.get("keyPrefix")
        if prefix is not None:
            check_prefix(prefix)
        limit = data.get("limit")
        if limit is None:
            limit = DEFAULT_QUERY_LIMIT
        if not (is_int(limit) and 1 <= limit <= MAX_QUERY_LIMIT):
            raise invalid(f"limit must be a whole number from 1 to {MAX_QUERY_LIMIT}, not {limit!r}")
        return ParsedFilter(
            None if category is None else parse_category(category),
            prefix,
            _parse_bound(data.get("since"), "since"),
            _parse_bound(data.get("until"), "until"),
            limit,
        )


def check_prefix(prefix: object) -> None:
    """A prefix is held to the rules of a key's text (it is compared with keys in
    the backend's text type): no NUL, no lone surrogate (no UTF-8 encoder takes one)."""
    if not isinstance(prefix, str):
        raise invalid("keyPrefix must be a string")
    if "\x00" in prefix:
        raise invalid("keyPrefix must not contain a NUL character")
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid("keyPrefix must be valid Unicode (no lone surrogates)") from None


def _parse_bound(value: object, name: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(f"{name} must be an RFC 3339 date-time string")
    try:
        return parse_time(value)
    except ValueError:
        raise invalid(f"{name} is not an RFC 3339 date-time: {value!r}") from None


@dataclass(frozen=True, slots=True)
class ParsedFilter:
    """A validated filter, times in epoch microseconds."""

    category: Category | None
    key_prefix: str | None
    since_us: int | None
    until_us: int | None
    limit: int
