"""The data model of the Memory API: categories, scopes, policies, entries
(the query filter is :mod:`rotifer.memory.filters`; what a key, a value and
an agent id must be, and an entry's id, are :mod:`rotifer.memory.keys`,
whose names are importable from here as well).

Everything that comes from a gene is parsed, once, into these types; a value
that does not fit raises MEMORY_INVALID_INPUT before the store is touched.
Policies (and filters) may arrive as the seed's JSON objects (camelCase) or as
the dataclasses, so the WASM and Node bridges can pass parsed request JSON
straight through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Final, TypeVar

from .clock import format_time
from .errors import invalid
from .keys import MAX_KEY_BYTES as MAX_KEY_BYTES
from .keys import MAX_VALUE_BYTES as MAX_VALUE_BYTES
from .keys import check_agent_id as check_agent_id
from .keys import check_key, check_value, entry_id, entry_ids

MAX_QUERY_BYTES: Final = 4 * 1024 * 1024
MAX_QUERY_LIMIT: Final = 1000
DEFAULT_QUERY_LIMIT: Final = 100
MAX_RETENTION_DAYS: Final = 2_147_483_647


class Category(StrEnum):
    PREFERENCE = "PREFERENCE"
    PATTERN = "PATTERN"
    CONTEXT = "CONTEXT"
    CACHE = "CACHE"


#: The order in which cleanup makes room; PREFERENCE is never evicted.
EVICTION_ORDER: Final = (Category.CACHE, Category.PATTERN, Category.CONTEXT)


class Scope(StrEnum):
    CREATOR_GENE_ONLY = "CREATOR_GENE_ONLY"
    SAME_DOMAIN = "SAME_DOMAIN"
    ALL_GENES = "ALL_GENES"
    DEPLOYER_CONFIGURED = "DEPLOYER_CONFIGURED"


class SharePolicy(StrEnum):
    PRIVATE = "PRIVATE"
    ANONYMIZED_SHARE = "ANONYMIZED_SHARE"
    KNOWLEDGE_GENE = "KNOWLEDGE_GENE"


class _Unset(Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


#: "Argument not given", distinct from ``None`` (the JSON ``null``).
UNSET: Final = _Unset.UNSET
Unset = _Unset


_E = TypeVar("_E", bound=StrEnum)


def _enum_value(kind: type[_E], value: object, what: str) -> _E:
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    names = ", ".join(m.value for m in kind)
    raise invalid(f"unknown {what} {value!r}; expected one of {names}")


#: Each category by its name (a ``Category`` is a ``str`` of it too).
_CATEGORY_OF: Final = {c.value: c for c in Category}


def parse_category(value: object) -> Category:
    # speed: a dict look-up for a str or a Category itself, instead of
    # isinstance and Enum's __call__ (every write parses its category): ~2k
    # instructions instead of ~7k (callgrind).
    if value.__class__ is str or value.__class__ is Category:
        found = _CATEGORY_OF.get(value)
        if found is not None:
            return found
    return _enum_value(Category, value, "category")


def _exact_fields(data: Mapping[str, Any], fields: tuple[str, ...], what: str) -> None:
    unknown = sorted(set(data) - set(fields), key=str)
    missing = [f for f in fields if f not in data]
    if unknown:
        raise invalid(f"{what} has unknown field(s) {', '.join(map(str, unknown))}")
    if missing:
        raise invalid(f"{what} is missing field(s) {', '.join(missing)}")


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """Who may read, write and share an entry."""

    read_scope: Scope = Scope.SAME_DOMAIN
    write_scope: Scope = Scope.SAME_DOMAIN
    share_policy: SharePolicy = SharePolicy.PRIVATE

    FIELDS = ("readScope", "writeScope", "sharePolicy")

    @classmethod
    def parse(cls, value: object) -> AccessPolicy:
        """Accept an AccessPolicy or the seed's JSON object (all three fields)."""
        if isinstance(value, AccessPolicy):
            read, write, share = value.read_scope, value.write_scope, value.share_policy
        elif isinstance(value, Mapping):
            _exact_fields(value, cls.FIELDS, "accessPolicy")
            read, write, share = (value[f] for f in cls.FIELDS)
        else:
            raise invalid("accessPolicy must be an object with readScope, writeScope, sharePolicy")
        return cls(
            _enum_value(Scope, read, "readScope"),
            _enum_value(Scope, write, "writeScope"),
            _enum_value(SharePolicy, share, "sharePolicy"),
        )

    def to_json(self) -> dict[str, str]:
        return {
            "readScope": self.read_scope.value,
            "writeScope": self.write_scope.value,
            "sharePolicy": self.share_policy.value,
        }


