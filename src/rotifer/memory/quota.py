"""Memory quota sizes as the CLI takes them (``--memory-quota=50MB``)."""

from __future__ import annotations

import re

from .errors import invalid

#: An agent's memory quota when none is given (``agent create --memory-quota``).
DEFAULT_QUOTA_BYTES = 10 * 1024 * 1024
UNITS = {"KB": 1024, "MB": 1024**2, "GB": 1024**3}
MAX_QUOTA_BYTES = 1024 * 1024**3  # 1024 GB
_SIZE = re.compile(r"\s*([+-]?[0-9]*\.?[0-9]+)\s*([A-Za-z]+)\s*")


def parse_size(text: str) -> int:
    """``"512KB"``, ``"1.5gb"``, ... to bytes (1 KB = 1024 bytes).

    A size without a unit, zero, a negative size, an unknown unit or one over
    1024 GB is refused with MEMORY_INVALID_INPUT.  Fractions of a byte round
    down.
    """
    match = _SIZE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise invalid(f"memory quota {text!r} must be a number followed by KB, MB or GB")
    from decimal import Decimal, InvalidOperation  # speed: only where a size is parsed

    number, unit = match.groups()
    factor = UNITS.get(unit.upper())
    if factor is None:
        raise invalid(f"memory quota {text!r} has an unknown unit; use KB, MB or GB")
    try:
        amount = Decimal(number)
    except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
        raise invalid(f"memory quota {text!r} is not a number") from None
    if amount <= 0:
        raise invalid(f"memory quota {text!r} must be greater than zero")
    size = int(amount * factor)
    if size > MAX_QUOTA_BYTES:
        raise invalid(f"memory quota {text!r} is too large; at most 1024GB")
    if size == 0:
        raise invalid(f"memory quota {text!r} is less than one byte")
    return size
