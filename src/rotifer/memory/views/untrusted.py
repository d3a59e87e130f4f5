"""Storing untrusted input without letting it poison the agent's memory.

The seed: "If a gene writes content from outside the agent into memory
(messages, issues, web pages, documents), whoever wrote that content can
influence what is stored ... Write PREFERENCE entries only from trusted
sources.  Put untrusted input in CACHE, or give it a maxRetentionDays so it
expires."  :func:`write_untrusted` is that advice as a call a gene can make
instead of ``write_memory``::

    from rotifer.memory.views.untrusted import write_untrusted

    def express(input, ctx):
        # a web page is untrusted: cached, so it is the first thing cleared for space
        write_untrusted(ctx.memory, "reader/page", input["html"].encode())
        # a summary of it may be kept longer, but it expires a week after its last update
        write_untrusted(ctx.memory, "reader/summary", summary, category="CONTEXT",
                        max_retention_days=7)

Rules:

- ``CACHE`` (the default) is always accepted; with ``max_retention_days`` the
  entry also expires, without it it follows the agent's data policy.
- ``PATTERN``, ``CONTEXT`` and ``PREFERENCE`` need ``max_retention_days``
  (a whole number of days, 1 to 2147483647); without it the call fails with
  MEMORY_INVALID_INPUT and nothing is written -- even when the agent's data
  policy has a limit today, since the deployer may lift it later.
- The retention policy written is ``{maxRetentionDays: N,
  autoDeleteOnTermination: false, anonymizationSupported: false}``.  Every
  other rule of ``write_memory`` still holds: the access policy (default
  SAME_DOMAIN / SAME_DOMAIN / PRIVATE), quota and cleanup, the data policy (a
  retention longer than it allows is MEMORY_ACCESS_DENIED), and only an entry's
  creator may change its retention policy -- so a gene that rewrites someone
  else's entry with this helper is refused unless the policies are the same.

A poisoned entry that got in anyway is removed by the deployer:
``rotifer agent memory delete AGENT --key KEY`` (or ``--category``), or
``MemoryStore.deployer(agent).delete_key(key)``; either is audited with the
actor ``deployer``.
"""

from __future__ import annotations

from typing import Any

from ..errors import invalid
from ..model import UNSET, AccessPolicy, Category, MemoryEntry, RetentionPolicy, parse_category
from .gene_memory import GeneMemoryAccess

__all__ = ["UNTRUSTED_NEEDS_RETENTION", "untrusted_retention", "write_untrusted"]

#: The categories that are never, or only late, cleared for space: untrusted
#: input may go there only with a retention limit.
UNTRUSTED_NEEDS_RETENTION = frozenset({Category.PREFERENCE, Category.PATTERN, Category.CONTEXT})


def untrusted_retention(category: Category | str, max_retention_days: int | None
                        ) -> RetentionPolicy | None:
    """The retention policy :func:`write_untrusted` writes (``None``: follow the agent's
    data policy, only for CACHE); MEMORY_INVALID_INPUT if the pair is not allowed."""
    cat = parse_category(category)
    if max_retention_days is None:
        if cat in UNTRUSTED_NEEDS_RETENTION:
            raise invalid(
                f"untrusted input may be stored as {cat.value} only with a maxRetentionDays "
                "(or put it in CACHE): a poisoned entry must expire")
        return None
    return RetentionPolicy.parse({
        "maxRetentionDays": max_retention_days,
        "autoDeleteOnTermination": False,
        "anonymizationSupported": False,
    })


def write_untrusted(
    memory: GeneMemoryAccess,
    key: str,
    value: bytes,
    *,
    category: Category | str = Category.CACHE,
    max_retention_days: int | None = None,
    access_policy: AccessPolicy | dict[str, Any] | None = None,
) -> MemoryEntry:
    """Write input from outside the agent: in CACHE, or with a retention limit.

    Returns the stored entry, as ``write_memory`` does.  Raises
    MEMORY_INVALID_INPUT (nothing written) for PATTERN, CONTEXT or PREFERENCE
    without ``max_retention_days`` or for a bad number of days, and whatever
    ``write_memory`` raises otherwise.
    """
    retention = untrusted_retention(category, max_retention_days)
    return memory.write_memory(
        key, value, category, access_policy,
        UNSET if retention is None else retention,
    )
