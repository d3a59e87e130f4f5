"""What a deployer allows an agent's genes beyond containment, kept in its spec.

``agent create NAME --genes ... --trust GENE --allow-tcp GENE:PORT --gene-memory MIB
--gene-threads N --gene-temp MIB`` becomes, in ``.rotifer/agents/NAME.json``::

    "containment": {"trust": ["legacy"], "allowTcp": {"fetcher": [5432]},
                    "geneMemoryMiB": 512, "geneThreads": 512, "geneTempMiB": 1024}

(absent when nothing is granted).  ``trust`` runs a Python or Node gene
uncontained (every run says so once on stderr); ``allowTcp`` lets a contained
gene connect to those TCP ports (and create TCP sockets: nothing else);
``geneMemoryMiB`` is the data-size limit of each contained gene (default
:data:`~rotifer.genes.contain.sandbox.DEFAULT_MEMORY_MIB`); ``geneOutputMiB``
(``--gene-output MIB``) how much of a gene's output (``print``, ``ctx.log``,
``console.log``, raw writes together) a run passes on (default 1 MiB:
:data:`~rotifer.genes.contain.sandbox.MAX_OUTPUT_BYTES`); ``geneThreads`` the
threads and processes of the genes' user and ``geneTempMiB`` the total size of
each gene's temporary folder (defaults ``DEFAULT_TASKS`` and
``DEFAULT_TEMP_MIB``; both enforced when rotifer runs as root).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rotifer.genes.contain.sandbox import (
    DEFAULT_MEMORY_MIB,
    DEFAULT_TASKS,
    DEFAULT_TEMP_MIB,
    MAX_OUTPUT_BYTES,
    Grant,
)
from rotifer.genes.errors import InvalidAgent


@dataclass(frozen=True)
class Containment:
    trust: tuple[str, ...] = ()
    allow_tcp: dict[str, tuple[int, ...]] = field(default_factory=dict)
    gene_memory_mib: int | None = None
    gene_output_mib: int | None = None
    gene_threads: int | None = None
    gene_temp_mib: int | None = None

    def is_default(self) -> bool:
        return (not self.trust and not self.allow_tcp and self.gene_memory_mib is None
                and self.gene_output_mib is None and self.gene_threads is None
                and self.gene_temp_mib is None)

    def output_bytes(self) -> int:
        """How much output a run of one of the agent's genes passes on."""
        return MAX_OUTPUT_BYTES if self.gene_output_mib is None else self.gene_output_mib << 20

    def grant(self, gene: str) -> Grant:
        return Grant(trusted=gene in self.trust, tcp_ports=self.allow_tcp.get(gene, ()),
                     memory_mib=self.gene_memory_mib or DEFAULT_MEMORY_MIB,
                     tasks=self.gene_threads or DEFAULT_TASKS,
                     temp_mib=self.gene_temp_mib or DEFAULT_TEMP_MIB)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"trust": list(self.trust),
                               "allowTcp": {g: list(p) for g, p in self.allow_tcp.items()}}
        if self.gene_memory_mib is not None:
            doc["geneMemoryMiB"] = self.gene_memory_mib
        if self.gene_output_mib is not None:
            doc["geneOutputMiB"] = self.gene_output_mib
        if self.gene_threads is not None:
            doc["geneThreads"] = self.gene_threads
        if self.gene_temp_mib is not None:
            doc["geneTempMiB"] = self.gene_temp_mib
        return doc

    def summary(self) -> str:
        """One cell of ``agent list``: ``contained``, or what is granted."""
        parts = [f"trusted: {','.join(self.trust)}"] if self.trust else []
        parts += [f"tcp {g}:{','.join(map(str, p))}" for g, p in self.allow_tcp.items()]
        if self.gene_memory_mib is not None:
            parts.append(f"memory {self.gene_memory_mib} MiB")
        if self.gene_output_mib is not None:
            parts.append(f"output {self.gene_output_mib} MiB")
        if self.gene_threads is not None:
            parts.append(f"threads {self.gene_threads}")
        if self.gene_temp_mib is not None:
            parts.append(f"temp {self.gene_temp_mib} MiB")
        return "; ".join(parts) or "contained"


