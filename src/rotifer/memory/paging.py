"""Every entry a gene may read under a key prefix, newest first, through ``query_memory``.

``query_memory`` answers at most 1000 entries (and 4 MiB) a call.  Reading
all of them -- a LangGraph store's search, the resources an MCP server lists --
pages through it: each next page ends where the last one did (``until`` one
microsecond after its oldest ``updatedAt``, skipping the keys already given at
that instant); a page over the 4 MiB bound is asked again with a smaller
``limit``.  Each page is one snapshot; the walk as a whole is not.  Shared by
the integrations (``rotifer.langgraph``, ``rotifer.mcp``) so they page alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .clock import format_time, parse_time
from .errors import AgentMemoryError, ErrorCode, storage
from .model import MAX_QUERY_LIMIT, MemoryEntry

__all__ = ["newest_pages"]


def newest_pages(query: Callable[[dict[str, Any]], list[MemoryEntry]],
                 key_prefix: str = "") -> Iterator[MemoryEntry]:
    """The entries ``query`` (a gene's ``query_memory``) finds under ``key_prefix``,
    newest first, a page at a time."""
    limit = MAX_QUERY_LIMIT
    until: str | None = None
    given_at_edge: set[str] = set()
    while True:
        wanted: dict[str, Any] = {"keyPrefix": key_prefix, "limit": limit}
        if until is not None:
            wanted["until"] = until
        try:
            page = query(wanted)
        except AgentMemoryError as exc:
            if exc.code is ErrorCode.INVALID_INPUT and limit > 1:
                limit = max(1, limit // 4)  # the only bound a valid filter can break: 4 MiB
                continue
            raise
        fresh = [entry for entry in page if entry.key not in given_at_edge]
        yield from fresh
        if len(page) < limit:
            return
        if not fresh:
            raise storage(f"more than {limit} entries share one updatedAt: cannot page")
        edge = page[-1].updated_at
        given_at_edge = {entry.key for entry in page if entry.updated_at == edge}
        until = format_time(parse_time(edge) + 1)
