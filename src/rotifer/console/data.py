"""What the console's pages show, read the way the CLI reads it.

Agents come from :class:`~rotifer.agents.genome.Agents`, each agent's store
from :meth:`Project.open_store` (``ROTIFER_MEMORY_URL``, the agent's binding or
the project's, as the CLI opens it; never created), entries from
:mod:`rotifer.memory.views.browse`, history from the function ``audit show`` uses and
the check from the one ``audit verify`` uses.  No SQL here.

Stores are opened once per memory URL and kept for the console's run; a lock
guards only that table of stores, not their use: each backend serialises its
own connection's transactions (SQLite: one short transaction at a time per
store; PostgreSQL: a pool), so pages are served concurrently and a slow one
holds no other.  Histories and the chart read the history index
(:mod:`rotifer.memory.audit.index`): the agent's own lines, not the shared log.
The one long piece of work, ``verify``, runs on a store of its own (its own
connection, so the pages' store is never held by it), in a thread of its own
when the page asks with htmx (:meth:`ConsoleData.start_verify`), and reports
how far it got (:meth:`ConsoleData.verify_progress`), which the page shows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

from rotifer.agents.genome import Agents
from rotifer.agents.project import require_memory
from rotifer.console.chart import BUCKETS, STEP_MARKS, Point, series_of
from rotifer.memory import Category, MemoryStore
from rotifer.memory.audit.history import AuditLine, audit_history, usage_steps
from rotifer.memory.audit.read import Scan
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.views.browse import CategoryUsage, EntryInfo, Page, Sort, usage_by_category

if TYPE_CHECKING:
    from rotifer.agents.genome import AgentSpec
    from rotifer.agents.project import Project

_T = TypeVar("_T")


@dataclass
class GeneInfo:
    name: str
    v2_id: str | None
    problem: str | None = None


@dataclass
class AgentSummary:
    name: str
    genes: list[GeneInfo]
    used: int = 0
    quota: int = 1
    usage: dict[Category, CategoryUsage] = field(default_factory=dict)
    last_us: int = 0
    error: str | None = None


@dataclass
class Verified:
    ok: bool
    message: str
    at_us: int


class ConsoleData:
    """The project's agents and their stores, for the pages."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.agents = Agents(project)
        self._stores: dict[str | None, MemoryStore] = {}
        self._lock = threading.Lock()
        #: usage_by_category walks every entry: kept until the agent changes
        #: (its next_seq and used bytes are the cache key).
        self._usage: dict[str, tuple[tuple[int, int], dict[Category, CategoryUsage]]] = {}
        self.verified: dict[str, Verified] = {}
        #: The chart's points of each agent, with the (epoch, next_seq) they were drawn at.
        self._charts: dict[str, tuple[tuple[str, int],
                                      tuple[list[Point], list[tuple[int, str]]]]] = {}
        #: agent -> (bytes read, bytes in all) while its verify runs.
        self._progress: dict[str, tuple[int, int]] = {}
        #: agent -> the thread of the verify started for it (:meth:`start_verify`).
        self._jobs: dict[str, threading.Thread] = {}

    def close(self) -> None:
        with self._lock:
            for store in self._stores.values():
                store.close()
            self._stores.clear()

    @contextmanager
    def store(self, agent: str) -> Iterator[MemoryStore]:
        """``agent``'s store (the lock is held only to find or open it);
        AGENT_NOT_FOUND or MEMORY_STORAGE_ERROR as the CLI says them."""
        self.agents.get(agent)
        url = self.project.memory_url(agent)
        with self._lock:
            store = self._stores.get(url)
            if store is None:
                store = self.project.open_store(agent, create=False)
                self._stores[url] = store
        require_memory(store, agent)
        yield store

    def run(self, agent: str, work: Callable[[MemoryStore], _T]) -> _T:
        with self.store(agent) as store:
            return work(store)

    def history(self, agent: str, **query: Any) -> list[AuditLine]:
        """``audit show``'s lines (newest first) for the history page."""
        return self.run(agent, lambda store: list(audit_history(store, agent, **query)))

    def chart_points(self, agent: str) -> tuple[list[Point], list[tuple[int, str]]]:
        """What the chart draws (from the history index when it is usable): the
        usage points and the marks (evictions, expiries), kept until the agent
        changes: its epoch and change number are the cache key, as for the usage
        by category (lines that change nothing, refusals, do not move the chart)."""
        def work(store: MemoryStore) -> tuple[list[Point], list[tuple[int, str]]]:
            record = store.agent_record(agent)
            version = (record.epoch, record.next_seq)
            cached = self._charts.get(agent)
            if cached is not None and cached[0] == version:
                return cached[1]
            steps = usage_steps(store, agent)
            drawn = (series_of(steps, BUCKETS),
                     [(step[0], STEP_MARKS[step[1]]) for step in steps
                      if step[1] in STEP_MARKS])
            self._charts[agent] = (version, drawn)
            return drawn

        return self.run(agent, work)

    def verify(self, agent: str) -> Verified:
        """``audit verify`` on a store opened for it alone (the pages' store is not
        held meanwhile); :meth:`verify_progress` says how far it got."""
        self.agents.get(agent)
        self._progress[agent] = (0, 0)
        try:
            with self.project.open_store(agent, create=False) as store:
                require_memory(store, agent)

                def report(stats: Scan) -> None:
                    self._progress[agent] = (stats.done, stats.total)

                result = verify_agent(store, agent, progress=report)
                verified = Verified(result.ok, result.message, store.clock.now_us())
        finally:
            self._progress.pop(agent, None)
        self.verified[agent] = verified
        return verified

    def start_verify(self, agent: str, failed: Callable[[Exception], str]) -> None:
        """Start :meth:`verify` in a thread of its own, unless one runs for
        ``agent``; the page asks :meth:`verify_progress` until it ends, and its
        result is then in :attr:`verified` (``failed`` words an error, as the
        pages show one)."""
        def run() -> None:
            try:
                self.verify(agent)
            except Exception as exc:
                self.verified[agent] = Verified(False, failed(exc), 0)
            finally:
                with self._lock:
                    self._jobs.pop(agent, None)

        with self._lock:
            if agent in self._jobs:
                return
            self._progress[agent] = (0, 0)
            job = self._jobs[agent] = threading.Thread(target=run, daemon=True,
                                                       name=f"verify {agent!r}")
        job.start()

    def verify_progress(self, agent: str) -> tuple[int, int] | None:
        """(bytes read, bytes in all) of the verify running for ``agent``, if one is."""
        return self._progress.get(agent)

    def gene_names(self) -> dict[str, str]:
        """v2 id -> gene name, from the project's registry."""
        return {gid: str(info.get("name", "")) for gid, info in
                self.project.registry().entries().items()}

    def genes_of(self, spec: AgentSpec) -> list[GeneInfo]:
        out = []
        for name in spec.genes:
            try:
                gene = self.project.load_gene(name)
            except Exception as exc:  # a missing or broken gene folder: say so, go on
                out.append(GeneInfo(name, None, str(exc)))
                continue
            out.append(GeneInfo(name, gene.v2_id, None if gene.v2_id else
                                "changed since it was wrapped (run rotifer wrap)"))
        return out

    def overview(self) -> tuple[list[AgentSummary], list[str]]:
        """Every agent that reads, and a message for each one that does not."""
        specs, broken = self.agents.scan()
        problems = [str(e) for e in broken]
        out = []
        for spec in specs:
            summary = AgentSummary(spec.name, self.genes_of(spec))
            try:
                with self.store(spec.name) as store:
                    summary.used, summary.quota = store.usage(spec.name)
                    record = store.agent_record(spec.name)
                    summary.last_us = record.last_us
                    summary.usage = self._usage_of(store, spec.name,
                                                   (record.next_seq, record.used_bytes))
            except Exception as exc:  # shown on the agent's row; the others still show
                summary.error = str(exc)
            out.append(summary)
        return out, problems

    def _usage_of(self, store: MemoryStore, agent: str, version: tuple[int, int]
                  ) -> dict[Category, CategoryUsage]:
        cached = self._usage.get(agent)
        if cached is not None and cached[0] == version:
            return cached[1]
        usage = usage_by_category(store, agent)
        self._usage[agent] = (version, usage)
        return usage

    def usage(self, agent: str) -> tuple[int, int, dict[Category, CategoryUsage]]:
        with self.store(agent) as store:
            used, quota = store.usage(agent)
            record = store.agent_record(agent)
            return used, quota, self._usage_of(store, agent, (record.next_seq, used))


