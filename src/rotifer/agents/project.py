"""A rotifer project: a folder holding ``.rotifer/`` (state) and ``genes/``.

Which project a command acts on: ``--project DIR`` (``explicit``), else
``$ROTIFER_PROJECT``, else the nearest folder upward from the working
directory that holds ``.rotifer/``.  A named folder without ``.rotifer/`` is
an error rather than a reason to keep searching: silently using another
project would put memory where the user did not expect it.

Which memory store an agent uses, first match wins:

1. ``$ROTIFER_MEMORY_URL``
2. the agent's own binding (``memoryUrl`` in ``.rotifer/agents/NAME.json``,
   set by ``Agents.bind`` when an agent is moved)
3. the project setting ``memoryUrl`` in ``.rotifer/config.json``
4. None: the SQLite file ``.rotifer/playground.db``
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rotifer.genes.errors import InvalidAgent, ProjectNotFound, RotiferError
from rotifer.memory.private import private_dir, secure
from rotifer.memory.storage import URL_VARIABLE

if TYPE_CHECKING:
    from rotifer.genes.gene import Gene
    from rotifer.genes.registry import Registry
    from rotifer.memory import AgentMemoryError, Clock, MemoryStore
    from rotifer.memory.storage.backend import Backend

DOT = ".rotifer"
GENES = "genes"
CONFIG = "config.json"
ENV_PROJECT = "ROTIFER_PROJECT"
ENV_MEMORY_URL = URL_VARIABLE
#: The keys ``.rotifer/config.json`` may hold; any other is INVALID_CONFIG.
CONFIG_KEYS = frozenset({"memoryUrl"})


class Project:
    """Paths and settings of one project; cheap to create (reads nothing)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.dot = self.root / DOT
        self.genes_dir = self.root / GENES
        self.agents_dir = self.dot / "agents"
        self.cache_dir = self.dot / "cache"
        self._registry: Registry | None = None

    def __repr__(self) -> str:
        return f"Project({str(self.root)!r})"

    # -- finding and making -----------------------------------------------------

    @classmethod
    def init(cls, root: Path) -> Project:
        """Make ``root/.rotifer/``, ``root/.rotifer/agents/`` and ``root/genes/``
        (fine if they exist), and a ``root/.gitignore`` that holds ``.rotifer/``
        (the line is added to an existing one that lacks it).  A folder inside
        another project's ``genes/`` is refused: it would be a gene's folder."""
        project = cls(root)
        for folder in project.root.parents:
            if folder.name == GENES and (folder.parent / DOT).is_dir():
                raise RotiferError(
                    f"{project.root} is inside the genes/ folder of the project "
                    f"{folder.parent}, where each folder is a gene: make the project "
                    "somewhere else", code="PROJECT_ERROR")
        try:
            private_dir(project.dot)  # .rotifer/ and agents/: 0700 (memory/private.py)
            private_dir(project.agents_dir)
            secure(project.dot)
            project.genes_dir.mkdir(parents=True, exist_ok=True)
            _ignore_state(project.root / ".gitignore")
        except OSError as exc:
            raise RotiferError(f"cannot create the project in {project.root}: "
                               f"{exc.strerror or exc}", code="PROJECT_ERROR") from None
        return project

    @classmethod
    def find(cls, explicit: Path | None = None, start: Path | None = None) -> Project:
        """``explicit`` > ``$ROTIFER_PROJECT`` > nearest ``.rotifer/`` upward from ``start``."""
        named = explicit if explicit is not None else os.environ.get(ENV_PROJECT) or None
        if named is not None:
            root = Path(named).expanduser()
            if not (root / DOT).is_dir():
                how = "--project" if explicit is not None else f"${ENV_PROJECT}"
                raise ProjectNotFound(
                    f"{root} ({how}) is not a rotifer project: it has no {DOT}/ folder "
                    "(run `rotifer init` there)"
                )
            secure(root / DOT)
            return cls(root)
        here = Path(start if start is not None else Path.cwd()).resolve()
        for folder in (here, *here.parents):
            if (folder / DOT).is_dir():
                secure(folder / DOT)
                return cls(folder)
        raise ProjectNotFound(
            f"no {DOT}/ folder in {here} or any folder above it (run `rotifer init`, "
            f"or pass --project DIR)"
        )

    # -- genes --------------------------------------------------------------------

    def registry(self) -> Registry:
        """The project's registry of wrapped/compiled gene ids (one per Project)."""
        if self._registry is None:
            # Imported on first use (like the gene loader below): commands that only
            # look at memory never load the gene code.
            from rotifer.genes.registry import Registry

            self._registry = Registry(self.dot)
        return self._registry

    def load_gene(self, name: str) -> Gene:
        """Load ``genes/NAME``; ``v2_id`` is set only if its content is registered."""
        from rotifer.genes.gene import load_gene

        return load_gene(self.genes_dir, name, self.registry())

    # -- memory ---------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """``.rotifer/config.json`` (``{}`` when absent)."""
        path = self.dot / CONFIG
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RotiferError(f"{path} cannot be read as JSON: {exc}",
                               code="INVALID_CONFIG") from None
        if not isinstance(doc, dict):
            raise RotiferError(f"{path} must be a JSON object", code="INVALID_CONFIG")
        unknown = sorted(set(doc) - CONFIG_KEYS)
        if unknown:
            import difflib

            key = unknown[0]
            close = difflib.get_close_matches(key, sorted(CONFIG_KEYS), n=1, cutoff=0.5)
            hint = f"did you mean '{close[0]}'?" if close else \
                f"the keys are {', '.join(sorted(CONFIG_KEYS))}"
            raise RotiferError(f"{path}: unknown key {key!r} ({hint}); a setting it ignored "
                               "could put memory where you do not expect it",
                               code="INVALID_CONFIG")
        return doc

    def memory_url(self, agent: str | None = None) -> str | None:
        """The memory URL for ``agent`` (or the project), None for the SQLite file."""
        env = os.environ.get(ENV_MEMORY_URL)
        if env:
            return env
        if agent is not None:
            spec = self.agents_dir / f"{agent}.json"
            try:
                doc = json.loads(spec.read_text(encoding="utf-8"))
            except (FileNotFoundError, NotADirectoryError):
                doc = None  # no such agent (yet): the project's store
            except (OSError, ValueError) as exc:
                raise InvalidAgent(f"{spec} cannot be read as JSON: {exc}") from None
            url = doc.get("memoryUrl") if isinstance(doc, dict) else None
            if isinstance(url, str) and url:
                return url
        url = self.config().get("memoryUrl")
        if url is not None and not isinstance(url, str):
            raise RotiferError(f"{self.dot / CONFIG}: 'memoryUrl' must be a string or null",
                               code="INVALID_CONFIG")
        return url or None

    def open_store(self, agent: str | None = None, clock: Clock | None = None, *,
                   create: bool = True) -> MemoryStore:
        """Open the memory store ``agent`` lives in (see :meth:`memory_url`).

        Commands that only use an agent's existing memory pass ``create=False``:
        they never create or repair the store, so a missing, empty or damaged
        ``playground.db`` is MEMORY_STORAGE_ERROR naming it, the same for all.
        """
        from rotifer.memory import AgentMemoryError, MemoryStore

        url = self.memory_url(agent)
        try:
            return MemoryStore.open(self.dot, url, clock, create=create)
        except AgentMemoryError as exc:
            raise self._noted(exc, agent, url) from None

    def open_backend(self, agent: str | None = None) -> Backend:
        """The backend :meth:`open_store` with ``create=False`` would hold, with
        the same errors, for what only reads the agents' records (``agent
        list``).  Speed: it imports neither the audit log nor the engine, the
        store's write path (tests/cli/test_startup_imports.py)."""
        from rotifer.memory.errors import AgentMemoryError
        from rotifer.memory.storage.opening import open_backend

        url = self.memory_url(agent)
        try:
            return open_backend(self.dot, url, create=False)
        except AgentMemoryError as exc:
            raise self._noted(exc, agent, url) from None

    def _noted(self, exc: AgentMemoryError, agent: str | None, url: str | None
               ) -> AgentMemoryError:
        """``exc``, with where ``agent``'s memory is when the store opened is another."""
        note = None if agent is None else self.binding_note(agent, url)
        if note is None:
            return exc
        from rotifer.memory.errors import storage

        return storage(f"{exc.message}; {note}")

    def binding_note(self, agent: str, used: str | None) -> str | None:
        """Where agent's memory is when a command opened another store (None
        when it used the recorded one, or nothing is recorded): the store its
        spec records, never a password, and how to reach it."""
        try:
            doc = json.loads((self.agents_dir / f"{agent}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict):
            return None
        recorded = doc.get("memoryUrl")
        how = (f"unset ${ENV_MEMORY_URL}, which names another store"
               if os.environ.get(ENV_MEMORY_URL) else "")
        if recorded is None:  # made on the project's store: the one it uses unless told
            try:
                default = self.config().get("memoryUrl") or None
            except RotiferError:
                return None
            if default == used or not how or not (default is None or isinstance(default, str)):
                return None
            return (f"agent '{agent}' keeps its memory in {store_words(default)}, the "
                    f"project's store (.rotifer/agents/{agent}.json records no other): {how}")
        if not isinstance(recorded, str) or not recorded or recorded == used:
            return None
        return (f"agent '{agent}' keeps its memory in {store_words(recorded)} (recorded in "
                f".rotifer/agents/{agent}.json)" + (f": {how}" if how else ""))

    def upgrade_memory(self) -> list[Path]:
        """Bring the SQLite memory files the project and its agents use up to this
        rotifer's schema (``rotifer init`` in an existing project); the files it
        upgraded.  Commands that only use memory refuse an older file rather than
        change it; a file that does not exist is not created; PostgreSQL upgrades
        itself whenever it is opened."""
        from rotifer.memory import MemoryStore

        urls = {self.memory_url(None)}
        for spec in sorted(self.agents_dir.glob("*.json")):
            try:
                urls.add(self.memory_url(spec.stem))
            except RotiferError:
                continue  # a malformed spec: `rotifer agent list` reports it
        upgraded = []
        for url in sorted(urls, key=str):
            if url is not None and not url.startswith("sqlite:"):
                continue
            path = Path(url[len("sqlite:"):]) if url else self.dot / "playground.db"
            if path.is_file():
                with MemoryStore.open(self.dot, url) as store:
                    if getattr(store.backend, "upgraded_from", None) is not None:
                        upgraded.append(path)
        return upgraded


def store_words(url: str | None) -> str:
    """A memory URL for a message: the SQLite file, or PostgreSQL's host, port
    and database (never its password)."""
    if url is None:
        return f"the project's SQLite file {DOT}/playground.db"
    if url.startswith("sqlite:"):
        return f"the SQLite file {url[len('sqlite:'):]}"
    if url.startswith(("postgresql:", "postgres:")):
        from rotifer.memory.storage.postgres.settings import describe_url

        return f"PostgreSQL {describe_url(url)}"
    return "another store"


def _ignore_state(path: Path) -> None:
    """``.rotifer/`` in the project's ``.gitignore``: its state (the memory, the
    audit log, the registry) must never be committed."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except UnicodeDecodeError:
        return  # not ours to rewrite
    if text is None:
        path.write_text(f"# rotifer's state: memory, audit log, registry (never commit it)\n"
                        f"{DOT}/\n", encoding="utf-8")
        return
    lines = {line.strip() for line in text.splitlines()}
    if lines & {DOT, f"{DOT}/", f"/{DOT}", f"/{DOT}/"}:
        return
    with path.open("a", encoding="utf-8") as fh:
        fh.write(("" if not text or text.endswith("\n") else "\n") + f"{DOT}/\n")


def require_memory(store: MemoryStore, agent: str, project: Project | None = None) -> None:
    """MEMORY_STORAGE_ERROR, naming the store, when ``agent`` has no memory in it:
    every command reports a memory that is gone the same way (with ``project``,
    also where the agent's spec says its memory is, when that is elsewhere)."""
    if not store.has_agent(agent):
        from rotifer.memory.errors import storage
        from rotifer.memory.transfer import describe

        note = None if project is None else project.binding_note(agent, project.memory_url(agent))
        raise storage(f"agent '{agent}' has no memory in {describe(store)}"
                      + (f"; {note}" if note else " (was it moved or its store replaced?)"))
