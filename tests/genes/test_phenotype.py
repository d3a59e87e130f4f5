"""phenotype.json validation: every problem names the file and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rotifer.genes.errors import InvalidInput, InvalidPhenotype
from rotifer.genes.phenotype import Phenotype, check_schema, load_phenotype, validate_input

from .helpers import phenotype


def write(tmp_path: Path, content: str | bytes) -> Path:
    folder = tmp_path / "genes" / "fmt"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "phenotype.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def test_valid_phenotype_loads(tmp_path: Path) -> None:
    doc = phenotype("fmt", extra_field=[1, 2])
    p = load_phenotype(write(tmp_path, json.dumps(doc)))
    assert (p.name, p.domain, p.version, p.fidelity) == ("fmt", "formatter", "1.0.0", "Wrapped")
    assert p.raw == doc  # unknown fields are kept (they are part of the id)


@pytest.mark.parametrize(("content", "words"), [
    (b"{", ["genes/fmt/phenotype.json", "not valid JSON"]),
    (b"\xff\xfe", ["not UTF-8"]),
    (b"[1]", ["must be a JSON object", "array"]),
    (b'{"name": "x", "domain": 1, "version": "1", "fidelity": "Native", "inputSchema": {}, '
     b'"outputSchema": {}, "v": NaN}', ["NaN"]),
])
def test_unreadable_documents(tmp_path: Path, content: bytes, words: list[str]) -> None:
    with pytest.raises(InvalidPhenotype) as info:
        load_phenotype(write(tmp_path, content))
    assert info.value.code == "INVALID_PHENOTYPE"
    for word in words:
        assert word in str(info.value)
    assert str(info.value).startswith("INVALID_PHENOTYPE: genes/fmt/phenotype.json")


def test_missing_file(tmp_path: Path) -> None:
    (tmp_path / "genes" / "fmt").mkdir(parents=True)
    with pytest.raises(InvalidPhenotype, match=r"genes/fmt/phenotype.json: file not found"):
        load_phenotype(tmp_path / "genes" / "fmt" / "phenotype.json")


@pytest.mark.parametrize(("change", "field"), [
    ({"name": None}, "name"),
    ({"name": ""}, "name"),
    ({"domain": 3}, "domain"),
    ({"domain": "  "}, "domain"),
    ({"version": ["1"]}, "version"),
    ({"name": "a\x00b"}, "name"),
    ({"fidelity": "native"}, "fidelity"),
    ({"inputSchema": []}, "inputSchema"),
    ({"outputSchema": "object"}, "outputSchema"),
    ({"inputSchema": {"type": "text"}}, "inputSchema"),
    ({"inputSchema": {"required": "a"}}, "inputSchema"),
    ({"inputSchema": {"properties": {"a": {"type": "nope"}}}}, "inputSchema.properties.a"),
    ({"inputSchema": {"properties": []}}, "inputSchema"),
    ({"outputSchema": {"items": 1}}, "outputSchema"),
    ({"outputSchema": {"enum": {}}}, "outputSchema"),
])
def test_bad_fields_are_named(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    doc = {**phenotype("fmt"), **change}
    with pytest.raises(InvalidPhenotype) as info:
        load_phenotype(write(tmp_path, json.dumps(doc)))
    assert field in str(info.value)
    assert "genes/fmt/phenotype.json" in str(info.value)


@pytest.mark.parametrize("missing", ["name", "domain", "version", "fidelity", "inputSchema",
                                     "outputSchema"])
def test_missing_fields_are_named(tmp_path: Path, missing: str) -> None:
    doc = phenotype("fmt")
    del doc[missing]
    with pytest.raises(InvalidPhenotype, match=f"missing field.*{missing}"):
        load_phenotype(write(tmp_path, json.dumps(doc)))


SCHEMA = {
    "type": "object",
    "required": ["code"],
    "properties": {
        "code": {"type": "string"},
        "indent": {"type": "integer"},
        "mode": {"enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize(("value", "problem"), [
    ({"code": "x"}, None),
    ({"code": "x", "indent": 2.0, "mode": "a", "tags": []}, None),
    ([], "input must be object, got array"),
    ({}, "missing required field 'code'"),
    ({"code": 1}, "input.code must be string, got integer"),
    ({"code": "x", "indent": True}, "input.indent must be integer, got boolean"),
    ({"code": "x", "indent": 1.5}, "input.indent must be integer"),
    ({"code": "x", "mode": "c"}, "input.mode must be one of"),
    ({"code": "x", "tags": ["a", 2]}, "input.tags[1] must be string"),
    ({"code": "x", "other": 1}, "unknown field(s): other"),
])
def test_input_schema_subset(value: Any, problem: str | None) -> None:
    found = check_schema(value, SCHEMA)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_validate_input_raises_invalid_input() -> None:
    p = Phenotype.from_json({**phenotype("fmt"), "inputSchema": SCHEMA})
    validate_input(p, {"code": "x"})
    with pytest.raises(InvalidInput, match="INVALID_INPUT: gene 'fmt': input is missing"):
        validate_input(p, {})


def test_unknown_schema_keywords_are_ignored() -> None:
    assert check_schema("anything", {"minLength": 100, "format": "email"}) is None
