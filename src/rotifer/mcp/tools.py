"""The tools: their descriptions and JSON schemas (what an LLM reads to use
them), and each call carried out on the memory as one JSON result.

Every refusal is the memory's own ``CODE: message``, returned as a tool error
(``isError``) by the server, never raised past it.  Arguments are checked here
(MEMORY_INVALID_INPUT naming the field), not by the SDK, so a wrong argument
gets the memory's code like every other refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from rotifer.memory.errors import AgentMemoryError, ErrorCode, invalid
from rotifer.memory.model import (
    DEFAULT_QUERY_LIMIT,
    MAX_KEY_BYTES,
    MAX_QUERY_LIMIT,
    MAX_VALUE_BYTES,
)

from .acting import Acting, WritePolicy, decode_value, entry_json

CATEGORIES_TEXT = (
    "Categories: PREFERENCE (settings a user chose; never removed to make room), "
    "PATTERN (learned patterns), CONTEXT (background for later tasks), CACHE (anything "
    "that can be recomputed). When the agent's quota is full a write evicts CACHE first, "
    "then PATTERN, then CONTEXT, each least recently updated first.")
LIMITS_TEXT = (
    f"Keys are 1 to {MAX_KEY_BYTES} bytes of UTF-8; a value at most {MAX_VALUE_BYTES} bytes "
    "(1 MiB); a search returns at most 1000 entries and 4 MiB.")
ERRORS_TEXT = (
    "Errors come back as a tool error whose text is 'CODE: message': MEMORY_ACCESS_DENIED "
    "(the access scopes, the data policy or this server's write policy refuse it), "
    "MEMORY_QUOTA_EXCEEDED (full even after cleanup), MEMORY_INVALID_INPUT (a bad argument), "
    "MEMORY_NOT_FOUND (no such entry), MEMORY_STORAGE_ERROR (the store failed).")
VALUE_TEXT = ("Values are returned as text when they are UTF-8 ('encoding': 'text') and as "
              "base64 otherwise ('encoding': 'base64').")

_KEY = {"type": "string", "minLength": 1, "description": "the entry's key, e.g. 'notes/today'"}
_CATEGORY = {"type": "string", "enum": ["PREFERENCE", "PATTERN", "CONTEXT", "CACHE"]}
_SCOPE = {"type": "string", "enum": ["CREATOR_GENE_ONLY", "SAME_DOMAIN", "ALL_GENES",
                                     "DEPLOYER_CONFIGURED"]}
_ACCESS = {
    "type": "object",
    "description": "who may read and change the entry (default: SAME_DOMAIN, SAME_DOMAIN, "
                   "PRIVATE); only the entry's creator may change it later",
    "properties": {"readScope": _SCOPE, "writeScope": _SCOPE,
                   "sharePolicy": {"type": "string",
                                     "enum": ["PRIVATE", "ANONYMIZED_SHARE", "KNOWLEDGE_GENE"]}},
    "required": ["readScope", "writeScope", "sharingPolicy"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    schema: dict[str, Any]
    read_only: bool
    destructive: bool
    #: The schema's argument names and required ones, as sets: checked per call.
    fields: frozenset[str] = field(init=False, repr=False, compare=False)
    required: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", frozenset(self.schema["properties"]))
        object.__setattr__(self, "required", frozenset(self.schema["required"]))


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def tool_specs(acting: Acting, policy: WritePolicy | None) -> list[ToolSpec]:
    """The tools this server offers (the deployer's has no write)."""
    who = ("Acts as the agent's owner (deployer): reads, lists and deletes any entry, "
           "writes none.") if not acting.writes else (
           "Acts as one gene of the agent: the entries' access scopes decide what it may "
           "read and change.")
    head = f"Agent '{acting.agent}' memory (rotifer). {who}"
    specs = []
    if acting.writes and policy is not None:
        allowed = ", ".join(c.value for c in policy.categories())
        expiry = (f" Every write expires {policy.retention_days} days after its last update."
                  if policy.retention_days is not None else "")
        specs.append(ToolSpec(
            "memory_write", "Write a memory entry",
            f"{head} Create or replace the entry under a key. This server writes the "
            f"categories {allowed} (others are MEMORY_ACCESS_DENIED: what an LLM writes is "
            f"untrusted input).{expiry} {CATEGORIES_TEXT} {LIMITS_TEXT} {ERRORS_TEXT}",
            _object({"key": _KEY,
                     "value": {"type": "string", "description": "the value: text, or base64 "
                               "with encoding 'base64'"},
                     "encoding": {"type": "string", "enum": ["text", "base64"],
                                  "default": "text"},
                     "category": {**_CATEGORY, "default": "CACHE"},
                     "accessPolicy": _ACCESS}, ["key", "value"]),
            read_only=False, destructive=True))
    specs += [
        ToolSpec(
            "memory_read", "Read a memory entry",
            f"{head} The entry under a key, or entry null if there is none (or it is in "
            f"another category than the one given). {VALUE_TEXT} {ERRORS_TEXT}",
            _object({"key": _KEY, "category": _CATEGORY}, ["key"]),
            read_only=True, destructive=False),
        ToolSpec(
            "memory_search", "Search memory entries",
            f"{head} The entries that match every filter given, most recently updated first, "
            f"with their values. since/until are RFC 3339 times (since inclusive, until "
            f"exclusive) on updatedAt; limit is 1 to {MAX_QUERY_LIMIT} (default "
            f"{DEFAULT_QUERY_LIMIT}). "
            f"{CATEGORIES_TEXT} {VALUE_TEXT} {LIMITS_TEXT} {ERRORS_TEXT}",
            _object({"keyPrefix": {"type": "string",
                                   "description": "keys starting with this (byte for byte)"},
                     "category": _CATEGORY,
                     "since": {"type": "string", "format": "date-time"},
                     "until": {"type": "string", "format": "date-time"},
                     "limit": {"type": "integer", "minimum": 1, "maximum": MAX_QUERY_LIMIT,
                               "default": DEFAULT_QUERY_LIMIT}}, []),
            read_only=True, destructive=False),
        ToolSpec(
            "memory_delete", "Delete a memory entry",
            f"{head} Remove the entry under a key (MEMORY_NOT_FOUND if there is none). "
            f"{ERRORS_TEXT}",
            _object({"key": _KEY}, ["key"]), read_only=False, destructive=True),
        ToolSpec(
            "memory_usage", "Memory usage and what a write would evict",
            f"{head} Bytes used of the agent's quota, by category, and which entries a new "
            f"write of nextWriteBytes (key plus value) would evict to make room (entries "
            f"this caller may not read are only counted). {CATEGORIES_TEXT} {ERRORS_TEXT}",
            _object({"nextWriteBytes": {"type": "integer", "minimum": 0, "default": 0}}, []),
            read_only=True, destructive=False),
    ]
    return specs


def _key(args: dict[str, Any]) -> str:
    key = args.get("key")
    if not isinstance(key, str):
        raise invalid("key must be a string")
    return key


def _optional_text(args: dict[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is not None and not isinstance(value, str):
        raise invalid(f"{name} must be a string")
    return value


def _refuse_fields(args: dict[str, Any], spec: ToolSpec) -> NoReturn:
    unknown = sorted(set(args) - spec.fields)
    if unknown:
        raise invalid(f"{spec.name} takes no argument(s) {', '.join(unknown)}")
    missing = [name for name in spec.schema["required"] if name not in args]
    raise invalid(f"{spec.name} needs the argument(s) {', '.join(missing)}")


def call(acting: Acting, specs: dict[str, ToolSpec], name: str,
         args: dict[str, Any] | None) -> dict[str, Any]:
    """Carry out tool ``name``; its JSON result, or AgentMemoryError.

    Per call only what must be: the tool looked up, the argument names checked
    against the schema's (two set tests; the message is built only for a
    refusal), and the tool's own function (:data:`_RUN`)."""
    spec = specs.get(name)
    if spec is None:
        raise invalid(f"no tool {name!r} here (the tools: {', '.join(specs)})")
    if args is None:
        args = {}
    elif not isinstance(args, dict):
        raise invalid("the arguments must be an object")
    if not (spec.fields.issuperset(args) and spec.required.issubset(args)):
        _refuse_fields(args, spec)
    run = _RUN.get(name)
    if run is None:
        raise AgentMemoryError(ErrorCode.STORAGE_ERROR, f"tool {name!r} has no implementation")
    return run(acting, args)


def _write(acting: Acting, args: dict[str, Any]) -> dict[str, Any]:
    entry = acting.write(_key(args), decode_value(args.get("value"), args.get("encoding")),
                         args.get("category", "CACHE"), args.get("accessPolicy"))
    return {"entry": entry_json(entry, with_value=False)}


def _read(acting: Acting, args: dict[str, Any]) -> dict[str, Any]:
    found = acting.read(_key(args), _optional_text(args, "category"))
    return {"entry": None if found is None else entry_json(found)}


def _search(acting: Acting, args: dict[str, Any]) -> dict[str, Any]:
    entries = acting.search(args)
    return {"entries": [entry_json(e) for e in entries], "count": len(entries)}


def _delete(acting: Acting, args: dict[str, Any]) -> dict[str, Any]:
    key = _key(args)
    acting.delete(key)
    return {"deleted": key}


def _usage(acting: Acting, args: dict[str, Any]) -> dict[str, Any]:
    return acting.usage(args.get("nextWriteBytes", 0))


_RUN: dict[str, Callable[[Acting, dict[str, Any]], dict[str, Any]]] = {
    "memory_write": _write, "memory_read": _read, "memory_search": _search,
    "memory_delete": _delete, "memory_usage": _usage,
}
