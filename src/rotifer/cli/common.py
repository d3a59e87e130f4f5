"""What the commands share: the project, ``--input`` JSON, tables, hints, sizes,
and :func:`shown`, the one way text the CLI did not write reaches a user."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rotifer.text import escape_char
from rotifer.text import human_size as human_size  # re-exported for the commands
from rotifer.text import shown as shown

if TYPE_CHECKING:
    from rotifer.agents.project import Project
    from rotifer.memory import MemoryStore


INPUT_HELP = "the input as JSON (- reads stdin, @FILE reads a file)"


def project_of(ctx: click.Context) -> Project:
    """The project a command acts on: ``--project`` of the main group, else
    ``$ROTIFER_PROJECT``, else the nearest ``.rotifer/`` upward."""
    from rotifer.agents.project import Project

    obj = ctx.find_object(dict)
    explicit = obj.get("project") if obj is not None else None
    return Project.find(Path(explicit) if explicit is not None else None)


def shell_word(text: str) -> str:
    """``text`` as one word a POSIX shell reads back (quoted only when needed)."""
    import shlex

    return shlex.quote(text)


def gene_name(project: Project, text: str) -> str:
    """A GENE argument as the gene's name: ``greeter``, or a path to a folder
    directly in the project's ``genes/`` (``genes/greeter``, ``./genes/greeter/``,
    as a shell completes it), which names the same gene.  A path anywhere
    else is INVALID_GENE saying where genes live; a plain name is left for
    the loader to check."""
    if "/" not in text and text not in (".", ".."):
        return text
    from rotifer.genes.errors import InvalidGene

    path = Path(text).expanduser()
    folder = (path if path.is_absolute() else Path.cwd() / path).resolve()
    if folder.parent == project.genes_dir and folder.name:
        return folder.name
    raise InvalidGene(f"'{text}' is not a folder in this project's genes/ "
                       f"({project.genes_dir}): genes are named by their folder there "
                       "(copy the gene to genes/NAME, then `rotifer wrap NAME`)")


def parse_input(text: str) -> Any:
    """The ``--input`` argument as a JSON value; INVALID_INPUT when it is not JSON.

    ``-`` reads the JSON from stdin, ``@FILE`` from a file.  Text that is not
    UTF-8 (bytes a shell passed as they were), numbers that overflow to
    Infinity and strings holding lone surrogates (``"\\ud800"``) are refused
    here, before any gene runs (see :mod:`rotifer.genes.jsonvalue`); the
    message shows such text escaped, never raw.
    """
    from rotifer.genes import jsonvalue
    from rotifer.genes.errors import InvalidInput

    source = "--input"
    if text == "-":
        source = "stdin"
        stdin = getattr(sys.stdin, "buffer", None)
        data = stdin.read() if stdin is not None else sys.stdin.read().encode(
            "utf-8", "surrogateescape")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"stdin is not UTF-8 text (byte {exc.start} is not)") from None
    elif text.startswith("@"):
        path = Path(text[1:])
        source = jsonvalue.escaped(str(path), limit=200)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise InvalidInput(f"cannot read the input file {source}: {reason}") from None
    else:
        try:  # argv bytes that were not UTF-8 arrive as surrogates (surrogateescape)
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"--input is not UTF-8 text (character {exc.start} is not)"
                               ) from None
    try:
        value = jsonvalue.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(f"{source} is not valid JSON: {exc}") from None
    problem = jsonvalue.problem_of(value)
    if problem is not None:
        raise InvalidInput(f"{source}: {problem}")
    return value


# -- showing text a gene (or a file) controls ---------------------------------------

def said(text: str) -> str:
    """A message as the CLI prints it (an error line, a hint, a check's verdict):
    like :func:`shown`, every character that is not printable is written as an
    escape, but a backslash is left as it is.  A message already quotes what it
    names escaped (``'esc\\x1b[31m'`` from ``repr``, ``\\ud800`` from
    :func:`rotifer.genes.jsonvalue.escaped`, JSON text): doubling its
    backslashes would escape it twice.  Nothing raw reaches the terminal either
    way; a message is read, not pasted back, so it need not be reversible."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else escape_char(c) for c in text)


#: The escapes :func:`shown` writes, which :func:`unshown` reads back.
_UNSHORT = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


def unshown(text: str, option: str = "--key") -> str:
    """The text :func:`shown` printed, read back: what ``--key`` takes, so that a
    key copied from ``agent memory list`` (or ``agent audit show``) names the
    entry.  ``\\\\`` is a backslash, ``\\n``, ``\\r``, ``\\t``,
    ``\\xHH``, ``\\uHHHH`` and ``\\UHHHHHHHH`` the characters they spell;
    any other backslash is a usage error (a key with a backslash in it is
    always given with the backslash doubled, as the listing shows it)."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        kind = text[i + 1:i + 2]
        digits = _HEX_DIGITS.get(kind, 0)
        code = text[i + 2:i + 2 + digits]
        if kind in _UNSHORT:
            out.append(_UNSHORT[kind])
        elif digits and len(code) == digits and all(c in "0123456789abcdefABCDEF" for c in code) \
                and int(code, 16) <= 0x10FFFF:
            out.append(chr(int(code, 16)))
        else:
            bad = said(text[i:i + 2 + digits])
            raise click.BadParameter(
                f"'{bad}' is not an escape this option reads: it takes the key as `agent "
                "memory list` shows it, where \\\\ is a backslash and \\n, \\t, \\xHH, "
                "\\uHHHH and \\UHHHHHHHH spell other characters", param_hint=option)
        i += 2 + digits
    return "".join(out)


def _json_escape(char: str) -> str:
    cp = ord(char)
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    cp -= 0x10000
    return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"


def json_text(value: Any) -> str:
    """``value`` as one line of JSON in which every character that is not
    printable (see :func:`shown`) is a ``\\u`` escape.  The JSON value is
    exactly the same -- a parser reads back the same strings -- but the text
    cannot drive a terminal (``json.dumps`` already escapes C0 controls, not
    C1 controls, bidi overrides or lone surrogates)."""
    text = json.dumps(value, ensure_ascii=False)
    if text.isprintable():
        return text
    # Outside strings JSON text is plain ASCII, so each such character is
    # inside a string literal, where a \u escape means the same character.
    return "".join(c if c.isprintable() else _json_escape(c) for c in text)


#: A line of a caret diagram (wasmtime's ``   |``, `` 2 |``, ``   | ^``): no words.
_DECORATION = re.compile(r"^[\s\d|^~-]*$")
_BLANK = " \t\r"
_BLANKS = re.compile(r"[ \t]+")


def one_line(message: str) -> str:
    """A message as the single line ``CODE: message`` must be: the lines of a
    multi-line message (a parser's error with its caret diagram) are joined,
    their runs of blanks squeezed, and the lines that only draw the diagram dropped.
    Only ``\\n`` (and ``\\r\\n``) separate lines: any other control character
    is left for :func:`rotifer.cli.common.shown` to spell out."""
    lines = message.split("\n")
    parts = [lines[0].strip(_BLANK)] + [_BLANKS.sub(" ", line.strip(_BLANK)) for line in lines[1:]
                                        if not _DECORATION.match(line)]
    return " ".join(p for p in parts if p)


def error_line(error: BaseException) -> str:
    """How an error reaches the user: ``CODE: message`` on one line, shown escaped
    (the message may quote a gene: its rejection, its exception, its output)."""
    return said(one_line(str(error)))


def print_json(value: Any) -> None:
    """A gene's output (or a ``--json`` listing): one line of JSON on stdout."""
    click.echo(json_text(value))


TRUST_HELP = ("run a Python or Node gene uncontained (it can then reach all this process "
              "can: the store's files, the network, the environment); noted on stderr")


def hint(text: str) -> None:
    click.echo(f"hint: {said(text)}", err=True)


def standby_note(store: MemoryStore) -> None:
    """Say on stderr when a read-only command reads a hot standby (the deployer
    asked for one in the URL): what it shows may be behind the primary."""
    delay = store.replay_delay()
    if delay is not None:
        click.echo(f"note: reading a hot standby of the memory database, {delay:.1f} s behind "
                   "its primary (0: it has replayed all it received); changes need the "
                   "primary", err=True)


def log_sink(gene: str, line: str) -> None:
    """Where ``ctx.log`` lines of a gene go: stderr, prefixed by the gene's
    name, shown escaped (one log call is one line; it cannot forge another)."""
    click.echo(f"[{shown(gene)}] {shown(line)}", err=True)


#: How wide a key may be in a table (shown escaped) before it is cut, and the
#: mark that ends a cut one: a 1,024-byte key would widen every row.
KEY_WIDTH = 60
CUT = "…"
CUT_NOTE = (f"({CUT} ends a key cut at {KEY_WIDTH} characters; --json shows every key whole)")


def cut(text: str, width: int = KEY_WIDTH) -> str:
    """``text`` (already shown) at most ``width`` characters, the last one :data:`CUT`."""
    return text if len(text) <= width else text[:width - 1] + CUT


def any_cut(texts: Iterable[str], width: int = KEY_WIDTH) -> bool:
    return any(len(shown(text)) > width for text in texts)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]],
          cut_at: Mapping[int, int] | None = None) -> list[str]:
    """Left-aligned columns separated by two spaces (plain text a script can split);
    every cell goes through :func:`shown`, and the cells of column ``i`` are
    :func:`cut` at ``cut_at[i]`` characters."""
    limits = cut_at or {}
    rows = [[cut(shown(cell), limits[i]) if i in limits else shown(cell)
             for i, cell in enumerate(row)] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    return f"{count} {singular if count == 1 else plural_form or singular + 's'}"
