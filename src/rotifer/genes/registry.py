"""The project's record of wrapped and compiled genes: ``.rotifer/genes.json``.

``rotifer wrap`` and ``rotifer compile`` add the gene's current v2 id here. At
run time the runtime recomputes the id from the files on disk and looks it up:
only content that was registered gets a v2 id and with it memory access. The
registry is keyed by id, not by gene name, so going back to an earlier,
registered version of a gene makes its old id valid again — which is right,
because the id names exactly that content.

Format::

    {"format": 1,
     "genes": {"v2:<hex>": {"name": "formatter", "domain": "formatter",
                            "version": "1.0.0", "kind": "python",
                            "codeFile": "gene.py", "v1": "<hex>",
                            "registeredAt": "2025-01-01T00:00:00.000000Z",
                            "via": "wrap"}}}

Writes go to a temporary file that replaces the old one with ``os.replace``,
under an exclusive ``flock`` on ``genes.json.lock`` so two concurrent wraps
cannot lose each other's entry and a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rotifer.genes.errors import RegistryError
from rotifer.memory.private import private_dir

REGISTRY_FILE = "genes.json"
_FORMAT = 1


class Registry:
    """Read/write access to ``<dot_rotifer>/genes.json``."""

    def __init__(self, dot_rotifer: Path) -> None:
        self.dot_rotifer = dot_rotifer
        self.path = dot_rotifer / REGISTRY_FILE
        self._cache: dict[str, dict[str, Any]] | None = None

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise RegistryError(
                f"cannot read {self.path}: {exc.strerror or exc}"
            ) from None
        try:
            doc = json.loads(text)
        except ValueError:
            raise RegistryError(
                f"{self.path} is not valid JSON; delete it and wrap your genes again"
            ) from None
        genes = doc.get("genes") if isinstance(doc, dict) else None
        if not isinstance(genes, dict):
            raise RegistryError(f"{self.path} has no 'genes' object")
        return {k: v for k, v in genes.items() if isinstance(v, dict)}

    def entries(self) -> dict[str, dict[str, Any]]:
        """All registered ids (read once per Registry object, then cached)."""
        if self._cache is None:
            self._cache = self._read()
        return self._cache

    def is_registered(self, gene_id: str) -> bool:
        return gene_id in self.entries()

    def has_name(self, name: str) -> bool:
        """Whether any content of a gene named ``name`` was ever registered."""
        return any(info.get("name") == name for info in self.entries().values())

    def register(self, gene_id: str, info: dict[str, Any]) -> None:
        """Record ``gene_id`` (idempotent: re-registering keeps the first timestamp)."""
        try:
            self._register(gene_id, info)
        except OSError as exc:
            raise RegistryError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def _register(self, gene_id: str, info: dict[str, Any]) -> None:
        with self._locked():
            genes = self._read()
            if gene_id not in genes:
                record = dict(info)
                record["registeredAt"] = (
                    datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                )
                genes[gene_id] = record
                self._write(genes)
            self._cache = genes

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        private_dir(self.dot_rotifer)
        lock_path = self.dot_rotifer / (REGISTRY_FILE + ".lock")
        with os.fdopen(os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600),
                       "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _write(self, genes: dict[str, dict[str, Any]]) -> None:
        data = json.dumps({"format": _FORMAT, "genes": genes}, indent=2, sort_keys=True) + "\n"
        import tempfile  # speed: only where the registry is written (it brings shutil, random)

        fd, tmp = tempfile.mkstemp(prefix=".genes.", suffix=".tmp", dir=self.dot_rotifer)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
