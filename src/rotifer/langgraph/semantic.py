"""Semantic search: the index configuration, the texts a put embeds, and the
ranking of ``search(query=...)``.

The configuration is LangGraph's ``IndexConfig`` (``embed``: an ``Embeddings``
object, a sync or async function, or a provider string LangGraph's
``ensure_embeddings`` resolves; ``dims``; ``fields``, default ``["$"]``, the
whole value as JSON).  Which texts a put embeds and how several texts of one
path are named (``path.0``, ``path.1``) is what ``InMemoryStore`` does; the
search is exact (every vector under the prefix compared with the query, in
Python), ranking by cosine similarity, an item's best-scoring text counting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp, SearchItem, SearchOp
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from rotifer.memory import MemoryEntry

from .callers import Caller
from .keys import namespace_prefix
from .matching import check_filter, matches_filter
from .vectors import Unit, Vectors, digest, vector_key, vector_root

#: The vectors of one put: (path, unit vector) per indexed text.
PutVectors = list[tuple[str, Unit]]


@dataclass(frozen=True)
class Index:
    """A store's semantic index: the embeddings and what a put embeds."""

    embeddings: Embeddings
    dims: int | None
    fields: tuple[tuple[str, str | list[str]], ...]

    @classmethod
    def parse(cls, config: Mapping[str, Any]) -> Index:
        if not isinstance(config, Mapping) or "embed" not in config:
            raise ValueError("index= takes LangGraph's IndexConfig: {'embed': ..., "
                             "'dims': N, 'fields': [...]} ('embed' is required)")
        dims = config.get("dims")
        if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool)
                                 or dims < 1):
            raise ValueError(f"index dims must be a positive whole number, not {dims!r}")
        # "fields", as InMemoryStore and PostgresStore read it; SqliteStore reads
        # "text_fields" (a list or one path): either is taken.
        fields = config.get("fields") or config.get("text_fields") or ["$"]
        if isinstance(fields, str):
            fields = [fields]
        if not isinstance(fields, list | tuple) or not all(isinstance(f, str) for f in fields):
            raise ValueError(f"index fields must be a list of paths, not {fields!r}")
        # "$" (the whole value) stays a string: get_text_at_path reads it as the
        # value's JSON, as InMemoryStore hands it over.
        return cls(ensure_embeddings(config["embed"]), dims,
                   tuple((path, path if path == "$" else tokenize_path(path))
                         for path in fields))

    def texts(self, op: PutOp) -> list[tuple[str, str]]:
        """(path, text) of every text ``op`` embeds: none for a delete or
        ``index=False``; the configured fields for ``index=None``; else its own."""
        if op.value is None or op.index is False:
            return []
        paths: tuple[tuple[str, str | list[str]], ...] = self.fields if op.index is None \
            else tuple(
            (path, tokenize_path(path)) for path in op.index)
        found: list[tuple[str, str]] = []
        for path, tokens in paths:
            texts = get_text_at_path(op.value, tokens)
            if len(texts) > 1:
                found.extend((f"{path}.{i}", text) for i, text in enumerate(texts))
            elif texts:
                found.append((path, texts[0]))
        return found


def rank(caller: Caller, op: SearchOp, root: str, query: Unit) -> list[SearchItem]:
    """``search(query=...)``: the items under the prefix matching the filter that
    the caller may read, those with a current vector the caller may read first,
    by cosine similarity (``score``), then the others newest first (``score``
    ``None``, as InMemoryStore fills a page), from ``offset``, at most ``limit``."""
    from .ops import item_fields  # ops imports this module

    check_filter(op.filter)
    if op.limit <= 0:
        return []
    prefix = namespace_prefix(tuple(op.namespace_prefix), root)
    items: dict[str, tuple[dict[str, Any], bytes]] = {}

    def pick_item(entry: MemoryEntry) -> None:
        fields = item_fields(entry, root)
        if fields is not None and matches_filter(fields["value"], op.filter):
            items[entry.key] = (fields, entry.value)

    caller.pick(prefix, pick_item, None)
    scores: dict[str, float] = {}
    vectors_prefix = vector_key(prefix, root)
    vroot = vector_root(root)

    def pick_vectors(entry: MemoryEntry) -> None:
        item_key = root + entry.key[len(vroot):]
        found = items.get(item_key)
        if found is None:
            return  # no such item, or one the caller may not read or the filter drops
        vectors = Vectors.decode(entry.value)
        if vectors is None or vectors.digest != digest(found[1]):
            return  # not a vector entry, or computed from another value
        score = vectors.score(query)
        if score is not None:
            scores[item_key] = score

    if items:
        caller.pick(vectors_prefix, pick_vectors, None)
    order = {key: n for n, key in enumerate(items)}  # newest first: ties go to the newer
    ranked = sorted(scores, key=lambda key: (-scores[key], order[key]))
    ranked += [key for key in items if key not in scores]
    start = max(op.offset, 0)
    return [SearchItem(**items[key][0], score=scores.get(key))
            for key in ranked[start:start + op.limit]]


def unindexed(caller: Caller, root: str, prefix: str) -> list[MemoryEntry]:
    """The entries of the items under ``prefix`` (a key prefix) the caller may
    read that have no current vector the caller may read: after a move that
    left CACHE behind, an eviction, or a write under the store."""
    from .ops import item_fields

    items: dict[str, MemoryEntry] = {}

    def pick_item(entry: MemoryEntry) -> None:
        if item_fields(entry, root) is not None:
            items[entry.key] = entry

    caller.pick(prefix, pick_item, None)
    vroot = vector_root(root)

    def pick_vectors(entry: MemoryEntry) -> None:
        item_key = root + entry.key[len(vroot):]
        found = items.get(item_key)
        vectors = None if found is None else Vectors.decode(entry.value)
        if found is not None and vectors is not None and vectors.digest == digest(found.value):
            del items[item_key]

    if items:
        caller.pick(vector_key(prefix, root), pick_vectors, None)
    return list(items.values())
