"""The memory store: the seed's rules, written once above the backend interface.

:class:`MemoryStore` owns a backend, the audit log and a clock.  Genes never
see it directly: each gets a :class:`~rotifer.memory.views.gene_memory.GeneMemory`,
a view that acts under the gene's v2 id and domain and checks the entry's
access policy before every read, write and delete.  The deployer gets a
:class:`~rotifer.memory.views.deployer_memory.DeployerMemory`, which lists without
values and deletes whatever the policies say.

Every change happens inside one backend write transaction, and its audit
lines are appended *before* that transaction commits; if they cannot be
appended the transaction rolls back and the caller gets
MEMORY_STORAGE_ERROR.  A write over quota therefore either evicts and writes
together, or does neither.  How a change is timed and numbered, and what
happens when it does not commit, is the engine (:mod:`rotifer.memory.engine`).
"""

from __future__ import annotations

from pathlib import Path

from .audit import DEPLOYER, AuditLog
from .audit.actions import DROP_AGENT
from .clock import Clock
from .engine.changes import Change, log_change, new_epoch, settle, to_entry
from .engine.core import Engine
from .errors import invalid, storage
from .model import DataPolicy, check_agent_id
from .quota import DEFAULT_QUOTA_BYTES
from .storage.backend import AgentRecord, Backend
from .storage.opening import open_backend
from .views.deployer_memory import DeniedMemory, DeployerMemory
from .views.gene_memory import GeneMemory, GeneMemoryAccess

__all__ = ["DEFAULT_QUOTA_BYTES", "DeniedMemory", "DeployerMemory", "GeneMemory",
           "GeneMemoryAccess", "MemoryStore", "to_entry"]


class MemoryStore(Engine):
    """All agents' memory in one backend, with one audit log and one clock: the
    engine (:class:`~rotifer.memory.engine.core.Engine`), with the agents' lives
    and the views on top."""

    @classmethod
    def open(cls, rotifer_dir: Path, url: str | None = None, clock: Clock | None = None,
             *, create: bool = True) -> MemoryStore:
        """Open the project's memory: ``url`` or ``ROTIFER_MEMORY_URL`` if it names a
        PostgreSQL server, else ``rotifer_dir/playground.db``.  Never falls back.

        ``create=False`` opens only a store that exists: an SQLite file that is
        missing or holds no memory tables is MEMORY_STORAGE_ERROR naming it, and
        nothing is created or repaired (for commands that only use memory).
        """
        return cls.on(open_backend(Path(rotifer_dir), url, create=create), rotifer_dir, clock)

    @classmethod
    def on(cls, backend: Backend, rotifer_dir: Path, clock: Clock | None = None) -> MemoryStore:
        """The store of a backend already open (:func:`~.storage.opening.open_backend`),
        with the audit log of ``rotifer_dir``."""
        rotifer_dir = Path(rotifer_dir)
        audit = AuditLog(rotifer_dir / "audit.jsonl", rotifer_dir / "telemetry.jsonl")
        return cls(backend, audit, clock)

    def close(self) -> None:
        try:
            self.backend.close()
        finally:
            self.audit.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- agents ---------------------------------------------------------------

    def create_agent(self, agent_id: str, quota_bytes: int = DEFAULT_QUOTA_BYTES,
                     data_policy: DataPolicy | None = None) -> None:
        """Give an agent an empty memory with its quota and data policy."""
        check_agent_id(agent_id)
        if not isinstance(quota_bytes, int) or isinstance(quota_bytes, bool) or quota_bytes <= 0:
            raise invalid("memory quota must be a positive number of bytes")
        policy = data_policy or DataPolicy()
        with self.backend.write(agent_id) as tx:
            if tx.get_agent(agent_id) is not None:
                raise invalid(f"agent {agent_id!r} already has a memory")
            epoch = new_epoch()
            tx.insert_agent(AgentRecord(agent_id=agent_id, quota_bytes=quota_bytes,
                                        data_policy=policy, used_bytes=0, next_seq=1,
                                        epoch=epoch))
            # A new memory: its history starts in the index (rows of an earlier
            # memory of the same name are not its history: they go).
            tx.set_indexed(agent_id, epoch, True, [])

    def has_agent(self, agent_id: str) -> bool:
        with self.backend.peek() as tx:
            return tx.get_agent(agent_id) is not None

    def agents(self) -> list[str]:
        with self.backend.peek() as tx:
            return tx.list_agents()

    def agent_record(self, agent_id: str) -> AgentRecord:
        with self.backend.peek() as tx:
            record = tx.get_agent(agent_id)
        if record is None:
            raise storage(f"agent {agent_id!r} has no memory in this store")
        return record

    def usage(self, agent_id: str) -> tuple[int, int]:
        """(bytes used, quota) -- after removing what has expired."""
        self.purge_expired(agent_id)
        record = self.agent_record(agent_id)
        return record.used_bytes, record.quota_bytes

    def drop_agent(self, agent_id: str) -> None:
        """Remove an agent's whole memory (used for ``rotifer test``'s memory)."""
        change = Change(agent_id, actor=DEPLOYER, removes_agent=True)
        try:
            with self.backend.write(agent_id) as tx:
                record = tx.get_agent(agent_id)
                if record is None:
                    return
                self.begin(change, record)
                change.line(DROP_AGENT, None, None, record.used_bytes,
                            entries=tx.count(agent_id))
                log_change(tx, self.audit, agent_id, record.next_seq,
                           change.lines, change)
                tx.delete_agent(agent_id)
        except BaseException as exc:
            settle(self.backend, self.audit, self.clock, change, exc)
            raise

    def for_gene(self, agent_id: str, gene_id: str | None, domain: str | None, *,
                 via: str | None = None) -> GeneMemory:
        """The view a gene gets as ``ctx.memory``; ``gene_id=None`` is refused everything.
        ``via`` (e.g. ``"mcp"``) is written into the audit lines of its writes and deletes.

        Never on a read-only standby: a gene must read what it wrote, and a
        standby may be behind (MEMORY_STORAGE_ERROR naming it)."""
        if self.backend.read_only:
            raise storage(f"the memory database at {self.backend.location} is a read-only "
                          "standby: genes run on the primary only (a URL with "
                          "target_session_attrs=read-write), so that they read what they wrote")
        record = self.agent_record(agent_id)
        return GeneMemory(self, agent_id, gene_id, domain, record.data_policy, via)

    def replay_delay(self) -> float | None:
        """Reading a hot standby: how far behind it is, in seconds (see
        :meth:`rotifer.memory.storage.postgres.PostgresBackend.replay_delay`); None on a
        primary or SQLite."""
        if not self.backend.read_only:
            return None
        # Only a PostgreSQL backend can be read-only; the interface stays small.
        delay: float | None = getattr(self.backend, "replay_delay")()  # noqa: B009
        return delay

    def deployer(self, agent_id: str) -> DeployerMemory:
        self.agent_record(agent_id)
        return DeployerMemory(self, agent_id)