DEFAULT_ACCESS_POLICY: Final = AccessPolicy()


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long one entry is kept; ``max_retention_days=None`` never expires."""

    max_retention_days: int | None
    auto_delete_on_termination: bool = False
    anonymization_supported: bool = False

    FIELDS = ("maxRetentionDays", "autoDeleteOnTermination", "anonymizationSupported")

    @classmethod
    def parse(cls, value: object) -> RetentionPolicy:
        """Exactly the three fields with the right types, or MEMORY_INVALID_INPUT."""
        if isinstance(value, RetentionPolicy):
            days: object = value.max_retention_days
            auto: object = value.auto_delete_on_termination
            anon: object = value.anonymization_supported
        elif isinstance(value, Mapping):
            _exact_fields(value, cls.FIELDS, "retentionPolicy")
            days, auto, anon = (value[f] for f in cls.FIELDS)
        else:
            raise invalid("retentionPolicy must be null or an object with " + ", ".join(cls.FIELDS))
        if days is not None and not (is_int(days) and 1 <= days <= MAX_RETENTION_DAYS):  # type: ignore[operator]
            raise invalid(
                f"maxRetentionDays must be a whole number from 1 to {MAX_RETENTION_DAYS} or null, "
                f"not {days!r}"
            )
        if not isinstance(auto, bool):
            raise invalid("autoDeleteOnTermination must be a boolean")
        if not isinstance(anon, bool):
            raise invalid("anonymizationSupported must be a boolean")
        return cls(days, auto, anon)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        return {
            "maxRetentionDays": self.max_retention_days,
            "autoDeleteOnTermination": self.auto_delete_on_termination,
            "anonymizationSupported": self.anonymization_supported,
        }


def parse_retention(value: object) -> RetentionPolicy | None:
    """``None`` (JSON null) means: follow the agent's data policy."""
    return None if value is None else RetentionPolicy.parse(value)


