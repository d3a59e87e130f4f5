"""LangGraph's four operations on rotifer memory, one function each.

Each takes the :class:`~rotifer.langgraph.callers.Caller` the store acts as and
answers what LangGraph's stores answer for that op; the store decides their
order (:meth:`RotiferStore.batch <rotifer.langgraph.store.RotiferStore.batch>`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchItem,
    SearchOp,
)

from rotifer.memory import AgentMemoryError, Category, MemoryEntry
from rotifer.memory.errors import ErrorCode
from rotifer.memory.views.many import Delete, Outcome, Write

from . import ttl
from .callers import Caller
from .keys import (
    decode_value,
    encode_value,
    memory_key,
    memory_key_checked,
    namespace_prefix,
    parse_key,
)
from .matching import check_filter, fixed_prefix, matches_filter, namespace_matches
from .policy import Policies
from .semantic import PutVectors
from .vectors import Vectors, digest, vector_key


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def item_fields(entry: MemoryEntry, root: str) -> dict[str, Any] | None:
    """The fields of the LangGraph item an entry holds (``Item``'s and
    ``SearchItem``'s keyword arguments), or ``None`` if it holds none (a key
    :func:`~rotifer.langgraph.keys.memory_key` did not make, or a value that is
    not a JSON object)."""
    parsed = parse_key(entry.key, root)
    if parsed is None:
        return None
    value = decode_value(entry.value)
    if value is None:
        return None
    return {"namespace": parsed[0], "key": parsed[1], "value": value,
            "created_at": _time(entry.created_at), "updated_at": _time(entry.updated_at)}


def get(caller: Caller, op: GetOp, root: str) -> Item | None:
    entry = caller.read(memory_key(tuple(op.namespace), str(op.key), root))
    fields = None if entry is None else item_fields(entry, root)
    return None if fields is None else Item(**fields)


def get_many(caller: Caller, gets: list[GetOp], root: str) -> list[Item | Exception | None]:
    """:func:`get` of each op, read together (``Caller.read_many``); each op's
    error is its outcome."""
    outcomes: list[Item | Exception | None] = [None] * len(gets)
    keys: list[str] = []
    where: list[int] = []
    for n, op in enumerate(gets):
        try:
            keys.append(memory_key(tuple(op.namespace), str(op.key), root))
        except Exception as exc:
            outcomes[n] = exc
            continue
        where.append(n)
    for n, found in zip(where, caller.read_many(keys), strict=True):
        if isinstance(found, Exception) or found is None:
            outcomes[n] = found
            continue
        fields = item_fields(found, root)
        outcomes[n] = None if fields is None else Item(**fields)
    return outcomes


def search(caller: Caller, op: SearchOp, root: str) -> list[SearchItem]:
    """Items under the namespace prefix whose value matches the filter, most
    recently updated first (as SqliteStore and PostgresStore order them), from
    ``offset``, at most ``limit``; items the caller may not read are left out.
    Without an index a ``query`` is ignored, as SqliteStore and PostgresStore do."""
    check_filter(op.filter)
    if op.limit <= 0:
        return []
    start = max(op.offset, 0)

    def pick(entry: MemoryEntry) -> SearchItem | None:
        fields = item_fields(entry, root)
        if fields is None or not matches_filter(fields["value"], op.filter):
            return None
        return SearchItem(**fields)

    found = caller.pick(namespace_prefix(tuple(op.namespace_prefix), root), pick,
                        start + op.limit)
    return found[start:]


def list_namespaces(caller: Caller, op: ListNamespacesOp, root: str) -> list[tuple[str, ...]]:
    """The namespaces holding at least one item the caller may read that meet
    every condition, cut to ``max_depth`` labels, sorted, then offset and limit.
    Sorted order (by labels, not by memory key) needs every namespace, so every
    namespace under the conditions' fixed prefix is listed -- in the database,
    one entry read per namespace (``Caller.folders``), as SqliteStore's
    ``SELECT DISTINCT`` reads no item either."""

    def pick(entry: MemoryEntry) -> tuple[str, ...] | None:
        parsed = parse_key(entry.key, root)
        if parsed is None or decode_value(entry.value) is None:
            return None
        return parsed[0]

    seen = caller.folders(namespace_prefix(fixed_prefix(op.match_conditions), root), pick)
    namespaces = [ns for ns in set(seen.values()) if namespace_matches(ns, op.match_conditions)]
    if op.max_depth is not None:
        namespaces = list({ns[:op.max_depth] for ns in namespaces})
    namespaces.sort()
    start = max(op.offset, 0)
    return namespaces[start:start + max(op.limit, 0)]


def check_put(op: PutOp, ttl_taken: bool) -> None:
    """What LangGraph's stores check of a ``PutOp`` given to ``batch``: a
    namespace; and ours: a ttl only as whole days on a store whose reads do not
    refresh (:mod:`rotifer.langgraph.ttl`).  The root label ``langgraph`` is
    refused by ``put`` (LangGraph's ``BaseStore.put``) and taken by ``batch``,
    as all three LangGraph stores do: its items live at ``<root>langgraph/...``,
    apart from every other namespace and from the vector root."""
    namespace = tuple(op.namespace)
    if op.value is not None:
        if not namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        if op.ttl is not None:
            if not ttl_taken:
                raise NotImplementedError(ttl.REFUSED)
            ttl.retention(op.ttl)


def put(caller: Caller, op: PutOp, policies: Policies, root: str,
        vectors: PutVectors | None = None) -> None:
    """Write or delete the item; with an index configured (``vectors`` not
    ``None``) then write its vector entry beside it, or delete the old one
    when the put has nothing to embed or deletes."""
    namespace = tuple(op.namespace)
    key = memory_key(namespace, str(op.key), root)
    beside = None if vectors is None else memory_key_checked(vector_key(key, root))
    if op.value is None:
        caller.delete(key)
        if beside is not None:
            caller.delete(beside)
        return
    data = encode_value(op.value)
    policy = policies.for_namespace(namespace)
    if op.ttl is not None:  # whole days (check_put): the item's own retention
        policy = replace(policy, retention=ttl.retention(op.ttl))
    entry = caller.write(key, data, policy)
    if beside is None:
        return
    if vectors:
        caller.write_beside(beside, Vectors.of(digest(data), vectors).encode(), entry)
    else:
        caller.delete(beside)


def put_many(caller: Caller, puts: list[PutOp], contexts: list[dict[str, str] | None],
             policies: Policies, root: str, vectors: list[PutVectors] | None = None
             ) -> list[Exception | None]:
    """:func:`put` of each op (distinct keys), made together: every item's
    write or delete first (``Caller.change_many``: one memory transaction, each
    still its own audited change, under its own context), then -- with an index
    (``vectors``, one list per put) -- every vector entry beside an item that
    was made, the same way.  Each put's outcome: ``None``, or its own error."""
    errors: list[Exception | None] = [None] * len(puts)
    items: list[Write | Delete] = []
    made_at: list[int] = []
    beside: dict[int, str] = {}
    data: dict[int, bytes] = {}
    for n, op in enumerate(puts):
        try:
            namespace = tuple(op.namespace)
            key = memory_key(namespace, str(op.key), root)
            if vectors is not None:
                beside[n] = memory_key_checked(vector_key(key, root))
            if op.value is None:
                items.append(Delete(key))
            else:
                data[n] = encode_value(op.value)
                policy = policies.for_namespace(namespace)
                if op.ttl is not None:
                    policy = replace(policy, retention=ttl.retention(op.ttl))
                items.append(Write(key, data[n], policy.category, policy.access,
                                   policy.retention))
        except Exception as exc:
            errors[n] = exc
            continue
        made_at.append(n)
    entries = _settle(caller.change_many(items, [contexts[n] for n in made_at]), items,
                      made_at, errors)
    if vectors is None:
        return errors
    todo: list[Write | Delete] = []
    todo_at: list[int] = []
    for n in made_at:
        entry = entries.get(n)
        if errors[n] is not None:
            continue
        if entry is None or not vectors[n]:  # deleted, or nothing to embed
            todo.append(Delete(beside[n]))
        else:
            todo.append(Write(beside[n], Vectors.of(digest(data[n]), vectors[n]).encode(),
                              Category.CACHE, entry.access_policy, entry.retention_policy))
        todo_at.append(n)
    _settle(caller.change_many(todo, [contexts[n] for n in todo_at]), todo, todo_at, errors)
    return errors


def _settle(outcomes: list[Outcome], ops_: list[Write | Delete], at: list[int],
            errors: list[Exception | None]) -> dict[int, MemoryEntry]:
    """Record each op's error (a delete of nothing is none: LangGraph's delete
    of a missing item does nothing); the entries written, by put."""
    written: dict[int, MemoryEntry] = {}
    for n, op, outcome in zip(at, ops_, outcomes, strict=True):
        if isinstance(outcome, AgentMemoryError):
            if not (isinstance(op, Delete) and outcome.code is ErrorCode.NOT_FOUND):
                errors[n] = outcome
        elif outcome is not None:
            written[n] = outcome
    return written
