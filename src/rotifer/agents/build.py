"""``rotifer wrap`` and ``rotifer compile``: check a gene and record its v2 id.

Registering is what gives a gene's *current content* its v2 id and with it
memory access (see :mod:`rotifer.genes.registry`).  Both commands check the
gene before registering it, so an id in the registry always names a gene that
loads: the phenotype is valid, a Python gene's source compiles, a WASM module
is valid and follows the ABI, and a Python or Node gene's module runs in the
contained child as at the start of a run, defining ``express`` as a function
(:func:`load_check`: the error a run would give, INVALID_GENE or GENE_FAILED).

- ``wrap_gene``: registers the gene as it is (its code file is the first of
  ``gene.wasm``, ``gene.wat``, ``gene.py``, ``index.ts``, ``index.js``).
- ``compile_gene``: for a gene with ``gene.wat``, writes ``gene.wasm`` from it
  first (so the registered id is the id of the compiled module, which is what
  then runs); for a gene with only ``gene.wasm`` it checks the module; for a
  Python or Node gene it is the same as ``wrap_gene``.
"""

from __future__ import annotations

import ast

from rotifer.genes.errors import CompileFailed, GeneUnavailable, InvalidGene
from rotifer.genes.gene import Gene, register_gene, validate_gene_name
from rotifer.genes.python import LogSink

from .project import Project


def check_gene(gene: Gene) -> None:
    """Check the gene's code loads (INVALID_GENE for Python, COMPILE_FAILED for WASM).

    A Python gene whose module defines ``async def express`` is refused here,
    where it can be seen without running anything (express must be synchronous)."""
    if gene.kind == "python":
        try:
            tree = ast.parse(gene.code, str(gene.code_file))
            compile(tree, str(gene.code_file), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            where = f" line {exc.lineno}" if isinstance(exc, SyntaxError) else ""
            msg = exc.msg if isinstance(exc, SyntaxError) else str(exc)
            raise InvalidGene(
                f"gene '{gene.name}': {gene.code_file.name}{where}: {msg}") from None
        defs = [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name == "express"]
        if defs and isinstance(defs[-1], ast.AsyncFunctionDef):  # the last one is express
            from rotifer.genes.python import not_synchronous

            raise InvalidGene(not_synchronous(gene.name))
    elif gene.kind == "wasm":
        from rotifer.genes.wasm.compile import check_wasm, code_to_wasm

        check_wasm(code_to_wasm(gene.code, gene.code_file.name), gene.code_file.name)


def load_check(project: Project, gene: Gene, *, hints: list[str] | None = None,
               log_sink: LogSink | None = None) -> None:
    """Load the gene for real, contained, as a run does (its module runs;
    ``express`` must be a plain function), with the error a run would give:
    INVALID_GENE, GENE_FAILED.  When it cannot be loaded here at all
    (GENE_UNAVAILABLE: no Node.js or TypeScript, a machine that cannot confine
    it) and ``hints`` is a list, that is a hint instead of an error: wrapping
    only records the gene's id, and the run says the same again."""
    from rotifer.genes.execute import check_loads

    try:
        check_loads(gene, cache_dir=project.cache_dir, log_sink=log_sink)
    except GeneUnavailable as exc:
        if hints is None:
            raise
        hints.append(f"{exc.message} (so it was not loaded to check it; a run needs this)")


def wrap_gene(project: Project, name: str, *, hints: list[str] | None = None,
              log_sink: LogSink | None = None) -> Gene:
    """Check ``genes/NAME`` (statically, then by loading it as a run does: see
    :func:`load_check`) and register its current id; the gene, with ``v2_id`` set."""
    gene = project.load_gene(name)
    try:
        check_gene(gene)
    except CompileFailed as exc:  # a wasm file that is not a valid module
        raise InvalidGene(exc.message) from None
    load_check(project, gene, hints=[] if hints is None else hints, log_sink=log_sink)
    return register_gene(gene, project.registry(), via="wrap")


def compile_gene(project: Project, name: str, *, hints: list[str] | None = None,
                 log_sink: LogSink | None = None) -> Gene:
    """``gene.wat`` -> ``gene.wasm`` (when there is a ``gene.wat``), then register."""
    validate_gene_name(name)
    wat = project.genes_dir / name / "gene.wat"
    if wat.is_file():
        from rotifer.genes.wasm import compile_wat

        project.load_gene(name)  # phenotype errors first, before writing anything
        compile_wat(wat, wat.with_name("gene.wasm"))
    gene = project.load_gene(name)
    check_gene(gene)
    load_check(project, gene, hints=[] if hints is None else hints, log_sink=log_sink)
    return register_gene(gene, project.registry(), via="compile")
