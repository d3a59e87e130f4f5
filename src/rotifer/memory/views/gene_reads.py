"""A gene's read and query (``read_memory``, ``query_memory``), and the picking
read integrations use (``pick_memory``).

The read rule is here once: an entry's ``readScope`` lets the gene in or not
(:func:`~rotifer.memory.policy.scope_allows`, for the full and the lean paths
alike; see :mod:`.gene_view`), a refused read is audited, and a read notes its
reader in ``lastAccessedBy``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from ..clock import format_time
from ..engine.changes import Change, to_entry
from ..errors import denied, invalid
from ..filters import MemoryFilter, ParsedFilter
from ..model import (
    MAX_QUERY_BYTES,
    AccessPolicy,
    Category,
    MemoryEntry,
    check_key,
    entry_id,
    parse_category,
    stored_entry,
)
from ..policy import Actor, scope_allows
from ..storage.backend import NEWEST_PAGE, Row, Transaction
from ..storage.rows import CATEGORIES, POLICIES, UNREADABLE
from ..storage.sql_text import prefix_upper_bound
from .gene_view import FULL, Full, GeneView
from .scan import pick_newest

T = TypeVar("T")


class GeneReads(GeneView):
    """``read_memory``, ``query_memory`` and ``pick_memory`` of a gene's view."""

    # -- read -------------------------------------------------------------------

    def read_memory(self, key: str, category: Category | str | None = None) -> MemoryEntry | None:
        if self.store.lean_paths:
            found = self._read_lean(key, category)
            if found is not FULL:
                return cast("MemoryEntry | None", found)
        actor = self._require_actor("read", key)
        check_key(key)
        wanted = None if category is None else parse_category(category)
        store = self.store
        now = store.clock.now_us()
        with store.backend.peek() as tx:
            opened = tx.lookup(self.agent_id, key, now)  # one statement
        _, stale, row = (None, False, None) if opened is None else opened
        if not stale:
            if row is None or (wanted is not None and row.category is not wanted):
                return None
            if not scope_allows(row.access.read_scope, actor, row.created_by, row.creator_domain):
                store.change(self.agent_id, actor.gene_id,
                             lambda tx, rec, ch: self._read_in(tx, ch, key, wanted, actor), key)
                return None  # pragma: no cover - _read_in refuses
            if row.last_accessed_by == actor.gene_id:
                return to_entry(row)  # nothing changes, so nothing is written
            # Only lastAccessedBy changes: no change number, no audit line, so no
            # lock and no transaction -- one statement that applies only if the
            # entry is still the one looked up (else the full way, below).
            with store.backend.peek() as tx:
                if tx.touch_if(self.agent_id, key, actor.gene_id, row.seq, now):
                    return to_entry(row, actor.gene_id)
        return store.change(self.agent_id, actor.gene_id,
                            lambda tx, rec, ch: self._read_in(tx, ch, key, wanted, actor), key)

    def _read_in(self, tx: Transaction, change: Change, key: str, wanted: Category | None,
                 actor: Actor) -> MemoryEntry | None:
        row = change.row
        if row is None or (wanted is not None and row.category is not wanted):
            return None
        if not scope_allows(row.access.read_scope, actor, row.created_by, row.creator_domain):
            change.refuse(denied(
                f"gene may not read {key!r}: its readScope is {row.access.read_scope.value}"),
                "read", key, row.category)
            return None
        if row.last_accessed_by != actor.gene_id:
            tx.touch(self.agent_id, key, actor.gene_id)
        return to_entry(row, actor.gene_id)

    def _read_lean(self, key: object, category: object) -> MemoryEntry | Full | None:
        """``read_memory`` of an entry its reader read last, or of no entry.

        What it skips: the category filter's parsing (only without one), the
        Change machinery, which a read that changes nothing never needs, and
        the context manager and transaction object around its one statement
        (``Backend.peek_entry``).  The statement is the full path's lookup
        with only the columns the entry needs (``read_sql``, no agent record,
        no ``Row``); the entry's fields are taken from the decoder's own
        tables, and anything they do not cover (or a damaged row) goes the
        full way, which decodes it and says what is wrong.  Anything else --
        something expired, a refusal (audited), a read that must note a new
        reader in ``lastAccessedBy`` -- is the full path's too."""
        actor = self.actor
        if actor is None or category is not None:
            return FULL
        check_key(key)
        key = cast(str, key)  # check_key passed
        store, agent = self.store, self.agent_id
        backend = store.backend
        found = backend.peek_entry(agent, key, store.clock.now_us())
        if found is None:
            return None  # no such agent
        (expired, cat_text, value, created_by, creator_domain, last_by, created_us, updated_us,
         read_text, write_text, share_text, retention_text) = found
        if expired:
            return FULL
        if cat_text is None:
            return None  # no such entry
        access = POLICIES.get((read_text, write_text, share_text))
        cat = CATEGORIES.get(cat_text)
        gene = actor.gene_id
        if access is None or cat is None or value.__class__ is not bytes or last_by != gene:
            return FULL
        if not scope_allows(access.read_scope, actor, created_by, creator_domain):
            return FULL  # refused: the full path audits it
        if retention_text is None:
            retention = None
        else:
            try:
                retention = backend.retention_of(retention_text)
            except UNREADABLE:
                return FULL
        return stored_entry(entry_id(agent, key), cat, key, value, created_by, gene,
                            format_time(created_us), format_time(updated_us), access, retention)

    # -- query ------------------------------------------------------------------

    def query_memory(self, filter: MemoryFilter | dict[str, Any] | None = None
                     ) -> list[MemoryEntry]:
        if self.store.lean_paths:
            answer = self._query_lean(filter)
            if answer is not FULL:
                return cast("list[MemoryEntry]", answer)
        actor = self._require_actor("query")
        wanted = MemoryFilter.parse(filter)
        store = self.store
        store.purge_expired(self.agent_id)
        now = store.clock.now_us()
        # Usually the first page answers: it is one statement, so one snapshot,
        # and needs no transaction (PostgreSQL: no BEGIN and COMMIT round trips).
        # The first page is sized by the limit (an index serves it in recency
        # order), so asking for the newest ten costs ten rows however many match.
        with store.backend.peek() as tx:
            found = self._collect(tx, wanted, actor, now, min(wanted.limit, NEWEST_PAGE))
        if found is None:  # more pages: all of them from one snapshot
            with store.backend.read() as tx:
                found = self._collect(tx, wanted, actor, now, None)
        assert found is not None  # without a page bound it always answers
        return found

    def _collect(self, tx: Transaction, wanted: ParsedFilter, actor: Actor, now: int,
                 most: int | None) -> list[MemoryEntry] | None:
        """The query's answer from ``tx``; ``None`` if it needs more than the
        first ``most`` rows (and so more than the one statement of the first page)."""
        found: list[MemoryEntry] = []
        total = 0
        rows: Iterator[Row] = tx.iter_newest(
            self.agent_id, category=wanted.category, key_prefix=wanted.key_prefix,
            since_us=wanted.since_us, until_us=wanted.until_us, first=wanted.limit)
        for scanned, row in enumerate(rows, 1):
            if (row.expires_us is None or row.expires_us > now) and scope_allows(
                    row.access.read_scope, actor, row.created_by, row.creator_domain):
                total += row.size
                if total > MAX_QUERY_BYTES:
                    raise invalid(
                        "the matching entries are larger than 4 MiB in total: lower limit or "
                        "narrow the filter")
                found.append(to_entry(row))
                if len(found) >= wanted.limit:
                    return found
            if scanned == most:
                return None  # the page is used up and more rows may follow
        return found

    def _query_lean(self, filter: object) -> list[MemoryEntry] | Full:
        """``query_memory`` answered by its first page, nothing expired.

        What it skips: the purge's second look-up (the "has anything expired?"
        statement is the same, but an answer of yes goes the full way, which
        purges), and per row the ``Row``: the rows come undecoded
        (``iter_newest_rows``); the category, the access policy (one shared
        object per combination) and the retention policy are taken from the
        decoder's own tables, and anything the common case does not cover --
        a text no table knows, a value not stored as bytes, a retention
        policy that does not parse -- hands the whole query to the full path,
        which decodes it and says what is wrong.  The rows, their order and
        the page are the backend's, the same statements as the full path's."""
        actor = self.actor
        if actor is None:
            return FULL
        wanted = MemoryFilter.parse(filter)
        store, agent = self.store, self.agent_id
        now = store.clock.now_us()
        limit = wanted.limit
        most = min(limit, NEWEST_PAGE)
        prefix = wanted.key_prefix
        # A key under the prefix is one in [prefix, bound), the range the backends
        # read: two comparisons per row, where ``key.startswith(prefix)`` cost
        # several times that (its arguments parsed per call).  No bound (a prefix
        # of U+10FFFF only): the full path.
        low, bound = prefix or "", prefix_upper_bound(prefix) if prefix else None
        if prefix and bound is None:
            return FULL
        found: list[MemoryEntry] = []
        with store.backend.peek() as tx:
            opened = tx.lookup(agent, None, now)  # = store.has_expired's statement
            if opened is not None:
                _, stale, _ = opened
                if stale:
                    return FULL
            now = store.clock.now_us()  # read again, as the full path does after its purge check
            rows = tx.iter_newest_rows(agent, category=wanted.category, key_prefix=prefix,
                                       since_us=wanted.since_us, until_us=wanted.until_us,
                                       first=limit)
            total = 0
            retention_of = store.backend.retention_of
            # The previous row's policy and category texts and what they decoded
            # to: rows in a page mostly share them, and comparing texts costs
            # less than hashing them afresh for the tables (each text is a new
            # string).
            last_read = last_write = last_share = last_cat_text = None
            last_access: AccessPolicy | None = None
            last_category: Category | None = None
            # One named decoder for this query: the row's columns unpacked in
            # the order of storage.sql_text.ROW_NAMES (a named tuple per row
            # costs ~10% of a lean query of 100; test_lean.py compares every
            # field with the full path's decoding).
            for scanned, (_, key, cat_text, value, created_by, creator_domain, last_by,
                          created_us, updated_us, read_text, write_text, share_text,
                          retention_text, expires_us, _) in enumerate(rows, 1):
                if read_text == last_read and write_text == last_write \
                        and share_text == last_share:
                    access = last_access
                else:
                    access = POLICIES.get((read_text, write_text, share_text))
                    last_read, last_write, last_share, last_access = (read_text, write_text,
                                                                      share_text, access)
                if cat_text == last_cat_text:
                    category = last_category
                else:
                    category = CATEGORIES.get(cat_text)
                    last_cat_text, last_category = cat_text, category
                if access is None or category is None or value.__class__ is not bytes or (
                        bound is not None and (key < low or key >= bound)):
                    return FULL  # unusual (or damaged): the full path decodes and says so
                if retention_text is None:
                    retention = None
                else:
                    try:
                        retention = retention_of(retention_text)
                    except UNREADABLE:
                        return FULL
                if (expires_us is None or expires_us > now) and scope_allows(
                        access.read_scope, actor, created_by, creator_domain):
                    total += len(key.encode()) + len(value)
                    if total > MAX_QUERY_BYTES:
                        raise invalid(
                            "the matching entries are larger than 4 MiB in total: lower limit "
                            "or narrow the filter")
                    updated_at = format_time(updated_us)
                    found.append(stored_entry(
                        entry_id(agent, key), category, key, value, created_by, last_by,
                        updated_at if created_us == updated_us else format_time(created_us),
                        updated_at, access, retention))
                    if len(found) >= limit:
                        return found
                if scanned == most:
                    return FULL  # more pages: the full path reads them from one snapshot
        return found

    def pick_memory(self, key_prefix: str, pick: Callable[[MemoryEntry], T | None],
                    count: int | None) -> list[T]:
        """Up to ``count`` non-``None`` answers of ``pick`` over the entries under
        ``key_prefix`` this gene may read, newest first, from one snapshot: what
        ``query_memory`` answers, read only until ``count`` are kept and without
        its 1000-entry and 4 MiB bounds (:mod:`rotifer.memory.views.scan`; for
        integrations such as the LangGraph store, not a gene's call)."""
        actor = self._require_actor("query")
        return pick_newest(self.store, self.agent_id, key_prefix, lambda row: scope_allows(
            row.access.read_scope, actor, row.created_by, row.creator_domain), pick, count)
