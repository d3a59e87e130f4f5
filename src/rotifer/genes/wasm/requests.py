"""Memory-call requests and responses: JSON in, JSON out, nothing trusted.

A request is parsed strictly -- UTF-8, JSON with no NaN/Infinity, no
duplicate fields, no lone surrogates, exactly the fields the ABI names -- and
anything else is MEMORY_INVALID_INPUT (-10) before the memory is asked.  The
fields' *values* (categories, scopes, policies, filters) are passed to the
:class:`~rotifer.memory.GeneMemoryAccess` unchanged, in the seed's camelCase
JSON form, so the store's own validation decides, with the same messages as
for Python genes.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any, Final

from rotifer.genes.calls import Fields, Op, exact_fields, invalid, serve
from rotifer.genes.jsonvalue import DuplicateField, unique_fields
from rotifer.memory import AgentMemoryError, GeneMemoryAccess, MemoryEntry


def _no_constants(name: str) -> Any:
    raise invalid(f"the request is not JSON: {name} is not a JSON value")


def _check_unicode(value: Any) -> None:
    """JSON escapes can spell lone surrogates, which no store can encode."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise invalid("the request contains a lone surrogate (\\ud800-\\udfff)") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


#: Built once: ``json.loads`` with options builds a new decoder on every call.
_DECODER: Final = json.JSONDecoder(parse_constant=_no_constants,
                                   object_pairs_hook=unique_fields)
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


#: What ``_DECODER.decode`` scans with: the C scanner, with the decoder's hooks
#: (an attribute every JSONDecoder sets, which the type stubs omit).
_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = _DECODER.scan_once  # type: ignore[attr-defined]


def _parse(text: str) -> Any:
    """``_DECODER.decode(text)``, with the same results and errors.

    A request is usually one JSON value filling the text; that is scanned
    directly, without ``decode``'s two Python frames and two regex matches
    (about half its time).  Anything else -- leading or trailing
    whitespace, no value -- goes through ``decode``, which gives the errors.
    """
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        end = -1
    if end == len(text):
        return value
    return _DECODER.decode(text)


def decode(raw: bytes) -> Any:
    """Parse a request's bytes, or raise MEMORY_INVALID_INPUT."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid(f"the request is not UTF-8 (byte {exc.start})") from None
    try:
        value = _parse(text)
    except AgentMemoryError:
        raise
    except RecursionError:
        raise invalid("the request is nested too deeply") from None
    except DuplicateField as exc:
        raise invalid(f"the request has the field {exc.field!r} twice") from None
    except ValueError as exc:
        raise invalid(f"the request is not JSON: {exc}") from None
    # Valid UTF-8 holds no surrogates, so only a \u escape can spell a lone one.
    if "\\u" in text:
        _check_unicode(value)
    return value


def encode(value: Any) -> bytes:
    """Compact UTF-8 JSON, the form every response and error body takes."""
    return _ENCODER.encode(value).encode()


_string: Final[Callable[[str], str]] = json.encoder.encode_basestring


def entry_json(entry: MemoryEntry) -> str:
    """``encode(entry.to_json())`` as text, built directly.

    Every read, write and query response is entries, and the generic encoder
    walks the nested dicts ``to_json`` builds at several microseconds each;
    this writes the same fields in the same order with the same escaping
    (the tests compare the two byte for byte).  The enums are StrEnums, which
    format as their values.
    """
    policy = entry.access_policy
    retention = entry.retention_policy
    if retention is None:
        kept = "null"
    else:
        days = retention.max_retention_days
        kept = (f'{{"maxRetentionDays":{"null" if days is None else int(days)},'
                f'"autoDeleteOnTermination":{"true" if retention.auto_delete_on_termination else "false"},'
                f'"anonymizationSupported":{"true" if retention.anonymization_supported else "false"}}}')
    return (f'{{"entryId":{_string(entry.entry_id)},"category":"{entry.category}",'
            f'"key":{_string(entry.key)},'
            f'"value":"{base64.b64encode(entry.value).decode("ascii")}",'
            f'"createdBy":{_string(entry.created_by)},'
            f'"lastAccessedBy":{_string(entry.last_accessed_by)},'
            f'"createdAt":{_string(entry.created_at)},"updatedAt":{_string(entry.updated_at)},'
            f'"accessPolicy":{{"readScope":"{policy.read_scope}",'
            f'"writeScope":"{policy.write_scope}",'
            f'"sharePolicy":"{policy.share_policy}"}},'
            f'"retentionPolicy":{kept}}}')


def error_body(code: str, message: str) -> bytes:
    return encode({"__rotifer_error": {"code": code, "message": message}})


def _key(request: Fields) -> str:
    key = request["key"]
    if not isinstance(key, str):
        raise invalid("key must be a string")
    return key


def _value(request: Fields) -> bytes:
    value = request["value"]
    if not isinstance(value, str):
        raise invalid("value must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise invalid("value is not valid base64 (standard alphabet, with padding)") from None


def _read(request: object) -> Fields:
    fields = exact_fields(Op.READ, request)
    _key(fields)
    return fields


def _write(request: object) -> Fields:
    fields = exact_fields(Op.WRITE, request)
    return {**fields, "key": _key(fields), "value": _value(fields)}


def _query(request: object) -> Fields:
    """A query's request is its filter itself (``{}`` for none)."""
    if request is not None and not isinstance(request, dict):
        raise invalid("a queryMemory request is the filter: a JSON object ({} for none)")
    return {"filter": request or None}


def _delete(request: object) -> Fields:
    fields = exact_fields(Op.DELETE, request)
    _key(fields)
    return fields


#: Each call's request decoded to its fields (calls.FIELDS), strictly: a
#: field missing, unknown or of the wrong JSON type is refused here.
FIELDS_OF: Final[dict[Op, Callable[[object], Fields]]] = {
    Op.READ: _read, Op.WRITE: _write, Op.QUERY: _query, Op.DELETE: _delete,
}


def perform(op: Op, memory: GeneMemoryAccess, request: object) -> bytes:
    """Carry out a parsed request; the response, compact UTF-8 JSON (an entry,
    a list of entries, ``null`` for a read that found nothing, ``{}`` for a delete)."""
    result = serve(memory, op, FIELDS_OF[op], request)
    if result is None:
        return b"{}" if op is Op.DELETE else b"null"
    if isinstance(result, MemoryEntry):
        return entry_json(result).encode()
    return ("[" + ",".join(map(entry_json, result)) + "]").encode()
