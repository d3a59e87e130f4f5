"""``RotiferStore``: LangGraph's ``BaseStore`` on an agent's rotifer memory.

One store is bound to one agent and one caller -- a gene (its v2 id and
domain) or the deployer -- and makes every change through that caller's
memory calls, so every rule of rotifer's memory holds and is audited as for a
gene.  The mapping and the choices where LangGraph and rotifer disagree are in
docs/langgraph.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchOp,
    validate_op_namespace,
)

from rotifer.memory import MemoryStore

from . import ops
from .callers import Caller, DeployerCaller, GeneCaller
from .keys import ROOT
from .policy import NamespacePolicy, Policies


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
                 root: str = ROOT) -> None:
        if not isinstance(root, str) or not root.endswith("/") or "\x00" in root:
            raise ValueError("root must be a string ending in '/'")
        self.caller = caller
        self.policies = Policies(namespaces, default)
        self.root = root

    @classmethod
    def for_gene(cls, memory: MemoryStore, agent_id: str, gene_id: str, domain: str | None,
                 **options: Any) -> RotiferStore:
        """The store acting as the gene ``gene_id`` (a v2 id) of ``domain`` in ``agent_id``."""
        return cls(GeneCaller(memory.for_gene(agent_id, gene_id, domain)), **options)

    @classmethod
    def for_deployer(cls, memory: MemoryStore, agent_id: str, **options: Any) -> RotiferStore:
        """The store acting as the agent's owner: reads and deletes anything, puts nothing."""
        return cls(DeployerCaller(memory.deployer(agent_id)), **options)

    def batch(self, ops_: Iterable[Op]) -> list[Result]:
        """Run ``ops_`` as LangGraph's stores do: every get, search and list first,
        in order, on the memory as it was before the batch; then the puts, one
        memory change each, in the order of each (namespace, key)'s first put, its
        last put winning (as InMemoryStore and SqliteStore do).
        A refused put raises; the puts before it stay made."""
        todo = list(ops_)
        for op in todo:
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                ops.check_put(op)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in todo:
            if isinstance(op, GetOp):
                results.append(ops.get(self.caller, op, self.root))
            elif isinstance(op, SearchOp):
                results.append(ops.search(self.caller, op, self.root))
            elif isinstance(op, ListNamespacesOp):
                results.append(ops.list_namespaces(self.caller, op, self.root))
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), str(op.key))] = op  # the first one's place
                results.append(None)
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        for op in puts.values():
            ops.put(self.caller, op, self.policies, self.root)
        return results

    async def abatch(self, ops_: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in the event loop's thread pool (the memory calls block)."""
        todo = list(ops_)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, todo)

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
            index: Literal[False] | list[str] | None = None, *,
            ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        """LangGraph's ``put``; ``ttl`` other than ``None`` is refused with our reason."""
        if ttl not in (NOT_PROVIDED, None):
            raise NotImplementedError(ops.TTL_REFUSED)
        super().put(namespace, key, value, index, ttl=ttl)

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
                   index: Literal[False] | list[str] | None = None, *,
                   ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        if ttl not in (NOT_PROVIDED, None):
            raise NotImplementedError(ops.TTL_REFUSED)
        await super().aput(namespace, key, value, index, ttl=ttl)
