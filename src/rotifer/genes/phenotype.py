"""``phenotype.json``: what a gene says about itself.

The phenotype is the gene's public description::

    {"name": "formatter", "domain": "formatter", "version": "1.0.0",
     "fidelity": "Wrapped", "inputSchema": {...}, "outputSchema": {...}}

It is validated strictly because two things hang on it: the ``domain`` decides
which memory entries a gene may reach (``SAME_DOMAIN`` scopes), and the whole
document is part of the gene's v2 id. A vague error here would surface later as
a puzzling ``MEMORY_ACCESS_DENIED``, so every problem names the file and field.

Fields other than the six above are allowed and kept; they are part of the id.

Schemas are stored as given. Inputs are checked against ``inputSchema`` with a
small, documented subset of JSON Schema (see :func:`check_schema`); keywords
outside that subset are ignored rather than rejected, so a richer schema written
for another tool still loads.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rotifer.genes.errors import InvalidInput, InvalidPhenotype

FIDELITIES = ("Native", "Wrapped", "Hybrid")
REQUIRED_FIELDS = ("name", "domain", "version", "fidelity", "inputSchema", "outputSchema")
_JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


@dataclass(frozen=True)
class Phenotype:
    """A validated phenotype; ``raw`` is the parsed document exactly as written."""

    name: str
    domain: str
    version: str
    fidelity: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, doc: Any, *, source: str = "phenotype.json") -> Phenotype:
        """Validate a parsed phenotype document; raise INVALID_PHENOTYPE naming the field."""
        if not isinstance(doc, dict):
            raise InvalidPhenotype(f"{source}: must be a JSON object, got {_json_type(doc)}")
        missing = [f for f in REQUIRED_FIELDS if f not in doc]
        if missing:
            raise InvalidPhenotype(f"{source}: missing field(s): {', '.join(missing)}")
        for name in ("name", "domain", "version"):
            value = doc[name]
            if not isinstance(value, str) or not value.strip():
                raise InvalidPhenotype(f"{source}: field '{name}' must be a non-empty string")
            if "\x00" in value:
                raise InvalidPhenotype(f"{source}: field '{name}' must not contain NUL")
        if doc["fidelity"] not in FIDELITIES:
            raise InvalidPhenotype(
                f"{source}: field 'fidelity' must be one of {', '.join(FIDELITIES)}, "
                f"got {json.dumps(doc['fidelity'])}"
            )
        for name in ("inputSchema", "outputSchema"):
            schema = doc[name]
            if not isinstance(schema, dict):
                raise InvalidPhenotype(f"{source}: field '{name}' must be a JSON object (a schema)")
            problem = _schema_problem(schema, name)
            if problem:
                raise InvalidPhenotype(f"{source}: {problem}")
        return cls(
            name=doc["name"],
            domain=doc["domain"],
            version=doc["version"],
            fidelity=doc["fidelity"],
            input_schema=doc["inputSchema"],
            output_schema=doc["outputSchema"],
            raw=doc,
        )


def load_phenotype(path: Path) -> Phenotype:
    """Read and validate ``path``; every failure is INVALID_PHENOTYPE with the reason."""
    source = _display(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InvalidPhenotype(f"{source}: file not found") from None
    except OSError as exc:
        raise InvalidPhenotype(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidPhenotype(f"{source}: not UTF-8") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise InvalidPhenotype(f"{source}: not valid JSON: {exc}") from None
    return Phenotype.from_json(doc, source=source)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _display(path: Path) -> str:
    parts = path.parts
    return str(Path(*parts[-3:])) if len(parts) > 3 else str(path)


def _schema_problem(schema: dict[str, Any], where: str) -> str | None:
    """Check the keywords of the subset we act on are well formed, so a typo fails at load."""
    t = schema.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not types or any(x not in _JSON_TYPES for x in types):
            return f"{where}: 'type' must be one of {', '.join(_JSON_TYPES)} (or a list of them)"
    req = schema.get("required")
    if req is not None and (not isinstance(req, list) or not all(isinstance(x, str) for x in req)):
        return f"{where}: 'required' must be a list of strings"
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            return f"{where}: 'properties' must be an object"
        for key, sub in props.items():
            if not isinstance(sub, dict):
                return f"{where}.properties.{key}: must be an object (a schema)"
            problem = _schema_problem(sub, f"{where}.properties.{key}")
            if problem:
                return problem
    items = schema.get("items")
    if items is not None:
        if not isinstance(items, dict):
            return f"{where}: 'items' must be an object (a schema)"
        problem = _schema_problem(items, f"{where}.items")
        if problem:
            return problem
    enum = schema.get("enum")
    if enum is not None and not isinstance(enum, list):
        return f"{where}: 'enum' must be a list"
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _matches_type(value: Any, t: str) -> bool:
    actual = _json_type(value)
    if t == "number":
        return actual in ("integer", "number")
    if t == "integer":
        return actual == "integer" or (
            actual == "number" and math.isfinite(value) and float(value).is_integer()
        )
    return actual == t


def check_schema(value: Any, schema: dict[str, Any], path: str = "input") -> str | None:
    """Return why ``value`` does not fit ``schema``, or None if it fits.

    The subset: ``type`` (a name or a list), ``enum``, ``required``,
    ``properties`` (recursively), ``additionalProperties: false`` and ``items``.
    Anything else in the schema is ignored.
    """
    t = schema.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not any(_matches_type(value, x) for x in types):
            return f"{path} must be {' or '.join(types)}, got {_json_type(value)}"
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        return f"{path} must be one of {json.dumps(enum)}"
    if isinstance(value, dict):
        req = schema.get("required")
        if isinstance(req, list):
            for key in req:
                if key not in value:
                    return f"{path} is missing required field '{key}'"
        props = schema.get("properties")
        if isinstance(props, dict):
            for key, sub in props.items():
                if key in value and isinstance(sub, dict):
                    problem = check_schema(value[key], sub, f"{path}.{key}")
                    if problem:
                        return problem
            if schema.get("additionalProperties") is False:
                extra = sorted(k for k in value if k not in props)
                if extra:
                    return f"{path} has unknown field(s): {', '.join(extra)}"
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                problem = check_schema(item, items, f"{path}[{i}]")
                if problem:
                    return problem
    return None


def validate_input(phenotype: Phenotype, value: Any) -> None:
    """Raise INVALID_INPUT when ``value`` does not fit the gene's ``inputSchema``."""
    problem = check_schema(value, phenotype.input_schema)
    if problem:
        raise InvalidInput(f"gene '{phenotype.name}': {problem}")