@dataclass(frozen=True, slots=True)
class DataPolicy:
    """The agent's data policy, set by the deployer.

    The default supports no anonymization and sets no retention limit.
    """

    max_retention_days: int | None = None
    anonymization_supported: bool = False

    FIELDS = ("maxRetentionDays", "anonymizationSupported")

    @classmethod
    def from_json(cls, value: object) -> DataPolicy:
        if not isinstance(value, Mapping):
            raise invalid("a data policy must be a JSON object")
        _exact_fields(value, cls.FIELDS, "data policy")
        days, anon = value["maxRetentionDays"], value["anonymizationSupported"]
        if days is not None and not (is_int(days) and 1 <= days <= MAX_RETENTION_DAYS):
            raise invalid(f"data policy maxRetentionDays must be 1..{MAX_RETENTION_DAYS} or null")
        if not isinstance(anon, bool):
            raise invalid("data policy anonymizationSupported must be a boolean")
        return cls(days, anon)

    def to_json(self) -> dict[str, Any]:
        return {
            "maxRetentionDays": self.max_retention_days,
            "anonymizationSupported": self.anonymization_supported,
        }


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One memory entry, as genes see it."""

    entry_id: str
    category: Category
    key: str
    value: bytes
    created_by: str
    last_accessed_by: str
    created_at: str
    updated_at: str
    access_policy: AccessPolicy
    retention_policy: RetentionPolicy | None

    @property
    def size(self) -> int:
        """Bytes this entry counts toward the quota: UTF-8 key plus value."""
        return len(self.key.encode()) + len(self.value)

    def to_json(self, *, include_value: bool = True) -> dict[str, Any]:
        """The seed's JSON form: camelCase, value in base64."""
        data: dict[str, Any] = {
            "entryId": self.entry_id,
            "category": self.category.value,
            "key": self.key,
        }
        if include_value:
            import base64

            data["value"] = base64.b64encode(self.value).decode("ascii")
        data.update(
            createdBy=self.created_by,
            lastAccessedBy=self.last_accessed_by,
            createdAt=self.created_at,
            updatedAt=self.updated_at,
            accessPolicy=self.access_policy.to_json(),
            retentionPolicy=None if self.retention_policy is None else self.retention_policy.to_json(),
        )
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryEntry:
        """Inverse of :meth:`to_json` (used by export/import and bridges)."""
        import base64

        try:
            return cls(
                entry_id=str(data["entryId"]),
                category=parse_category(data["category"]),
                key=str(data["key"]),
                value=base64.b64decode(data["value"], validate=True),
                created_by=str(data["createdBy"]),
                last_accessed_by=str(data["lastAccessedBy"]),
                created_at=str(data["createdAt"]),
                updated_at=str(data["updatedAt"]),
                access_policy=AccessPolicy.parse(data["accessPolicy"]),
                retention_policy=parse_retention(data["retentionPolicy"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise invalid(f"not a memory entry: {exc}") from None


_new_object = object.__new__


def _slot_setter(name: str) -> Callable[[MemoryEntry, Any], None]:
    """The ``__set__`` of field ``name``'s slot, found by name: reordering the
    dataclass's fields cannot swap two of them in :func:`stored_entry`."""
    if name not in {f.name for f in dataclasses.fields(MemoryEntry)}:
        raise AttributeError(f"MemoryEntry has no field {name!r}")
    setter: Callable[[MemoryEntry, Any], None] = MemoryEntry.__dict__[name].__set__
    return setter


_set_entry_id = _slot_setter("entry_id")
_set_category = _slot_setter("category")
_set_key = _slot_setter("key")
_set_value = _slot_setter("value")
_set_created_by = _slot_setter("created_by")
_set_last_accessed_by = _slot_setter("last_accessed_by")
_set_created_at = _slot_setter("created_at")
_set_updated_at = _slot_setter("updated_at")
_set_access_policy = _slot_setter("access_policy")
_set_retention_policy = _slot_setter("retention_policy")


def stored_entry(entry_id: str, category: Category, key: str, value: bytes, created_by: str,
                 last_accessed_by: str, created_at: str, updated_at: str,
                 access_policy: AccessPolicy, retention_policy: RetentionPolicy | None
                 ) -> MemoryEntry:
    """``MemoryEntry(...)`` for fields the store has already checked, built the
    way the frozen dataclass's own ``__init__`` does (it sets each slot through
    ``object.__setattr__``) but with the slot setters looked up once: about
    twice as fast, and a query builds one entry per row."""
    entry: MemoryEntry = _new_object(MemoryEntry)
    _set_entry_id(entry, entry_id)
    _set_category(entry, category)
    _set_key(entry, key)
    _set_value(entry, value)
    _set_created_by(entry, created_by)
    _set_last_accessed_by(entry, last_accessed_by)
    _set_created_at(entry, created_at)
    _set_updated_at(entry, updated_at)
    _set_access_policy(entry, access_policy)
    _set_retention_policy(entry, retention_policy)
    return entry


__all__ = [
    "DEFAULT_ACCESS_POLICY",
    "EVICTION_ORDER",
    "UNSET",
    "AccessPolicy",
    "Category",
    "DataPolicy",
    "MemoryEntry",
    "RetentionPolicy",
    "Scope",
    "SharePolicy",
    "check_key",
    "check_value",
    "entry_id",
    "entry_ids",
    "format_time",
    "parse_category",
    "parse_retention",
]
