"""What every call of a gene's view shares: who acts, and the "take the full
path" answer of a lean path.

:class:`GeneView` holds the engine, the agent, the gene acting (its v2 id
and domain, or none: then every call is refused and audited) and how the
calls arrive (``via``).  The calls themselves are :mod:`.gene_reads` and
:mod:`.gene_writes`; :class:`~.gene_memory.GeneMemory` is the two together.

Each call has a full path and, beside it in the same class, a lean path: the
common case of the same call with less Python around it (no ``Change``
object, no closure handed to :meth:`Engine.change
<rotifer.memory.engine.core.Engine.change>`, each value decoded once), the
same statements in the same order, the same audit bytes appended before the
commit, the same entry returned.  Whenever the call is not the common case a
lean path answers :data:`FULL` before it has changed anything, and the call
goes the full way, which then decides and says everything itself.  A rule
(who may read or change an entry, what a written row holds, what its audit
line says) is written once and used by both.  ``Engine.lean_paths`` (the
backend's choice: SQLite yes, PostgreSQL no, where a hand-over would repeat
round trips) turns the lean paths on or off; ``tests/memory/test_lean.py``
runs both on the same operations and compares entries, errors, audit bytes
and stored rows.
"""

from __future__ import annotations

import re
from typing import Final

from ..engine.core import Engine
from ..model import DataPolicy
from ..policy import Actor


class Full:
    """The answer "take the full path" (nothing was changed)."""

    def __repr__(self) -> str:
        return "FULL"


FULL: Final = Full()


class GoFull(Exception):
    """Raised inside a lean path's write transaction to roll it back (it has
    only looked) and take the full path."""


#: What a gene id must look like (the gene layer's ``V2_ID_RE``; memory/ does not
#: import genes/).  Checked once per view, so a call costs nothing more.
_V2_ID = re.compile(r"v2:[0-9a-f]{64}")


class GeneView:
    """One gene acting on its agent's memory (the base of :class:`~.gene_memory.GeneMemory`).

    A ``gene_id`` that is not ``v2:`` + 64 lowercase hex digits is no v2 id:
    the view refuses every call exactly as for ``gene_id=None`` (audited with
    no actor), so a malformed string never becomes an entry's ``createdBy``."""

    def __init__(self, store: Engine, agent_id: str, gene_id: str | None,
                 domain: str | None, data_policy: DataPolicy, via: str | None = None) -> None:
        self.store = store
        self.agent_id = agent_id
        #: How the calls reach the memory when not from the gene's own code (``"mcp"``:
        #: ``rotifer mcp``): the write, update and delete lines in the audit log say so.
        self.via = via
        self.actor: Actor | None = None
        self._no_id = "this gene has no v2 id (wrap or compile it again), so it cannot use memory"
        if isinstance(gene_id, str) and _V2_ID.fullmatch(gene_id):
            self.actor = Actor(gene_id, domain)
        elif gene_id is not None:
            self._no_id = ("this gene's id is not a v2 id ('v2:' and 64 lowercase hex digits), "
                           "so it cannot use memory")
        self.data_policy = data_policy

    def _require_actor(self, operation: str, key: object = None) -> Actor:
        if self.actor is None:
            raise self.store.refuse_outside(self.agent_id, operation, self._no_id,
                                            key if isinstance(key, str) else None)
        return self.actor
