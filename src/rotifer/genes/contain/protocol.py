"""What a child may say on its message pipe: the shapes the parent accepts.

The bridge is an allowlist: a call with its bridge's fields and one
of its ops, a log line of text, one result, and an error of the bridge's own
kinds.  Anything else -- not JSON, nested too deeply, a field or a message type
out of place -- is a protocol violation of that gene (``GENE_FAILED``), never
rotifer's own error and never an instruction to rotifer (an "interrupted"
message, a transpiled text).  :mod:`.channel` applies these checks to every
message it reads.
"""

from __future__ import annotations

from typing import Any

from rotifer.genes.jsonvalue import escaped

#: A message from the child nested deeper than this (arrays and objects) is a
#: protocol violation: decoding, serving and printing it must never reach
#: Python's recursion limit (``jsonvalue`` calls an output this deep "nested
#: too deeply" too).
MAX_NESTING = 200


class Shape:
    """The calls a bridge accepts: the fields a call message may have, and its ops."""

    def __init__(self, fields: frozenset[str], ops: frozenset[str]) -> None:
        self.fields = fields
        self.ops = ops


LOG = {"type", "line"}
RESULT = {"type", "output"}
ERROR = frozenset({"type", "kind", "message", "code"})


def well_formed_error(message: dict[str, Any], kinds: frozenset[str]) -> bool:
    return (message.get("kind") in kinds and message.keys() <= ERROR
            and type(message.get("message", "")) is str
            and type(message.get("code", "")) is str)


def described(message: dict[str, Any]) -> str:
    """What an unaccepted message was, for the violation (its type, quoted, cut)."""
    kind = message.get("type")
    if not isinstance(kind, str):
        return "a message with no type"
    if kind == "error":
        shown = message.get("kind")
        return f"an error of kind {escaped(str(shown), 40)!r} or shape it may not send"
    return f"a {escaped(kind, 40)!r} message of a shape or at a time it may not send"


def too_deep(value: Any) -> bool:
    """Whether arrays and objects in ``value`` nest more than :data:`MAX_NESTING`
    deep (walked with a stack of its own, never by recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            return True
        inner = item.values() if type(item) is dict else item
        for child in inner:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
    return False
