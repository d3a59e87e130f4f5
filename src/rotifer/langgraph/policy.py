"""Per-namespace settings: the category, access and retention policies a put
gives the memory entry.

The settings are a mapping from namespace prefixes to
:class:`NamespacePolicy`; an item takes the policy of the longest prefix of its
namespace that has one, else the default (``CONTEXT``, rotifer's default access
policy, the agent's data policy for retention).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rotifer.memory.errors import invalid
from rotifer.memory.model import (
    UNSET,
    AccessPolicy,
    Category,
    RetentionPolicy,
    Unset,
    parse_category,
    parse_retention,
)

#: The category of an item whose namespace has no setting.  CONTEXT ("knowledge
#: built up about a task or domain") is what LangGraph's long-term store mostly
#: holds, and of the categories cleanup may remove it goes last.
DEFAULT_CATEGORY = Category.CONTEXT


@dataclass(frozen=True, slots=True)
class NamespacePolicy:
    """What a put under a namespace writes besides the value.

    ``access=None`` gives a new entry rotifer's default (SAME_DOMAIN read and
    write, PRIVATE) and leaves an existing entry's policy as it is;
    ``retention=UNSET`` follows the agent's data policy on a new entry and keeps
    an existing entry's; ``retention=None`` is the JSON ``null`` (follow the data
    policy, set explicitly -- only the creator may set it on an existing entry).
    """

    category: Category = DEFAULT_CATEGORY
    access: AccessPolicy | None = None
    retention: RetentionPolicy | Unset | None = field(default=UNSET)

    def __post_init__(self) -> None:
        # Accept the names and JSON objects the memory accepts, checked now
        # (MEMORY_INVALID_INPUT) rather than at the first put.
        object.__setattr__(self, "category", parse_category(self.category))
        if self.access is not None:
            object.__setattr__(self, "access", AccessPolicy.parse(self.access))
        if self.retention is not UNSET:
            object.__setattr__(self, "retention", parse_retention(self.retention))

    @classmethod
    def parse(cls, value: NamespacePolicy | Category | str | Mapping[str, Any]
              ) -> NamespacePolicy:
        """A policy from itself, a category name, or a JSON object with the fields
        ``category``, ``accessPolicy`` and ``retentionPolicy`` (all optional)."""
        if isinstance(value, NamespacePolicy):
            return value
        if isinstance(value, str):
            return cls(parse_category(value))
        if not isinstance(value, Mapping):
            raise invalid("a namespace policy is a category name or an object")
        unknown = sorted(set(value) - {"category", "accessPolicy", "retentionPolicy"}, key=str)
        if unknown:
            raise invalid(f"unknown namespace policy field(s): {', '.join(map(str, unknown))}")
        return cls(value.get("category", DEFAULT_CATEGORY), value.get("accessPolicy"),
                   value.get("retentionPolicy", UNSET))


class Policies:
    """The settings of one store: the policy for any namespace."""

    def __init__(self, settings: Mapping[tuple[str, ...], Any] | None = None,
                 default: NamespacePolicy | Category | str | Mapping[str, Any] | None = None
                 ) -> None:
        self.default = NamespacePolicy() if default is None else NamespacePolicy.parse(default)
        self._by_prefix: dict[tuple[str, ...], NamespacePolicy] = {}
        for prefix, policy in (settings or {}).items():
            if not isinstance(prefix, tuple) or not all(
                    isinstance(label, str) and label for label in prefix):
                raise invalid(f"a namespace policy's prefix must be a tuple of labels: {prefix!r}")
            self._by_prefix[prefix] = NamespacePolicy.parse(policy)
        self._longest = max((len(p) for p in self._by_prefix), default=0)

    def for_namespace(self, namespace: tuple[str, ...]) -> NamespacePolicy:
        for depth in range(min(len(namespace), self._longest), -1, -1):
            found = self._by_prefix.get(namespace[:depth])
            if found is not None:
                return found
        return self.default
