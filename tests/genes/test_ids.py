"""v2 ids: the documented rule, checked against an independent construction."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rotifer.genes.gene import load_gene_dir
from rotifer.genes.ids import canonical_json, is_v2_id, v1_id, v2_id

from .helpers import write_gene

KAT_PHENOTYPE = {"name": "kät", "domain": "d", "version": "1", "fidelity": "Native",
                 "inputSchema": {"type": "object"}, "outputSchema": {}}
KAT_CODE = b"def express(i, c):\n    return i\n"
KAT_V2 = "v2:d45e1729b5ffe29c019b4ee59d781678b98e77ec1a2cd542cdf4512c9320094e"
KAT_V1 = "d08a44b37ac5ef8a35092dc5e2e0ab8cee4546a220f24908a19cc7b5b4a32f6c"


def by_the_rule(phenotype: dict[str, object], name: str, code: bytes) -> str:
    """The rule of rotifer/genes/ids.py written out by hand, not with its helpers."""
    p = ('{"domain":"d","fidelity":"Native","inputSchema":{"type":"object"},"name":"kät",'
         '"outputSchema":{},"version":"1"}').encode()
    assert phenotype == KAT_PHENOTYPE  # the literal above is this document, canonical
    data = (b"rotifer-gene-v2\n" + b"phenotype\n" + str(len(p)).encode() + b"\n" + p + b"\n"
            + b"code\n" + name.encode() + b"\n" + str(len(code)).encode() + b"\n" + code + b"\n")
    return "v2:" + hashlib.sha256(data).hexdigest()


def test_known_answer_vector() -> None:
    assert by_the_rule(KAT_PHENOTYPE, "gene.py", KAT_CODE) == KAT_V2
    assert v2_id(KAT_PHENOTYPE, "gene.py", KAT_CODE) == KAT_V2
    assert v1_id(KAT_PHENOTYPE) == KAT_V1 == hashlib.sha256(
        canonical_json(KAT_PHENOTYPE)).hexdigest()
    assert is_v2_id(KAT_V2)
    assert not is_v2_id(KAT_V2.upper()) and not is_v2_id(KAT_V2[:-1])


def test_key_order_and_whitespace_do_not_matter(tmp_path: Path) -> None:
    a = write_gene(tmp_path / "a", "g", KAT_CODE.decode())
    b = write_gene(tmp_path / "b", "g", KAT_CODE.decode())
    doc = json.loads((a / "phenotype.json").read_text())
    (b / "phenotype.json").write_text(json.dumps(dict(reversed(doc.items())), indent=4))
    assert load_gene_dir(a).computed_id == load_gene_dir(b).computed_id


def test_gene_id_is_the_rule_applied_to_the_files(tmp_path: Path) -> None:
    folder = tmp_path / "kat"
    folder.mkdir()
    (folder / "phenotype.json").write_text(json.dumps(KAT_PHENOTYPE, ensure_ascii=False))
    (folder / "gene.py").write_bytes(KAT_CODE)
    gene = load_gene_dir(folder)
    assert gene.computed_id == KAT_V2
    assert gene.v1_id == KAT_V1
    assert gene.v2_id is None  # nothing registered


def test_every_change_changes_the_id() -> None:
    base = v2_id(KAT_PHENOTYPE, "gene.py", KAT_CODE)
    variants = [
        v2_id(KAT_PHENOTYPE, "gene.py", KAT_CODE + b" "),
        v2_id(KAT_PHENOTYPE, "gene.py", KAT_CODE[:-1]),
        v2_id(KAT_PHENOTYPE, "gene.wat", KAT_CODE),
        v2_id({**KAT_PHENOTYPE, "domain": "e"}, "gene.py", KAT_CODE),
        v2_id({**KAT_PHENOTYPE, "version": "2"}, "gene.py", KAT_CODE),
        v2_id({**KAT_PHENOTYPE, "inputSchema": {}}, "gene.py", KAT_CODE),
        v2_id({**KAT_PHENOTYPE, "extra": None}, "gene.py", KAT_CODE),
    ]
    assert base not in variants
    assert len(set(variants)) == len(variants)


def test_lengths_make_the_encoding_unambiguous() -> None:
    # moving bytes between the file name and the code must not collide
    assert v2_id({}, "ab", b"c") != v2_id({}, "a", b"bc")
    assert v2_id({}, "a\n1\nb", b"") != v2_id({}, "a", b"b")
