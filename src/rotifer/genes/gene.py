"""Loading a gene folder: ``genes/NAME/phenotype.json`` plus one code file.

Loading reads the code file once and keeps its bytes; the id is computed from
those bytes and a Python gene is executed from those same bytes, so the code
that runs is exactly the code whose id was checked against the registry.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from rotifer.genes.errors import GeneNotFound, InvalidGene
from rotifer.genes.ids import CODE_FILES, KIND_OF_CODE_FILE, GeneKind, v1_id, v2_id
from rotifer.genes.phenotype import Phenotype, load_phenotype
from rotifer.genes.registry import Registry

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # always fullmatch


@dataclass(frozen=True)
class Gene:
    """A loaded gene.

    ``computed_id`` is the v2 id of the files as they are now; ``v2_id`` is the
    same string when that content was wrapped or compiled in this project, and
    None otherwise (then every memory call of the gene is refused).
    """

    name: str
    path: Path
    phenotype: Phenotype
    kind: GeneKind
    v2_id: str | None
    computed_id: str
    code_file: Path
    v1_id: str
    code: bytes = field(repr=False, compare=False)

    @property
    def domain(self) -> str:
        return self.phenotype.domain


def validate_gene_name(name: str) -> None:
    """Gene names are folder names: no separators, no ``..``, no surprises."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InvalidGene(
            f"invalid gene name {name!r}: start with a letter or digit, then use letters, "
            "digits, '.', '_' and '-' (at most 128 characters)"
        )


def find_code_file(gene_dir: Path) -> Path | None:
    """The first existing file of :data:`rotifer.genes.ids.CODE_FILES`."""
    for name in CODE_FILES:
        candidate = gene_dir / name
        if candidate.is_file():
            return candidate
    return None


def load_gene(genes_dir: Path, name: str, registry: Registry | None = None) -> Gene:
    """Load ``genes_dir/name``; ``registry`` decides whether the gene gets its v2 id."""
    validate_gene_name(name)
    gene_dir = genes_dir / name
    if not gene_dir.is_dir():
        raise GeneNotFound(f"no gene '{name}' (no folder {gene_dir})")
    return load_gene_dir(gene_dir, registry, name=name)


def load_gene_dir(gene_dir: Path, registry: Registry | None = None, *, name: str | None = None) -> Gene:
    """Load a gene from its folder (used by :func:`load_gene` and by tests)."""
    name = name or gene_dir.name
    phenotype = load_phenotype(gene_dir / "phenotype.json")
    code_file = find_code_file(gene_dir)
    if code_file is None:
        raise InvalidGene(
            f"gene '{name}' has no code file (expected one of {', '.join(CODE_FILES)})"
        )
    try:
        code = code_file.read_bytes()
    except OSError as exc:
        raise InvalidGene(f"cannot read {code_file}: {exc.strerror or exc}") from None
    if code_file.name == "gene.wasm":
        _warn_if_wat_is_newer(gene_dir, code_file, name)
    computed = v2_id(phenotype.raw, code_file.name, code)
    registered = registry is not None and registry.is_registered(computed)
    kind = KIND_OF_CODE_FILE[code_file.name]
    return Gene(
        name=name,
        path=gene_dir,
        phenotype=phenotype,
        kind=kind,
        v2_id=computed if registered else None,
        computed_id=computed,
        code_file=code_file,
        v1_id=v1_id(phenotype.raw),
        code=code,
    )


_warned: set[Path] = set()


def _warn_if_wat_is_newer(gene_dir: Path, wasm: Path, name: str) -> None:
    """``gene.wasm`` runs, not ``gene.wat``: an edit of the source that was not
    compiled again would silently run the old module, so say so on stderr
    (once per process and gene; a warning only: the old module still runs)."""
    wat = gene_dir / "gene.wat"
    try:
        newer = wat.stat().st_mtime_ns > wasm.stat().st_mtime_ns
    except OSError:  # no gene.wat (the usual case), or it vanished
        return
    if newer and wat not in _warned:
        _warned.add(wat)
        print(f"warning: {gene_dir.parent.name}/{gene_dir.name}/gene.wat is newer than "
              f"gene.wasm; run `rotifer compile {name}`", file=sys.stderr)


def unregistered(gene: Gene, registry: Registry) -> tuple[str, str]:
    """For a gene without a v2 id: what became of it and the command that gives
    it one, e.g. ``("was never wrapped", "`rotifer wrap x`")`` or ``("changed
    since it was last compiled", "`rotifer compile x` again")``.

    "Never" when no content of a gene of this name was ever registered (the
    registry keeps every id it was given), "changed" otherwise.  A gene with a
    ``gene.wat`` is compiled (that writes the ``gene.wasm`` that runs), any
    other gene is wrapped."""
    verb, done = ("compile", "compiled") if (gene.path / "gene.wat").is_file() else \
        ("wrap", "wrapped")
    command = f"`rotifer {verb} {gene.name}`"
    if registry.has_name(gene.name):
        return f"changed since it was last {done}", f"{command} again"
    return f"was never {done}", command


def register_gene(gene: Gene, registry: Registry, *, via: str) -> Gene:
    """Record the gene's current id; return the gene with ``v2_id`` set."""
    registry.register(
        gene.computed_id,
        {
            "name": gene.name,
            "domain": gene.domain,
            "version": gene.phenotype.version,
            "kind": gene.kind,
            "codeFile": gene.code_file.name,
            "v1": gene.v1_id,
            "via": via,
        },
    )
    return replace(gene, v2_id=gene.computed_id)
