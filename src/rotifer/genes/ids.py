"""Gene ids: the v1 id of the reference and the content-addressed v2 id.

Memory entries record the v2 id of the gene that created them, and access
scopes such as ``CREATOR_GENE_ONLY`` compare it, so the id must change whenever
the gene's behaviour could: any change of code or of phenotype (including its
``domain``) gives a new id. The rule, exactly:

1. ``P`` = the canonical phenotype JSON: the parsed ``phenotype.json`` dumped
   with keys sorted at every depth, no whitespace (separators ``,`` and ``:``),
   non-ASCII characters kept as they are, encoded as UTF-8.
2. The code file is the first of ``gene.wasm``, ``gene.wat``, ``gene.py``,
   ``index.ts``, ``index.js`` that exists in the gene's folder (so a compiled
   ``gene.wasm`` wins over the ``gene.wat`` it came from). ``N`` = its file name
   as UTF-8, ``C`` = its bytes exactly as on disk.
3. The hashed byte string is::

       b"rotifer-gene-v2\\n"
       + b"phenotype\\n" + ascii(len(P)) + b"\\n" + P + b"\\n"
       + b"code\\n" + N + b"\\n" + ascii(len(C)) + b"\\n" + C + b"\\n"

   where ``ascii(n)`` is the decimal length in ASCII digits. The lengths make
   the encoding unambiguous: no two different (phenotype, file name, code)
   triples produce the same bytes.
4. ``v2 id`` = ``"v2:"`` + lowercase hex SHA-256 of that byte string.

The v1 id (the reference playground's) is the lowercase hex SHA-256 of ``P``
alone; it ignores the code, so it is shown for information only and is never
used for access decisions.

Only the code file is hashed: files a gene loads or imports besides it are not
covered by the id.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

GeneKind = Literal["python", "wasm", "node"]

CODE_FILES = ("gene.wasm", "gene.wat", "gene.py", "index.ts", "index.js")
KIND_OF_CODE_FILE: dict[str, GeneKind] = {
    "gene.wasm": "wasm",
    "gene.wat": "wasm",
    "gene.py": "python",
    "index.ts": "node",
    "index.js": "node",
}
V2_ID_RE = re.compile(r"v2:[0-9a-f]{64}")  # always fullmatch


def canonical_json(doc: Any) -> bytes:
    """Keys sorted at every depth, no whitespace, UTF-8; NaN/Infinity are not JSON."""
    return json.dumps(
        doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


#: Up to this many bytes are hashed by the interpreter's own SHA-256; more by OpenSSL's.
_SMALL = 1 << 16


def _sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of ``data``.  Speed: ``hashlib`` loads OpenSSL (~12 M
    instructions, a good part of ``rotifer agent list``, which computes the id of
    every agent's genes); a gene's phenotype and code are usually a few KiB, which
    the built-in ``_sha256`` hashes without it.  The same digest either way."""
    if len(data) <= _SMALL:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]
        except ImportError:  # pragma: no cover - another interpreter
            pass
        else:
            return str(sha256(data).hexdigest())
    import hashlib

    return hashlib.sha256(data).hexdigest()


def v1_id(phenotype_doc: Any) -> str:
    """The reference playground's id: hex SHA-256 of the canonical phenotype JSON."""
    return _sha256_hex(canonical_json(phenotype_doc))


def v2_canonical_bytes(phenotype_doc: Any, code_name: str, code: bytes) -> bytes:
    """The exact byte string the v2 id hashes (see the module docstring)."""
    p = canonical_json(phenotype_doc)
    n = code_name.encode("utf-8")
    return b"".join(
        [
            b"rotifer-gene-v2\n",
            b"phenotype\n",
            str(len(p)).encode("ascii"),
            b"\n",
            p,
            b"\n",
            b"code\n",
            n,
            b"\n",
            str(len(code)).encode("ascii"),
            b"\n",
            code,
            b"\n",
        ]
    )


def v2_id(phenotype_doc: Any, code_name: str, code: bytes) -> str:
    """``"v2:"`` + hex SHA-256 of :func:`v2_canonical_bytes`."""
    return "v2:" + _sha256_hex(v2_canonical_bytes(phenotype_doc, code_name, code))


def is_v2_id(value: str) -> bool:
    return bool(V2_ID_RE.fullmatch(value))