@dataclass
class Listing:
    """The agent page's query: filters, sort and the page's cursor."""

    category: Category | None = None
    prefix: str = ""
    creator: str = ""
    contains: str = ""
    sort: Sort = "newest"
    cursor: str = ""
    limit: int = 50
    #: The cursors of the pages before this one (the first page's is ``""``).
    back: list[str] = field(default_factory=list)

    def query(self, **change: Any) -> str:
        """The page's query string with ``change`` applied (empty values left out)."""
        values: dict[str, Any] = {
            "category": self.category.value if self.category else "", "prefix": self.prefix,
            "creator": self.creator, "q": self.contains, "sort": self.sort,
            "cursor": self.cursor, "back": self.back}
        values.update(change)
        pairs = [(k, v) for k, v in values.items()
                 if v and not isinstance(v, list) and not (k == "sort" and v == "newest")]
        pairs += [("back", c) for c in values["back"]]
        return "?" + urlencode(pairs) if pairs else ""

    def filtered(self) -> bool:
        return bool(self.category or self.prefix or self.creator or self.contains)

    def next(self, cursor: str) -> str:
        return self.query(cursor=cursor, back=[*self.back, self.cursor])

    def previous(self) -> str:
        return self.query(cursor=self.back[-1] if self.back else "", back=self.back[:-1])

    def first(self) -> str:
        return self.query(cursor="", back=[])

    def sorted_by(self, sort: str) -> str:
        return self.query(sort=sort, cursor="", back=[])

    @property
    def position(self) -> int:
        """The number of entries on the pages before this one."""
        return len(self.back) * self.limit

    def matched(self, view: AgentPage) -> int | None:
        """How many entries the filters match, when the page knows without a count
        (no filter, or a category alone); else ``None``."""
        if self.prefix or self.creator or self.contains:
            return None
        if self.category is None:
            return view.total
        usage = view.usage.get(self.category)
        return usage.count if usage else 0


