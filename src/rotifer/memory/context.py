"""The run a change was made for, on its audit line.

An integration that acts for something with its own identity -- a LangGraph
thread and run -- sets :func:`audit_context` around its memory calls; every
line a change records for its own action (``write``, ``update``, ``delete``,
``deployer_delete``, a refusal) then carries the optional field
``"context": {"thread_id": ..., "run_id": ...}``.  Lines the change records
for others' entries (``evict``, ``expire``) do not.  Only these two names are
taken, each a string of at most 200 characters, so a line stays small and its
shape known; anything else is left out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

#: The names a context may hold.
CONTEXT_FIELDS = ("thread_id", "run_id")
MAX_CONTEXT_CHARS = 200

AUDIT_CONTEXT: ContextVar[dict[str, str] | None] = ContextVar("rotifer_audit_context",
                                                              default=None)


def clean_context(given: Mapping[str, object] | None) -> dict[str, str] | None:
    """The fields of ``given`` an audit line may carry: the known names with a
    non-empty string value (cut to 200 characters); ``None`` if none is left."""
    if not given:
        return None
    kept = {name: value[:MAX_CONTEXT_CHARS] for name in CONTEXT_FIELDS
            if isinstance(value := given.get(name), str) and value}
    return kept or None


@contextmanager
def audit_context(given: Mapping[str, object] | None) -> Iterator[None]:
    """Every change made in this block carries ``given`` (cleaned) on its lines."""
    token = AUDIT_CONTEXT.set(clean_context(given))
    try:
        yield
    finally:
        AUDIT_CONTEXT.reset(token)
