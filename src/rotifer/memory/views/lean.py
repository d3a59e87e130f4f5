"""The lean paths of a gene's write, read and query (issue 24, targets 1-2).

Each is ONE function beside the full path in :mod:`rotifer.memory.gene_memory`
and does exactly what the full path does in the common case -- the same SQL
statements in the same order (a read: the same lookup, fewer columns), the same
audit bytes appended before the commit (write-ahead), the same returned entry --
with less Python around it: no
``Change`` object, no closure handed to ``MemoryStore.change``, no re-parsing
of what the store decoded already, each timestamp, entry id and enum value
read once, the audit line's dict and JSON built once.  Whenever the call is
not the common case (anything expired, an eviction, a refusal, a policy given
or changed, a value or category of an unusual type, a query needing more than
its first page, a read that must note its reader) a lean path answers
:data:`FULL` before it has changed anything, and the caller goes the full way,
which then decides and says everything itself.

Both backends run them: they use only the backend interface
(:class:`~rotifer.memory.backend.Transaction`).  ``tests/memory/test_lean.py``
runs the lean and full paths on the same operations (with every fallback) on
two stores and compares entries, errors, audit bytes and stored rows;
``MemoryStore.lean_paths`` (the backend's choice: SQLite yes, PostgreSQL no,
where a hand-over would repeat round trips) turns them on or off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

from ..audit.actions import UPDATE, WRITE
from ..audit.file import Placed
from ..audit.index import rows_for
from ..audit.text import audit_line, line_text
from ..clock import format_time
from ..context import AUDIT_CONTEXT
from ..engine.changes import Change, settle
from ..errors import invalid
from ..filters import MemoryFilter
from ..model import (
    DEFAULT_ACCESS_POLICY,
    MAX_QUERY_BYTES,
    MAX_VALUE_BYTES,
    UNSET,
    AccessPolicy,
    Category,
    MemoryEntry,
    Scope,
    _set_access_policy,
    _set_category,
    _set_created_at,
    _set_created_by,
    _set_entry_id,
    _set_key,
    _set_last_accessed_by,
    _set_retention_policy,
    _set_updated_at,
    _set_value,
    check_key,
    entry_id,
    stored_entry,
)
from ..model import (
    _new_object as _new_entry,
)
from ..policy import expires_at
from ..storage.backend import NEWEST_PAGE, new_row
from ..storage.rows import _CATEGORIES, _POLICIES, _UNREADABLE

if TYPE_CHECKING:
    from .gene_memory import GeneMemory


class _Full:
    """The answer "take the full path" (nothing was changed)."""

    def __repr__(self) -> str:
        return "FULL"


FULL: Final = _Full()


class _GoFull(Exception):
    """Raised inside the write transaction to roll it back (it has only looked)
    and take the full path."""


_ALL, _CREATOR, _DOMAIN = Scope.ALL_GENES, Scope.CREATOR_GENE_ONLY, Scope.SAME_DOMAIN


def write_lean(view: GeneMemory, key: object, value: object, category: object,
               access_policy: object, retention_policy: object) -> MemoryEntry | _Full:
    """``write_memory`` without eviction, refusal, expiry or a policy change.

    What it skips, and why that is safe: the policies are not parsed (it runs
    only when none are given: a new entry gets the defaults, which every data
    policy allows; an update keeps the stored ones, so nothing needs checking
    again); the key and value are checked once (``check_key``, the same errors
    as the full path); the row, the audit line (dict and JSON) and the entry
    are built once from the same values.  The statements are the full path's
    (``lookup_holding``, ``put``, ``log_lines``, the append, ``update_agent``,
    commit), in its order; a failure after the append is settled as the full
    path settles it (``rolled_back`` if not committed)."""
    actor = view.actor
    if actor is None or access_policy is not None or retention_policy is not UNSET:
        return FULL
    size = len(check_key(key))  # raises what the full path raises, before anything
    if value.__class__ is not bytes or (category.__class__ is not str \
            and category.__class__ is not Category):
        return FULL
    data = value
    cat = category if category.__class__ is Category else _CATEGORIES.get(category)
    if cat is None or len(data) > MAX_VALUE_BYTES:
        return FULL
    key = cast(str, key)  # check_key passed
    size += len(data)
    store, agent, gene = view.store, view.agent_id, actor.gene_id
    logged = appended = False
    line: dict[str, Any] = {}
    seq, epoch = 0, ""
    try:
        with store.backend.write(agent) as tx:
            opened, clock_now = tx.lookup_holding(agent, key, store.clock)
            if opened is None or opened[1]:
                raise _GoFull  # no agent, or something to purge first
            record, _, old = opened
            last_us = record.last_us
            now = clock_now if clock_now > last_us else last_us + 1
            seq, epoch = record.next_seq, record.epoch
            if old is None:
                access, retention, created_by, domain, created_us = (
                    DEFAULT_ACCESS_POLICY, None, gene, actor.domain, now)
                old_size = 0
            else:
                access, retention = old.access, old.retention
                created_by, domain, created_us = old.created_by, old.creator_domain, \
                    old.created_us
                scope = access.write_scope
                if not (scope is _ALL or (gene == created_by and scope is not Scope.DEPLOYER_CONFIGURED)
                        or (scope is _DOMAIN and actor.domain is not None
                        and actor.domain == domain)):
                    raise _GoFull  # refused: the full path audits it
                old_size = len(old.key.encode()) + len(old.value)
            used = record.used_bytes - old_size + size
            if used > record.quota_bytes:
                raise _GoFull  # eviction (or refusal): the full path's cleanup
            data_policy = record.data_policy
            row = new_row(agent, key, cat, data, created_by, domain, gene, created_us, now,
                          access, retention, expires_at(now, retention, data_policy), seq)
            ts = format_time(now)
            eid = entry_id(agent, key)
            action = WRITE if old is None else UPDATE
            cat_text: str = cat._value_
            extra: dict[str, Any] = {} if old is None else {"previousBytes": old_size}
            if view.via is not None:
                extra["via"] = view.via
            context = AUDIT_CONTEXT.get()
            if context is not None:
                extra["context"] = context  # as Change.line adds it
            line = audit_line(ts, agent, action, key, cat_text, gene, size, eid, extra, seq,
                              epoch)
            text = line_text(ts, agent, action, key, cat_text, gene, size, eid, extra, seq,
                             epoch)
            tx.put(row)
            logged = True
            texts = [text]
            tx.log_lines(agent, seq, texts)
            placed: Placed = []
            head = store.audit.write([line], texts, placed)
            tx.index_lines(rows_for(agent, placed))
            appended = True
            tx.update_agent(agent, used, seq + 1, now, head)
    except _GoFull:
        return FULL
    except BaseException as exc:
        if logged:
            change = Change(agent, 0, gene, seq=seq, epoch=epoch, lines=[line], logged=True,
                            appended=appended)
            settle(store.backend, store.audit, store.clock, change, exc)
        raise
    return stored_entry(eid, cat, key, data, created_by, gene,
                        ts if created_us == now else format_time(created_us), ts, access,
                        retention)


def read_lean(view: GeneMemory, key: object, category: object) -> MemoryEntry | _Full | None:
    """``read_memory`` of an entry its reader read last, or of no entry.

    What it skips: the category filter's parsing (only without one), the
    scope check's function call (inlined), the Change machinery, which a read
    that changes nothing never needs, and the context manager and transaction
    object around its one statement (``Backend.peek_entry``).  The statement is
    the full path's lookup with only the columns the entry needs
    (``sql_text.read_sql``: 12 values to convert instead of 25, no agent record,
    no ``Row``); the entry's fields are taken from the decoder's own tables, and
    anything they do not cover (or a damaged row) goes the full way, which
    decodes it and says what is wrong.  Anything else -- something expired, a
    refusal (audited), a read that must note a new reader in ``lastAccessedBy``
    -- is the full path's too."""
    actor = view.actor
    if actor is None or category is not None:
        return FULL
    check_key(key)
    key = cast(str, key)  # check_key passed
    store, agent = view.store, view.agent_id
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
    access = _POLICIES.get((read_text, write_text, share_text))
    cat = _CATEGORIES.get(cat_text)
    gene = actor.gene_id
    if access is None or cat is None or value.__class__ is not bytes or last_by != gene:
        return FULL
    scope = access.read_scope
    if not (scope is _ALL or (gene == created_by and scope is not Scope.DEPLOYER_CONFIGURED)
            or (scope is _DOMAIN and actor.domain is not None
                and actor.domain == creator_domain)):
        return FULL
    if retention_text is None:
        retention = None
    else:
        try:
            retention = backend.retention_of(retention_text)
        except _UNREADABLE:
            return FULL
    return stored_entry(entry_id(agent, key), cat, key, value, created_by, gene,
                        format_time(created_us), format_time(updated_us), access, retention)