def _port(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise InvalidAgent(f"{where}: a TCP port is a number from 1 to 65535, got {value!r}")
    return value


def parse(doc: object, genes: Iterable[str], where: str) -> Containment:
    """A spec's ``containment`` (or create's options as the same JSON); every
    gene named must be one of the agent's."""
    if doc is None:
        return Containment()
    if not isinstance(doc, dict) or set(doc) - {"trust", "allowTcp", "geneMemoryMiB",
                                                "geneOutputMiB", "geneThreads",
                                                "geneTempMiB"}:
        raise InvalidAgent(f"{where}: containment must be an object with trust, allowTcp, "
                           "geneMemoryMiB, geneOutputMiB, geneThreads and geneTempMiB")
    known = set(genes)
    trust = doc.get("trust", [])
    if not isinstance(trust, list) or not all(isinstance(g, str) for g in trust):
        raise InvalidAgent(f"{where}: trust must be a list of gene names")
    tcp = doc.get("allowTcp", {})
    if not isinstance(tcp, dict) or not all(isinstance(p, list) for p in tcp.values()):
        raise InvalidAgent(f"{where}: allowTcp must map gene names to lists of ports")
    for gene in [*trust, *tcp]:
        if gene not in known:
            raise InvalidAgent(f"{where}: '{gene}' is not one of the agent's genes "
                               f"({', '.join(sorted(known))})")
    mib = doc.get("geneMemoryMiB")
    if mib is not None and (isinstance(mib, bool) or not isinstance(mib, int) or mib < 16):
        raise InvalidAgent(f"{where}: geneMemoryMiB must be a whole number of MiB, at least "
                           f"16, got {mib!r}")
    out = doc.get("geneOutputMiB")
    if out is not None and (isinstance(out, bool) or not isinstance(out, int)
                            or not 1 <= out <= 1024):
        raise InvalidAgent(f"{where}: geneOutputMiB must be a whole number of MiB from 1 to "
                           f"1024, got {out!r}")
    return Containment(
        trust=tuple(dict.fromkeys(trust)),
        allow_tcp={g: tuple(sorted({_port(p, where) for p in ports})) for g, ports in tcp.items()},
        gene_memory_mib=mib, gene_output_mib=out,
        gene_threads=_at_least(doc, "geneThreads", 16, "threads", where),
        gene_temp_mib=_at_least(doc, "geneTempMiB", 1, "MiB", where))


def _at_least(doc: dict[str, Any], key: str, least: int, unit: str, where: str) -> int | None:
    value = doc.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < least):
        raise InvalidAgent(f"{where}: {key} must be a whole number of {unit}, at least "
                           f"{least}, got {value!r}")
    return value


def from_options(trust: Iterable[str], allow_tcp: Iterable[str], gene_memory: int | None,
                 genes: Iterable[str], gene_output: int | None = None,
                 gene_threads: int | None = None, gene_temp: int | None = None) -> Containment:
    """``--trust GENE``, ``--allow-tcp GENE:PORT`` (repeated), ``--gene-memory MIB``,
    ``--gene-output MIB``, ``--gene-threads N``, ``--gene-temp MIB``."""
    tcp: dict[str, list[int]] = {}
    for item in allow_tcp:
        gene, _, port = item.rpartition(":")
        if not gene or not port.isdigit():
            raise InvalidAgent(f"--allow-tcp {item!r}: give GENE:PORT, e.g. fetcher:443")
        tcp.setdefault(gene, []).append(int(port))
    doc: dict[str, Any] = {"trust": list(trust), "allowTcp": tcp}
    if gene_memory is not None:
        doc["geneMemoryMiB"] = gene_memory
    if gene_output is not None:
        doc["geneOutputMiB"] = gene_output
    if gene_threads is not None:
        doc["geneThreads"] = gene_threads
    if gene_temp is not None:
        doc["geneTempMiB"] = gene_temp
    return parse(doc, genes, "agent create")
