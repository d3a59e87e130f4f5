"""``RotiferStore``: LangGraph's ``BaseStore`` on an agent's rotifer memory.

One store is bound to one agent and one caller -- a gene (its v2 id and
domain) or the deployer -- and makes every change through that caller's
memory calls, so every rule of rotifer's memory holds and is audited as for a
gene.  The mapping and the choices where LangGraph and rotifer disagree are in
docs/langgraph.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Literal, cast

from langchain_core.runnables.config import var_child_runnable_config
from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    IndexConfig,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from rotifer.memory import MemoryEntry, MemoryStore
from rotifer.memory.context import audit_context, clean_context

from . import ops
from .callers import Caller, DeployerCaller, GeneCaller
from .gather import Call, Gatherer
from .keys import ROOT
from .keys import namespace_prefix as namespace_prefix_key
from .policy import NamespacePolicy, Policies
from .semantic import Index, PutVectors, rank, unindexed
from .ttl import REFUSED as TTL_REFUSED
from .ttl import check_config as check_ttl_config
from .vectors import Unit, Vectors, digest, unit, vector_key


def run_context() -> dict[str, str] | None:
    """The LangGraph thread and run calling the store, for its audit lines:
    ``thread_id`` from the runnable config's ``configurable``; ``run_id`` the
    config's own ``run_id`` if it has one, else the id LangChain's tracing gives
    the node's run (its callback manager's ``parent_run_id``).  ``None``
    outside a runnable (no config)."""
    # What langgraph.config.get_config reads, without the exception it raises
    # outside a runnable (most of its cost: one call per abatch).
    config = var_child_runnable_config.get()
    if not config:
        return None
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    run = config.get("run_id")
    if run is None:
        run = getattr(config.get("callbacks"), "parent_run_id", None)
    return clean_context({"thread_id": None if thread is None else str(thread),
                          "run_id": None if run is None else str(run)})


def _same(op: Op, context: dict[str, str] | None) -> Hashable:
    """What makes two reads of a gathered batch the same read: the op and the
    run asking (as a tuple when both hash, as cheap as it gets; else their repr)."""
    same = (op, None if context is None else tuple(context.items()))
    try:
        hash(same)
    except TypeError:  # a search's filter is a dict
        return repr((op, context))
    return same


class Failed:
    """An op's error, kept as its outcome in a gathered batch."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class RotiferStore(BaseStore):
    """A LangGraph store whose items are entries of one agent's rotifer memory.

    Build it with :meth:`for_gene` or :meth:`for_deployer`.  ``namespaces`` maps
    namespace prefixes to a :class:`NamespacePolicy` (or just a category name);
    the longest matching prefix wins, else ``default``.
    """

    supports_ttl = False

    def __init__(self, caller: Caller, *,
                 namespaces: Mapping[tuple[str, ...], Any] | None = None,
                 default: NamespacePolicy | str | Mapping[str, Any] | None = None,
                 root: str = ROOT, index: IndexConfig | None = None,
                 ttl: TTLConfig | None = None) -> None:
        if not isinstance(root, str) or not root.endswith("/") or "\x00" in root:
            raise ValueError("root must be a string ending in '/'")
        self.caller = caller
        self.policies = Policies(namespaces, default)
        self.root = root
        #: The semantic index (``index=``, LangGraph's IndexConfig), or ``None``.
        self.index = None if index is None else Index.parse(index)
        self.index_config = index
        #: The index's embeddings (as LangGraph's stores expose them), or ``None``.
        self.embeddings = None if self.index is None else self.index.embeddings
        check_ttl_config(ttl)
        #: LangGraph's TTLConfig; only {"refresh_on_read": False, ...} is taken.
        self.ttl_config = ttl
        self.supports_ttl = ttl is not None
        self._gatherer = Gatherer(self._run_gathered)

    @classmethod
    def for_gene(cls, memory: MemoryStore, agent_id: str, gene_id: str, domain: str | None,
                 **options: Any) -> RotiferStore:
        """The store acting as the gene ``gene_id`` (a v2 id) of ``domain`` in ``agent_id``."""
        return cls(GeneCaller(memory.for_gene(agent_id, gene_id, domain)), **options)

    @classmethod
    def for_deployer(cls, memory: MemoryStore, agent_id: str, **options: Any) -> RotiferStore:
        """The store acting as the agent's owner: reads and deletes anything, puts nothing."""
        return cls(DeployerCaller(memory.deployer(agent_id)), **options)

    def _prepare(self, ops_: Iterable[Op]) -> tuple[list[Op], list[str], list[str]]:
        """Check the ops as LangGraph's stores do; the queries and the texts to embed."""
        todo = list(ops_)
        self._check(todo)
        return (todo, *self._to_embed(todo))

    def _check(self, todo: list[Op]) -> None:
        """Refuse what LangGraph's stores refuse in ``batch``, and a ttl we cannot keep."""
        for op in todo:
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                ops.check_put(op, self.supports_ttl)
            elif isinstance(op, GetOp | SearchOp):
                if op.refresh_ttl and self.ttl_config is not None:
                    raise NotImplementedError(
                        "refresh_ttl=True: a read never extends a rotifer entry's "
                        "retention (this store's ttl has refresh_on_read=False)")
            elif not isinstance(op, ListNamespacesOp):
                raise ValueError(f"Unknown operation type: {type(op)}")

    def _to_embed(self, todo: list[Op]) -> tuple[list[str], list[str]]:
        """The distinct queries and the puts' texts the index embeds."""
        if self.index is None:
            return [], []
        queries = list(dict.fromkeys(op.query for op in todo
                                     if isinstance(op, SearchOp) and op.query))
        texts = [text for put in self._last_puts(todo).values()
                 for _, text in self.index.texts(put)]
        return queries, texts

    @staticmethod
    def _last_puts(todo: list[Op]) -> dict[tuple[tuple[str, ...], str], PutOp]:
        """Each (namespace, key)'s last put, at its first put's place."""
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in todo:
            if isinstance(op, PutOp):
                puts[(tuple(op.namespace), str(op.key))] = op
        return puts

    def batch(self, ops_: Iterable[Op]) -> list[Result]:
        """Run ``ops_`` as LangGraph's stores do: every get, search and list first,
        in order, on the memory as it was before the batch; then the puts, one
        memory change each, in the order of each (namespace, key)'s first put, its
        last put winning (as InMemoryStore and SqliteStore do).  With an index,
        the queries and the puts' texts are embedded first, before anything is
        written.  A refused put raises; the puts before it stay made."""
        todo, queries, texts = self._prepare(ops_)
        embedded: dict[str, list[float]] = {}
        documents: list[list[float]] = []
        if self.index is not None:
            embedded = {q: self.index.embeddings.embed_query(q) for q in queries}
            documents = self.index.embeddings.embed_documents(texts) if texts else []
        return self._run(todo, embedded, documents)

    async def abatch(self, ops_: Iterable[Op]) -> list[Result]:
        """:meth:`batch` for async callers, gathered: every ``abatch`` (so every
        ``aget``, ``aput``, ``asearch``, ...) made in the same event-loop tick
        runs in one batch (:mod:`rotifer.langgraph.gather`) -- reads first, on
        the memory as it was, identical reads made once; then the puts, one
        memory change each, in the order of each key's first put, its last put
        winning -- with the embedding awaited in the loop and the memory calls in
        the loop's thread pool (they block).  Each caller gets its own results,
        or the first error among its own ops; the other callers' ops still run."""
        return await self._gatherer.submit(list(ops_), run_context())

    async def _run_gathered(self, calls: list[Call]) -> None:
        """Run the calls of one tick as one batch; settle each caller's future."""
        checked: list[Call] = []
        for todo, future, context in calls:
            try:
                self._check(todo)
            except Exception as exc:  # this caller's ops are bad: only it hears so
                if not future.done():
                    future.set_exception(exc)
                continue
            checked.append((todo, future, context))
        everything = [op for todo, _, _ in checked for op in todo]
        contexts = [context for todo, _, context in checked for _ in todo]
        queries, texts = self._to_embed(everything)
        embedded: dict[str, list[float]] = {}
        documents: list[list[float]] = []
        if self.index is not None:
            found = await asyncio.gather(*(self.index.embeddings.aembed_query(q)
                                           for q in queries))
            embedded = dict(zip(queries, found, strict=True))
            documents = await self.index.embeddings.aembed_documents(texts) if texts else []
        outcomes = await asyncio.get_running_loop().run_in_executor(
            None, self._run_each, everything, embedded, documents, contexts)
        start = 0
        for todo, future, _ in checked:
            mine = outcomes[start:start + len(todo)]
            start += len(todo)
            if future.done():
                continue  # the caller was cancelled
            failed = next((o for o in mine if isinstance(o, Failed)), None)
            if failed is not None:
                future.set_exception(failed.error)
            else:
                future.set_result(cast("list[Result]", mine))

    def _run(self, todo: list[Op], embedded: dict[str, list[float]],
             documents: list[list[float]]) -> list[Result]:
        """The batch, the first error raised (the puts before it stay made)."""
        context = run_context()
        return cast("list[Result]", self._outcomes(
            todo, embedded, documents, [context] * len(todo), isolate=False))

    def _run_each(self, todo: list[Op], embedded: dict[str, list[float]],
                  documents: list[list[float]], contexts: list[dict[str, str] | None]
                  ) -> list[Result | Failed]:
        """The batch, each op's error kept as its outcome; identical reads once."""
        return self._outcomes(todo, embedded, documents, contexts, isolate=True)

    def _outcomes(self, todo: list[Op], embedded: dict[str, list[float]],
                  documents: list[list[float]], contexts: list[dict[str, str] | None], *,
                  isolate: bool) -> list[Result | Failed]:
        """Each op's outcome, every memory call made under the audit context of
        the caller who asked for it (its LangGraph thread and run)."""
        index = self.index
        puts = self._last_puts(todo)
        if index is not None and len(documents) != sum(
                len(index.texts(p)) for p in puts.values()):
            raise ValueError(f"the embeddings answered {len(documents)} vectors for the texts "
                             "asked")
        dims = None if index is None else index.dims
        # Every vector checked (dims) before anything is read or written.
        units = [unit(vector, dims) for vector in documents]
        queries = {q: unit(vector, dims) for q, vector in embedded.items()}
        outcomes: list[Result | Failed] = []
        made: dict[Hashable, Result | Failed] = {}
        if isolate:
            made = self._get_all(todo, contexts)
        for op, context in zip(todo, contexts, strict=True):
            if isinstance(op, PutOp):
                outcomes.append(None)
                continue
            same = _same(op, context) if isolate else ""
            if isolate and same in made:
                outcomes.append(made[same])
                continue
            try:
                with audit_context(context):
                    outcome: Result | Failed = self._read(op, queries)
            except Exception as exc:
                if not isolate:
                    raise
                outcome = Failed(exc)
            if isolate:
                made[same] = outcome
            outcomes.append(outcome)
        where: dict[tuple[tuple[str, ...], str], list[int]] = {}
        for n, op in enumerate(todo):
            if isinstance(op, PutOp):
                where.setdefault((tuple(op.namespace), str(op.key)), []).append(n)
        # The last put of a key wins, and so does the run that asked for it.
        put_context = {key: contexts[spots[-1]] for key, spots in where.items()}
        if isolate:  # every put together (ops.put_many), each error its own
            vectors_of = None if index is None else self._vectors(index, puts, units)
            errors = ops.put_many(self.caller, list(puts.values()),
                                  [put_context[key] for key in puts], self.policies,
                                  self.root, vectors_of)
            for put_key, error in zip(puts, errors, strict=True):
                if error is not None:
                    for n in where[put_key]:
                        outcomes[n] = Failed(error)
            return outcomes
        taken = 0
        for put_key, put in puts.items():
            vectors = None
            if index is not None:
                paths = [path for path, _ in index.texts(put)]
                vectors = list(zip(paths, units[taken:taken + len(paths)], strict=True))
                taken += len(paths)
            try:
                with audit_context(put_context[put_key]):
                    ops.put(self.caller, put, self.policies, self.root, vectors)
            except Exception as exc:
                if not isolate:
                    raise
                for n in where[put_key]:  # every caller who asked for this key's put
                    outcomes[n] = Failed(exc)
        return outcomes

    @staticmethod
    def _vectors(index: Index, puts: dict[tuple[tuple[str, ...], str], PutOp],
                 units: list[Unit]) -> list[PutVectors]:
        """Each put's (path, vector) pairs, from the vectors of all their texts."""
        found: list[PutVectors] = []
        taken = 0
        for put in puts.values():
            paths = [path for path, _ in index.texts(put)]
            found.append(list(zip(paths, units[taken:taken + len(paths)], strict=True)))
            taken += len(paths)
        return found

    def _get_all(self, todo: list[Op], contexts: list[dict[str, str] | None]
                 ) -> dict[Hashable, Result | Failed]:
        """Every distinct get of a gathered batch, read together per context (a
        refusal's audit line names its own run), by :func:`_same`."""
        groups: dict[str, tuple[dict[str, str] | None, list[GetOp]]] = {}
        for op, context in zip(todo, contexts, strict=True):
            if isinstance(op, GetOp):
                group = groups.setdefault(repr(context), (context, []))
                group[1].append(op)
        made: dict[Hashable, Result | Failed] = {}
        for context, gets in groups.values():
            gets = list({repr(op): op for op in gets}.values())
            with audit_context(context):
                found = ops.get_many(self.caller, gets, self.root)
            for op, outcome in zip(gets, found, strict=True):
                made[_same(op, context)] = Failed(outcome) if isinstance(
                    outcome, Exception) else outcome
        return made

    def _read(self, op: Op, queries: dict[str, Unit]) -> Result:
        if isinstance(op, GetOp):
            return ops.get(self.caller, op, self.root)
        if isinstance(op, SearchOp):
            if op.query and self.index is not None:
                return rank(self.caller, op, self.root, queries[op.query])
            return ops.search(self.caller, op, self.root)
        assert isinstance(op, ListNamespacesOp)
        return ops.list_namespaces(self.caller, op, self.root)

    def reindex(self, namespace_prefix: tuple[str, ...] = ()) -> int:
        """Write the vectors missing under ``namespace_prefix`` again: for every
        item the caller may read that has no current vector (a move that left
        CACHE behind, cleanup, a write under the store), embed its texts as its
        last put would have (the index's fields) and write its vector entry
        beside it -- the items themselves are not rewritten.  Answers how many
        were written; 0 without an index."""
        index = self.index
        if index is None:
            return 0
        todo: list[tuple[MemoryEntry, list[tuple[str, str]]]] = []
        for entry in unindexed(self.caller, self.root, namespace_prefix_key(
                tuple(namespace_prefix), self.root)):
            fields = ops.item_fields(entry, self.root)
            assert fields is not None  # unindexed keeps items only
            texts = index.texts(PutOp(fields["namespace"], fields["key"], fields["value"]))
            if texts:
                todo.append((entry, texts))
        documents = index.embeddings.embed_documents(
            [text for _, texts in todo for _, text in texts]) if todo else []
        units = iter([unit(vector, index.dims) for vector in documents])
        for entry, texts in todo:
            vectors = [(path, next(units)) for path, _ in texts]
            self.caller.write_beside(vector_key(entry.key, self.root),
                                     Vectors.of(digest(entry.value), vectors).encode(), entry)
        return len(todo)

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
            index: Literal[False] | list[str] | None = None, *,
            ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        """LangGraph's ``put``; a ttl this store cannot keep is refused with our reason."""
        if ttl not in (NOT_PROVIDED, None) and not self.supports_ttl:
            raise NotImplementedError(TTL_REFUSED)
        super().put(namespace, key, value, index, ttl=ttl)

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
                   index: Literal[False] | list[str] | None = None, *,
                   ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        if ttl not in (NOT_PROVIDED, None) and not self.supports_ttl:
            raise NotImplementedError(TTL_REFUSED)
        await super().aput(namespace, key, value, index, ttl=ttl)
