"""Agents: a named genome (genes + how they compose) with a memory of its own.

An agent's spec lives in ``.rotifer/agents/NAME.json``::

    {"format": 1, "name": "fmt", "genes": ["formatter"], "composition": "seq",
     "memoryUrl": null, "createdAt": "2026-12-02T23:00:00.000000Z"}

Its memory lives in the memory store under the agent's NAME, with the quota
and data policy given at creation (the store keeps them; the spec does not
duplicate them, so there is one source of truth).  Because the memory is keyed
by the agent's name and not by any gene, replacing or updating genes with
:meth:`Agents.set_genes` leaves the memory exactly as it is.

Creation is all or nothing: every check (name, composition, genes, quota,
data policy, no existing agent) runs before anything is written; the memory
record is created first and the spec file last, and if the spec cannot be
written the memory record is dropped again.  An agent without a spec file
does not exist.

Composition arity: ``seq`` and ``par`` take one gene or more; ``cond`` exactly
three (predicate, then, else); ``try`` two or more (each is the fallback of
the one before).  See :mod:`rotifer.agents.compositions`.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from rotifer.genes.errors import (
    AgentExists,
    AgentNotFound,
    InvalidAgent,
    InvalidComposition,
    InvalidGene,
    RotiferError,
)
from rotifer.memory import DEFAULT_QUOTA_BYTES, AgentMemoryError, DataPolicy
from rotifer.memory.private import private_dir

from . import containment
from .containment import Containment
from .project import Project

Composition = Literal["seq", "par", "cond", "try"]
COMPOSITIONS: tuple[str, ...] = get_args(Composition)
AGENT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # always fullmatch
#: What older versions accepted (``^...$`` with ``re.match`` lets one trailing line
#: break through): an agent created then is still read, shown and deleted by its
#: exact name, but no new agent may be named so.
_STORED_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\n?")
_FORMAT = 1


@dataclass(frozen=True)
class AgentSpec:
    """What ``.rotifer/agents/NAME.json`` says."""

    name: str
    genes: list[str]
    composition: Composition
    memory_url: str | None = None
    created_at: str | None = None
    #: What the deployer granted beyond containment (see :mod:`rotifer.agents.containment`).
    containment: Containment = field(default_factory=Containment)

    def to_json(self) -> dict[str, Any]:
        doc = {"format": _FORMAT, "name": self.name, "genes": list(self.genes),
               "composition": self.composition, "memoryUrl": self.memory_url,
               "createdAt": self.created_at}
        if not self.containment.is_default():
            doc["containment"] = self.containment.to_json()
        return doc


def validate_agent_name(name: object) -> str:
    """Agent names are file names and memory ids: letters, digits, ``.``, ``_``, ``-``."""
    if not isinstance(name, str) or not AGENT_NAME_RE.fullmatch(name):
        raise InvalidAgent(
            f"invalid agent name {name!r}: start with a letter or digit, then use letters, "
            "digits, '.', '_' and '-' (at most 128 characters)"
        )
    return name


def validate_stored_agent_name(name: object) -> str:
    """A name :func:`validate_agent_name` accepts, or one older versions let through
    (a valid name and one trailing line break), to reach an agent that exists."""
    if isinstance(name, str) and _STORED_NAME_RE.fullmatch(name):
        return name
    return validate_agent_name(name)


#: Device names Windows reserves in any folder, whatever the case or extension.
WINDOWS_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL",
                              *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))})


def check_new_agent_name(name: str, existing: Iterable[str]) -> None:
    """What a *new* agent's name must also be, so that a project copied to macOS
    or Windows still works: not a Windows device name (``CON``, ``nul.txt``,
    ``com1``...), not ending in a dot (Windows drops it), and not the name of an
    existing agent in another case (those file systems ignore case).  Names
    already in use before these rules keep working; only creation checks them."""
    stem = name.split(".", 1)[0].upper()
    if stem in WINDOWS_RESERVED:
        raise InvalidAgent(f"invalid agent name {name!r}: {stem} is a device name on Windows, "
                           "so its spec file could not exist there; pick another name")
    if name.endswith("."):
        raise InvalidAgent(f"invalid agent name {name!r}: Windows drops a trailing dot from "
                           "file names; pick a name that does not end in '.'")
    folded = name.casefold()
    for other in existing:
        if other != name and other.casefold() == folded:
            raise AgentExists(f"agent '{other}' already exists, and {name!r} differs from it "
                              "only in case: the two would be one file on macOS and Windows")


def check_composition(composition: object, genes: list[str]) -> Composition:
    """The composition name and the number of genes it needs."""
    if composition not in COMPOSITIONS:
        raise InvalidComposition(
            f"unknown composition {composition!r}: use one of {', '.join(COMPOSITIONS)}"
        )
    n = len(genes)
    if composition == "cond" and n != 3:
        raise InvalidComposition(
            f"cond needs exactly 3 genes (predicate, then, else), got {n}")
    if composition == "try" and n < 2:
        raise InvalidComposition(f"try needs at least 2 genes (first, fallback), got {n}")
    return composition  # type: ignore[return-value]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Agents:
    """Create, list, read and change the project's agents."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.dir = project.agents_dir

    def spec_path(self, name: str) -> Path:
        """An existing agent's file (a name an older version accepted included:
        :func:`validate_stored_agent_name`); new agents are checked by ``create``."""
        return self.dir / f"{validate_stored_agent_name(name)}.json"

    # -- checks -----------------------------------------------------------------

    def _check_genes(self, genes: object) -> list[str]:
        """Every gene must exist and load (GENE_NOT_FOUND, INVALID_PHENOTYPE, ...), and
        its current content must be wrapped or compiled (INVALID_GENE): a gene
        without a v2 id would have every memory call refused, which is never
        what the one creating the agent meant (a gene `wrap` refused, say for a
        SyntaxError, was never wrapped)."""
        if isinstance(genes, str) or not isinstance(genes, list | tuple):
            raise InvalidAgent("genes must be a list of gene names")
        names = [g.strip() if isinstance(g, str) else g for g in genes]
        if not names:
            raise InvalidAgent("an agent needs at least one gene")
        for g in names:
            if not isinstance(g, str) or not g:
                raise InvalidAgent(f"invalid gene name {g!r} in the gene list")
            gene = self.project.load_gene(g)
            if gene.v2_id is None:
                from rotifer.genes.gene import unregistered

                what, command = unregistered(gene, self.project.registry())
                raise InvalidGene(f"gene '{g}' {what}: run {command} (an agent's genes "
                                  "must be wrapped or compiled to use memory)")
        return list(names)

    def check_loads(self, names: builtins.list[str], grants: Containment) -> None:
        """Each gene loads as the agent's run would load it (contained, or
        trusted when granted), with the error that run would give: an agent is
        never created around a gene that cannot run (INVALID_GENE, GENE_FAILED,
        GENE_UNAVAILABLE)."""
        from rotifer.genes.execute import check_loads

        for g in dict.fromkeys(names):
            check_loads(self.project.load_gene(g), cache_dir=self.project.cache_dir,
                        grant=grants.grant(g))

    # -- reading ------------------------------------------------------------------

    def _read(self, path: Path) -> AgentSpec:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise AgentNotFound(f"no agent '{path.stem}' (no {path})") from None
        except (OSError, ValueError) as exc:
            raise InvalidAgent(f"{path} cannot be read as JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise InvalidAgent(f"{path} must be a JSON object")
        genes = doc.get("genes")
        url = doc.get("memoryUrl")
        composition = doc.get("composition", "seq")
        if (doc.get("name") != path.stem or not isinstance(genes, list)
                or not all(isinstance(g, str) for g in genes)
                or composition not in COMPOSITIONS
                or not (url is None or isinstance(url, str))):
            raise InvalidAgent(f"{path} is not an agent spec (name, genes, composition, "
                               "memoryUrl)")
        created = doc.get("createdAt")
        return AgentSpec(name=path.stem, genes=list(genes), composition=composition,
                         memory_url=url, created_at=created if isinstance(created, str) else None,
                         containment=containment.parse(doc.get("containment"), genes, str(path)))

    def get(self, name: str) -> AgentSpec:
        """The agent's spec, or AGENT_NOT_FOUND."""
        path = self.spec_path(name)
        if not path.is_file():
            raise AgentNotFound(f"no agent '{name}' in {self.project.root} "
                                "(create it with `rotifer agent create`)")
        return self._read(path)

    def _names(self) -> builtins.list[str]:
        """The names of the spec files there are, readable or not."""
        if not self.dir.is_dir():
            return []
        return [p.stem for p in self.dir.glob("*.json") if _STORED_NAME_RE.fullmatch(p.stem)]

    def exists(self, name: str) -> bool:
        return self.spec_path(name).is_file()

    def list(self) -> list[AgentSpec]:
        """Every agent, sorted by name; INVALID_AGENT if any spec is malformed."""
        specs, broken = self.scan()
        if broken:
            raise broken[0]
        return specs

    def scan(self) -> tuple[builtins.list[AgentSpec], builtins.list[RotiferError]]:
        """Every agent whose spec reads, sorted by name, and the error of each
        one whose spec does not: one broken file must not hide the others."""
        if not self.dir.is_dir():
            return [], []
        specs: builtins.list[AgentSpec] = []
        broken: builtins.list[RotiferError] = []
        for path in sorted(self.dir.glob("*.json")):
            if not _STORED_NAME_RE.fullmatch(path.stem):
                continue
            try:
                specs.append(self._read(path))
            except RotiferError as exc:
                broken.append(exc)
        return specs, broken

    # -- writing ------------------------------------------------------------------

    def create(self, name: str, genes: builtins.list[str], composition: str = "seq",
               quota_bytes: int = DEFAULT_QUOTA_BYTES,
               data_policy: DataPolicy | None = None,
               grants: Containment | None = None) -> AgentSpec:
        """Create the agent and its empty memory; nothing is created on any error.
        ``grants``: what its genes may do beyond containment (checked here too)."""
        validate_agent_name(name)
        check_new_agent_name(name, self._names())
        names = self._check_genes(genes)
        comp = check_composition(composition, names)
        if (not isinstance(quota_bytes, int) or isinstance(quota_bytes, bool)
                or quota_bytes <= 0):
            raise InvalidAgent(f"memory quota must be a positive number of bytes, "
                               f"got {quota_bytes!r}")
        if data_policy is not None and not isinstance(data_policy, DataPolicy):
            raise InvalidAgent("data policy must be a DataPolicy (see DataPolicy.from_json)")
        path = self.spec_path(name)
        if path.exists():
            raise AgentExists(f"agent '{name}' already exists ({path})")
        grants = containment.parse(grants.to_json() if grants else None, names, "agent create")
        self.check_loads(names, grants)
        # The store it is created on is recorded (ROTIFER_MEMORY_URL or the
        # project's config; None: the project's SQLite file), so that a later
        # run without that setting finds its memory, or says where it is.
        spec = AgentSpec(name=name, genes=names, composition=comp,
                         memory_url=self.project.memory_url(name), created_at=_now(),
                         containment=grants)
        store = self.project.open_store(name)
        try:
            if store.has_agent(name):
                raise AgentExists(
                    f"the memory store already holds a memory for an agent '{name}' that "
                    f"has no spec (left from an earlier agent of that name?): `rotifer agent "
                    f"delete {name}` removes it, or pick another name"
                )
            try:
                store.create_agent(name, quota_bytes, data_policy or DataPolicy())
            except AgentMemoryError:
                if store.has_agent(name):  # another process created it just now
                    raise AgentExists(f"agent '{name}' already exists") from None
                raise
            try:
                self._write(path, spec, exclusive=True)
            except BaseException:
                store.drop_agent(name)
                raise
        finally:
            store.close()
        return spec

    def write_new(self, spec: AgentSpec) -> None:
        """Write a new agent's spec (AGENT_EXISTS if one exists): for an agent
        whose memory comes from elsewhere (``agent import`` of an export that
        carries the spec); the caller has checked its genes."""
        validate_agent_name(spec.name)
        check_new_agent_name(spec.name, self._names())
        self._write(self.spec_path(spec.name), spec, exclusive=True)

    def set_genes(self, name: str, genes: builtins.list[str], composition: str | None = None
                  ) -> AgentSpec:
        """Replace the agent's genes (and composition); its memory is untouched."""
        spec = self.get(name)
        names = self._check_genes(genes)
        comp = check_composition(composition if composition is not None else spec.composition,
                                 names)
        # Grants for genes no longer in the agent go with them.
        kept = spec.containment
        grants = replace(kept, trust=tuple(g for g in kept.trust if g in names),
                         allow_tcp={g: p for g, p in kept.allow_tcp.items() if g in names})
        self.check_loads(names, grants)
        new = replace(spec, genes=names, composition=comp, containment=grants)
        self._write(self.spec_path(name), new, exclusive=False)
        return new

    def bind(self, name: str, memory_url: str | None) -> AgentSpec:
        """Record which memory store the agent lives in (None: the project's)."""
        if memory_url is not None and (not isinstance(memory_url, str) or not memory_url):
            raise InvalidAgent("memory URL must be a non-empty string or None")
        spec = self.get(name)
        new = replace(spec, memory_url=memory_url)
        self._write(self.spec_path(name), new, exclusive=False)
        return new

    def _write(self, path: Path, spec: AgentSpec, *, exclusive: bool) -> None:
        """Write atomically; ``exclusive`` refuses to replace an existing spec
        (two concurrent creates of one name: exactly one wins)."""
        data = json.dumps(spec.to_json(), indent=2) + "\n"
        try:
            private_dir(self.dir)
            import tempfile  # speed: only where an agent file is written

            fd, tmp = tempfile.mkstemp(prefix=".agent.", suffix=".tmp", dir=self.dir)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                if exclusive:
                    try:
                        os.link(tmp, path)
                    except FileExistsError:
                        raise AgentExists(f"agent '{spec.name}' already exists ({path})"
                                          ) from None
                else:
                    os.replace(tmp, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        except OSError as exc:
            raise RotiferError(f"cannot write {path}: {exc.strerror or exc}",
                               code="AGENT_STORAGE_ERROR") from None
