"""No silent exposure: a contained gene may read its runtime's folders (the
virtualenv's prefix, ``/usr``, node's folder, ...), so a project that lies
under one of them would be readable by every contained gene -- its
``.rotifer/`` (every agent's memory, the audit log) and the other genes'
folders -- while containment seemed to hold.  Such a run is refused before
the gene starts (GENE_UNAVAILABLE, naming both paths).

The gene's own folder is read on purpose and is not counted; what is
protected is the project around it: ``genes/NAME``'s ``genes/`` (the other
genes), that folder's parent (the project) and its ``.rotifer/``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from rotifer.genes.errors import GeneUnavailable


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def protected(gene_dir: Path) -> list[tuple[str, str]]:
    """(what, where) a contained run of the gene in ``gene_dir`` must not expose."""
    genes = Path(_real(gene_dir)).parent
    root = genes.parent
    return [("the project", str(root)), ("its .rotifer/", str(root / ".rotifer")),
            ("its other genes' folders", str(genes))]


def refuse_exposed(name: str, gene_dir: Path, read: Iterable[str]) -> None:
    """GENE_UNAVAILABLE when a path the sandbox lets the gene read (``read``,
    other than its own folder) holds the project, its ``.rotifer/`` or the
    other genes' folders."""
    own = _real(gene_dir)
    folders = [r for r in (_real(p) for p in read) if r != own]
    for what, where in protected(gene_dir):
        for folder in folders:
            if _within(where, folder):
                raise GeneUnavailable(
                    f"gene '{name}' cannot be contained here: {what} ({where}) lies under "
                    f"{folder}, which contained genes may read, so every contained gene "
                    "could read it; move the project out of that folder (or trust the gene)")
