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

from rotifer.memory import MemoryEntry

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
    Sorted order needs every namespace, so every entry under the conditions'
    fixed prefix is looked at (as SqliteStore's ``SELECT DISTINCT`` does); once a
    namespace has an item, its other entries are only looked up by key prefix."""
    seen: set[tuple[str, ...]] = set()
    listed: set[str] = set()  # the key prefixes (namespaces) already holding an item

    def pick(entry: MemoryEntry) -> None:
        key = entry.key
        folder = key[:key.rfind("/") + 1]
        if folder in listed:
            return  # one item is enough: the rest of its namespace costs a lookup each
        parsed = parse_key(key, root)
        if parsed is not None and decode_value(entry.value) is not None:
            listed.add(folder)
            seen.add(parsed[0])

    caller.pick(namespace_prefix(fixed_prefix(op.match_conditions), root), pick, None)
    namespaces = [ns for ns in seen if namespace_matches(ns, op.match_conditions)]
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
