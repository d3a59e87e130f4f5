"""The error codes of the Memory API and the one exception that carries them.

Every refusal the store makes is an :class:`AgentMemoryError` whose ``code`` is
one of the seed's codes, so genes (Python, WASM, Node) and the CLI can all report
the same thing the same way: ``CODE: message``.

Its public name is ``rotifer.memory.MemoryError`` (the contract's, and what gene
authors import); :data:`MemoryError` below is that name, the same class.  Inside
rotifer the class goes by ``AgentMemoryError``, so no module reads as if it
handled Python's own out-of-memory ``MemoryError`` (ruff's A004 keeps it so).
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """The seed's error codes."""

    NOT_FOUND = "MEMORY_NOT_FOUND"
    ACCESS_DENIED = "MEMORY_ACCESS_DENIED"
    QUOTA_EXCEEDED = "MEMORY_QUOTA_EXCEEDED"
    INVALID_INPUT = "MEMORY_INVALID_INPUT"
    STORAGE_ERROR = "MEMORY_STORAGE_ERROR"


class AgentMemoryError(Exception):
    """A refused or failed memory call (public name: ``rotifer.memory.MemoryError``).

    ``code`` is one of the seed's codes (an :class:`ErrorCode`, which is also a
    plain ``str``).
    """

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        self.code = ErrorCode(code)
        self.message = message
        super().__init__(f"{self.code.value}: {message}")

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"

    def to_json(self) -> dict[str, str]:
        """The ``{"code", "message"}`` body used by the WASM and Node bridges."""
        return {"code": self.code.value, "message": self.message}


#: The public name the contract promises (``rotifer.memory.MemoryError``): the same
#: class as :class:`AgentMemoryError`.  It shadows the builtin wherever it is
#: imported bare, which is why rotifer's own modules use the name above.
MemoryError = AgentMemoryError


def invalid(message: str) -> AgentMemoryError:
    return AgentMemoryError(ErrorCode.INVALID_INPUT, message)


def denied(message: str) -> AgentMemoryError:
    return AgentMemoryError(ErrorCode.ACCESS_DENIED, message)


def storage(message: str) -> AgentMemoryError:
    return AgentMemoryError(ErrorCode.STORAGE_ERROR, message)


def damaged(what: str, problem: object) -> AgentMemoryError:
    """A stored row that cannot be decoded: the database is damaged (or was edited)."""
    return storage(f"the memory database holds {what} that cannot be read, so it is "
                   f"damaged: {problem}")
