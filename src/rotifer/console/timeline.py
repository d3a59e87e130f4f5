"""The timeline's rows (the history page, an entry's page), made in Python.

Jinja spends most of a 500-line page looking up each line's fields by name
and calling filters on them; :func:`timeline_rows` gives the template each
field once, already as the text it shows (a gene's strings through
:func:`~rotifer.text.shown`; the template still escapes all of it as HTML).
The page is the same, byte for byte, as when the template read the lines
itself (a missing field shows as it did then: nothing, or ``#`` for ``seq``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from rotifer.text import shown


class TimelineRow(NamedTuple):
    """One audit line as the timeline shows it."""

    css: str
    ts: object
    seq: str
    action: str
    #: ``None``: the line has no key (its cell is left out).
    key: str | None
    category: str
    category_class: str
    nbytes: object
    by: str
    #: The line's ``context`` (``thread_id``, ``run_id``) when it is an object.
    context: Mapping[str, Any] | None
    #: ``CODE: reason`` of a refusal, ``""`` for none.
    code: str


def timeline_rows(lines: list[dict[str, Any]], names: Mapping[str, str],
                  highlight: Mapping[str, str]) -> list[TimelineRow]:
    out = []
    for ln in lines:
        seq, key, category, actor = (ln.get("seq", ""), ln.get("key", ""), ln.get("category"),
                                     ln.get("actor"))
        code, context = ln.get("code"), ln.get("context")
        out.append(TimelineRow(
            highlight.get(ln.get("action"), ""),  # type: ignore[arg-type]
            ln.get("ts", ""),
            "" if seq is None else f"#{seq}",
            shown(str(ln.get("action", ""))),
            None if key is None else shown(str(key)),
            shown(str(category)) if category else "",
            str(category).lower() if category else "",
            ln.get("bytes", ""),
            shown(str(names.get(actor, actor or ""))),  # type: ignore[arg-type]
            context if isinstance(context, Mapping) else None,
            f"{shown(str(code))}: {shown(str(ln.get('reason') or ''))}" if code else ""))
    return out
