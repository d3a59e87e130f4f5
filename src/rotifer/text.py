"""Text for people: :func:`shown` (text a gene or a file controls, escaped) and
:func:`human_size`.

A leaf below every layer, so the CLI and the console escape keys, log lines and
messages and spell sizes the same way (the console imports it without
importing the CLI).
"""

from __future__ import annotations

__all__ = ["escape_char", "human_size", "shown"]

#: How the characters with a short escape are shown; the others as \xHH, \uHHHH, \UHHHHHHHH.
_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_char(char: str) -> str:
    """One character as :func:`shown` writes it: a short escape or ``\\xHH``..."""
    short = _SHORT.get(char)
    if short is not None:
        return short
    cp = ord(char)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def shown(text: str) -> str:
    """``text`` as the CLI prints it in human output: every character that is
    not printable -- C0 and C1 controls, DEL, format characters such as the
    bidi overrides and zero-width characters, line and paragraph separators,
    spaces other than the ASCII space, surrogates, private-use and unassigned
    code points (all that :meth:`str.isprintable` refuses) -- and the backslash
    itself are written as Python escapes (``\\n``, ``\\x1b``, ``\\u202e``, ``\\\\``).

    Why: keys, log lines and error messages come from genes, and a gene that
    could print raw escape sequences could redraw or hide what a deployer is
    reading (a poisoned key passing for another one).  The escaping is
    reversible (``"\\\\"`` stands only for a backslash), so two different keys
    never look the same; ``--json`` output stays exact (see :func:`print_json`).
    It applies to every human-readable output, on a terminal or not: a listing
    piped to a file is read on a terminal later.
    """
    if text.isprintable() and "\\" not in text:
        return text  # the usual case, without a loop in Python
    return "".join(c if c.isprintable() and c != "\\" else escape_char(c) for c in text)


def human_size(n: int) -> str:
    """Bytes as the quota option spells them (1 KB = 1024 B)."""
    if n < 1024:
        return f"{n} B"
    for unit, factor in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if n >= factor:
            value = n / factor
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    raise AssertionError  # pragma: no cover
