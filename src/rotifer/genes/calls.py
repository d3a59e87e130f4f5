"""One memory call of a gene, whichever bridge carried it.

A gene's four calls reach rotifer three ways: as JSON lines from a contained
Python child (:mod:`rotifer.genes.contain.python_host`), as JSON lines from
the Node.js runner (:mod:`rotifer.genes.node.bridge`), and as requests in a
WASM gene's linear memory (:mod:`rotifer.genes.wasm.requests`).  Each bridge
decodes only its own wire format -- into an :class:`Op` and the call's fields
by the seed's names (``key``, ``value``, ``category``, ``accessPolicy``,
``retentionPolicy``, ``filter``) -- and this module does the rest, once: the
op vocabulary, the fields each op takes, carrying the call out, and mapping
whatever goes wrong to the one :class:`~rotifer.memory.AgentMemoryError` the
gene is answered with.

Nothing in a call chooses whose memory it is: a bridge passes the
:class:`~rotifer.memory.GeneMemoryAccess` it opened for the gene it started,
and the fields' values (categories, scopes, policies, filters) go to it
unchanged, so the store's own checks decide, with the same messages as for a
gene run in process.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from rotifer.memory import UNSET, AgentMemoryError, ErrorCode, MemoryEntry

if TYPE_CHECKING:  # speed: GeneMemoryAccess lives with the store (its write path)
    from rotifer.memory import GeneMemoryAccess


class Op(enum.StrEnum):
    """The four memory calls, by the seed's names (the WASM imports' and the
    Node.js runner's spelling of them)."""

    READ = "readMemory"
    WRITE = "writeMemory"
    QUERY = "queryMemory"
    DELETE = "deleteMemory"


#: Each call's fields: (required, optional).  A bridge that checks a request
#: strictly (:func:`exact_fields`) refuses any other; one whose own runner
#: builds the call passes what it got, and a field left out is its default.
FIELDS: Final[Mapping[Op, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    Op.READ: (("key",), ("category",)),
    Op.WRITE: (("key", "value", "category"), ("accessPolicy", "retentionPolicy")),
    Op.QUERY: ((), ("filter",)),
    Op.DELETE: (("key",), ()),
}
#: Every field some call takes.
ALL_FIELDS: Final = frozenset(name for required, optional in FIELDS.values()
                              for name in (*required, *optional))
#: Calls that change memory even when their answer then cannot be delivered.
CHANGES_MEMORY: Final = frozenset({Op.WRITE, Op.DELETE})

#: What a call answers: a read's entry (or None), a write's entry, a query's
#: entries, a delete's None.
Result = MemoryEntry | list[MemoryEntry] | None
Fields = Mapping[str, Any]
Wire = TypeVar("Wire")

#: Arguments of a shape the store never expected (an object where a string
#: goes) can fail inside it with these instead of its own refusal; to the
#: gene they are MEMORY_INVALID_INPUT, never rotifer's failure.
WRONG_SHAPE: Final = (TypeError, ValueError, AttributeError)


def invalid(message: str) -> AgentMemoryError:
    """The refusal of a call's arguments: MEMORY_INVALID_INPUT."""
    return AgentMemoryError(ErrorCode.INVALID_INPUT, message)


def perform(memory: GeneMemoryAccess, op: Op, fields: Fields) -> Result:
    """Carry out ``op`` with its decoded ``fields`` on the gene's ``memory``;
    a field left out is the store's default (None; a write's retention policy
    unset, which is not an explicit null)."""
    # Any: the values are the gene's, of any type; the store checks each one.
    get: Callable[..., Any] = fields.get
    if op is Op.READ:
        return memory.read_memory(get("key"), get("category"))
    if op is Op.WRITE:
        return memory.write_memory(get("key"), get("value"), get("category"),
                                   get("accessPolicy"), get("retentionPolicy", UNSET))
    if op is Op.QUERY:
        return memory.query_memory(get("filter"))
    if op is Op.DELETE:
        memory.delete_memory(get("key"))
        return None
    raise invalid(f"unknown memory call {op!r}")


def serve(memory: GeneMemoryAccess, op: Op, decode: Callable[[Wire], Fields],
          wire: Wire) -> Result:
    """Decode a call's ``wire`` form with its bridge's ``decode`` and carry it
    out; every refusal, of the decoding or of the store, is raised as the
    AgentMemoryError the gene gets (:data:`WRONG_SHAPE`: MEMORY_INVALID_INPUT
    with the exception's text).  Anything else is rotifer's own failure and
    propagates, for the bridge to report as it reports those."""
    try:
        return perform(memory, op, decode(wire))
    except AgentMemoryError:
        raise
    except WRONG_SHAPE as exc:
        raise invalid(str(exc)) from None


def as_json(result: Result) -> Any:
    """A call's answer as the seed's JSON: an entry, a list of entries, or null."""
    if result is None:
        return None
    if isinstance(result, MemoryEntry):
        return result.to_json()
    return [entry.to_json() for entry in result]


def ok_reply(result: Result) -> dict[str, Any]:
    """A JSON-lines bridge's answer to a call carried out (Python and Node.js)."""
    return {"ok": as_json(result)}


def error_reply(error: AgentMemoryError) -> dict[str, Any]:
    """A JSON-lines bridge's answer to a call refused: the error's code and message."""
    return {"error": error.to_json()}


def exact_fields(op: Op, request: object) -> Fields:
    """``request`` if it is an object with all of ``op``'s required fields and
    no others than its optional ones; else MEMORY_INVALID_INPUT naming what
    is wrong."""
    if isinstance(request, dict) and request.keys() == _REQUIRED[op]:
        return request  # the usual request: exactly the required fields
    required, optional = FIELDS[op]
    if not isinstance(request, dict):
        raise invalid(f"a {op} request must be a JSON object")
    unknown = sorted(set(request) - set(required) - set(optional))
    if unknown:
        raise invalid(f"unknown field(s) in the {op} request: {', '.join(unknown)}")
    missing = [name for name in required if name not in request]
    if missing:
        raise invalid(f"the {op} request is missing {', '.join(missing)}")
    return request


#: Each call's required fields as a set: ``request.keys() == ...`` tells the
#: usual request (exactly those fields) in one comparison.
_REQUIRED: Final = {op: frozenset(required) for op, (required, _) in FIELDS.items()}


def probe_denied(op: Op, memory: GeneMemoryAccess) -> AgentMemoryError | None:
    """Whether the memory refuses this gene outright, whatever it asks.

    A gene without a v2 id (or one run by ``rotifer run``) is answered
    MEMORY_ACCESS_DENIED on *every* call, even a malformed one.  Before a
    bridge answers a malformed request with MEMORY_INVALID_INPUT it asks here:
    the same call with an argument the store can never accept.  A memory that
    refuses the gene anyway raises (and audits) MEMORY_ACCESS_DENIED first,
    returned here; any other rejects the argument, and the gene hears about
    its own request (None).
    """
    bad = cast(Any, None)
    calls: dict[Op, Callable[[], object]] = {
        Op.READ: lambda: memory.read_memory(bad),
        Op.WRITE: lambda: memory.write_memory(bad, b"", bad),
        Op.QUERY: lambda: memory.query_memory(cast(Any, 0)),
        Op.DELETE: lambda: memory.delete_memory(bad),
    }
    try:
        calls[op]()
    except AgentMemoryError as exc:
        return exc if exc.code is ErrorCode.ACCESS_DENIED else None
    except Exception:
        return None
    return None
