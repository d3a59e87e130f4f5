"""Writing gene folders for the gene and agent tests (real files in tmp dirs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

WAT_GENES = Path(__file__).parent.parent / "wasm" / "genes"


def phenotype(name: str, domain: str = "formatter", **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": name,
        "domain": domain,
        "version": "1.0.0",
        "fidelity": "Wrapped",
        "inputSchema": {},
        "outputSchema": {},
    }
    doc.update(extra)
    return doc


def write_gene(genes_dir: Path, name: str, code: str | bytes, *, file: str = "gene.py",
               domain: str = "formatter", **extra: Any) -> Path:
    """``genes_dir/name`` with a phenotype and one code file; returns the folder."""
    folder = genes_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "phenotype.json").write_text(json.dumps(phenotype(name, domain, **extra)))
    data = code if isinstance(code, bytes) else code.encode()
    (folder / file).write_bytes(data)
    return folder


def write_wat_gene(genes_dir: Path, name: str, fixture: str, *, domain: str = "formatter",
                   **extra: Any) -> Path:
    """A gene whose code is one of tests/wasm/genes/FIXTURE.wat."""
    folder = write_gene(genes_dir, name, b"", file="gene.wat", domain=domain, **extra)
    shutil.copyfile(WAT_GENES / f"{fixture}.wat", folder / "gene.wat")
    return folder


#: The seed's formatter, in Python: remembers the indent as a PREFERENCE.
FORMATTER = '''
KEY = "formatter/indent"

def express(input, ctx):
    indent = input.get("indent")
    if indent is None:
        saved = ctx.memory.read_memory(KEY, "PREFERENCE")
        indent = int(saved.value.decode()) if saved else 2
    else:
        ctx.memory.write_memory(KEY, str(indent).encode(), "PREFERENCE")
    lines = input.get("code", "").splitlines()
    return {"formatted": "\\n".join(" " * indent + l.strip() for l in lines), "indent": indent}
'''

#: A "better" formatter of the same domain: reads the same preference, tabs optional.
BETTER_FORMATTER = FORMATTER.replace('"formatted"', '"version": 2, "formatted"')
