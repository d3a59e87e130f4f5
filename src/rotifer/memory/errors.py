"""The error codes of the Memory API and the one exception that carries them.

Every refusal the store makes is a :class:`MemoryError` whose ``code`` is one of
the seed's codes, so genes (Python, WASM, Node) and the CLI can all report the
same thing the same way: ``CODE: message``.
"""

from __future__ import annotations

import builtins
from enum import StrEnum


class ErrorCode(StrEnum):
    """The seed's error codes."""

    NOT_FOUND = "MEMORY_NOT_FOUND"
    ACCESS_DENIED = "MEMORY_ACCESS_DENIED"
    QUOTA_EXCEEDED = "MEMORY_QUOTA_EXCEEDED"
    INVALID_INPUT = "MEMORY_INVALID_INPUT"
    STORAGE_ERROR = "MEMORY_STORAGE_ERROR"


class MemoryError(builtins.Exception):
    """A refused or failed memory call.

    ``code`` is one of the seed's codes (an :class:`ErrorCode`, which is also a
    plain ``str``).  It deliberately shadows the builtin ``MemoryError`` only
    inside ``rotifer.memory``; import it by its full name elsewhere.
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


def invalid(message: str) -> MemoryError:
    return MemoryError(ErrorCode.INVALID_INPUT, message)


def denied(message: str) -> MemoryError:
    return MemoryError(ErrorCode.ACCESS_DENIED, message)


def storage(message: str) -> MemoryError:
    return MemoryError(ErrorCode.STORAGE_ERROR, message)


def damaged(what: str, problem: object) -> MemoryError:
    """A stored row that cannot be decoded: the database is damaged (or was edited)."""
    return storage(f"the memory database holds {what} that cannot be read, so it is "
                   f"damaged: {problem}")