def query_lean(view: GeneMemory, filter: object) -> list[MemoryEntry] | _Full:
    """``query_memory`` answered by its first page, nothing expired.

    What it skips: the purge's second look-up (the "has anything expired?"
    statement is the same, but an answer of yes goes the full way, which
    purges), and per row everything an entry does not need: the rows come
    undecoded (``iter_newest_rows``), so no ``Row`` is built; the category,
    the access policy (one shared object per combination) and the retention
    policy are taken from the decoder's own tables, and anything the common
    case does not cover -- a text no table knows, a value not stored as bytes,
    a retention policy that does not parse -- hands the whole query to the
    full path, which decodes it and says what is wrong.  The scope check and
    the entry (its slots set directly, as :func:`~rotifer.memory.model.stored_entry`
    does) are inlined.  The rows, their order and the page are the backend's,
    the same statements as the full path's."""
    actor = view.actor
    if actor is None:
        return FULL
    wanted = MemoryFilter.parse(filter)
    store, agent = view.store, view.agent_id
    now = store.clock.now_us()
    limit = wanted.limit
    most = min(limit, NEWEST_PAGE)
    prefix = wanted.key_prefix
    found: list[MemoryEntry] = []
    with store.backend.peek() as tx:
        opened = tx.lookup(agent, None, now)  # = store.has_expired's statement
        if opened is not None and opened[1]:
            return FULL
        now = store.clock.now_us()  # read again, as the full path does after its purge check
        rows = tx.iter_newest_rows(agent, category=wanted.category, key_prefix=prefix,
                                   since_us=wanted.since_us, until_us=wanted.until_us,
                                   first=limit)
        gene, domain = actor.gene_id, actor.domain
        total = 0
        append, policies, categories = found.append, _POLICIES, _CATEGORIES
        retention_of = store.backend.retention_of
        # The previous row's policy and category texts and what they decoded to:
        # rows in a page mostly share them, and comparing texts costs less than
        # hashing them afresh for the tables (each text is a new string); with
        # an entry never updated taking its createdAt from its updatedAt, -5% of
        # a query of 100 rows (CPU time, paired A/B in one process, load ~2).
        last_read = last_write = last_share = last_cat_text = None
        last_access: AccessPolicy | None = None
        last_category: Category | None = None
        for scanned, (_, key, cat_text, value, created_by, creator_domain, last_by, created_us,
                      updated_us, read_text, write_text, share_text, retention_text,
                      expires_us, _) in enumerate(rows, 1):
            if read_text == last_read and write_text == last_write and share_text == last_share:
                access = last_access
            else:
                access = policies.get((read_text, write_text, share_text))
                last_read, last_write, last_share, last_access = (read_text, write_text,
                                                                  share_text, access)
            if cat_text == last_cat_text:
                category = last_category
            else:
                category = categories.get(cat_text)
                last_cat_text, last_category = cat_text, category
            if access is None or category is None or value.__class__ is not bytes or (
                    prefix and not key.startswith(prefix)):
                return FULL  # unusual (or damaged): the full path decodes and says so
            if retention_text is None:
                retention = None
            else:
                try:
                    retention = retention_of(retention_text)
                except _UNREADABLE:
                    return FULL
            scope = access.read_scope
            if (expires_us is None or expires_us > now) and (
                    scope is _ALL or (gene == created_by and scope is not Scope.DEPLOYER_CONFIGURED)
                    or (scope is _DOMAIN and domain is not None and domain == creator_domain)):
                total += len(key.encode()) + len(value)
                if total > MAX_QUERY_BYTES:
                    raise invalid(
                        "the matching entries are larger than 4 MiB in total: lower limit or "
                        "narrow the filter")
                entry = _new_entry(MemoryEntry)
                _set_entry_id(entry, entry_id(agent, key))
                _set_category(entry, category)
                _set_key(entry, key)
                _set_value(entry, value)
                _set_created_by(entry, created_by)
                _set_last_accessed_by(entry, last_by)
                updated_at = format_time(updated_us)
                _set_created_at(entry, updated_at if created_us == updated_us
                                else format_time(created_us))
                _set_updated_at(entry, updated_at)
                _set_access_policy(entry, access)
                _set_retention_policy(entry, retention)
                append(entry)
                if len(found) >= limit:
                    return found
            if scanned == most:
                return FULL  # more pages: the full path reads them from one snapshot
    return found