@dataclass
class AgentPage:
    name: str
    page: Page
    total: int
    evictions: dict[str, int]
    expiring: int
    now_us: int
    used: int
    quota: int
    usage: dict[Category, CategoryUsage]
    #: Read from a hot standby (the deployer's URL asked for one): how far behind
    #: it is, in seconds; None on a primary or SQLite.
    standby: float | None = None


def marks(entry: EntryInfo, page: AgentPage) -> list[str]:
    """The marks an entry row gets (CSS classes and their legends)."""
    out = []
    if entry.key in page.evictions:
        out.append("evict-next")
    if entry.expires_within(page.now_us):
        out.append("expiring")
    if entry.unbounded_preference:
        out.append("unbounded")
    return out


def audit_lines(data: ConsoleData, agent: str, key: str | None, *, actor: str | None = None,
                since_us: int | None = None, limit: int | None = None,
                rolled_back: bool = True) -> list[dict[str, Any]]:
    """The agent's audit lines (of ``key``, by ``actor``, since ``since_us``), newest
    first, at most ``limit``, ``rolled_back`` lines included: the one place the
    pages read the audit log (repoint it when the reading interface changes)."""
    return data.run(agent, lambda store: list(audit_history(
        store, agent, key=key, actor=actor, since_us=since_us, limit=limit,
        rolled_back=rolled_back)))
