"""Text is escaped once on its way to a user: a message that quotes a key
(``'esc\\x1b[31m'``) or input (``\\ud800``) is not escaped a second time; a
key ``agent memory list`` shows escaped is what ``agent memory delete --key``
(and ``agent audit show --key``) take back; and long keys are cut in the
human tables, never in ``--json``.  In process (helpers.run): only the
text of stdout and stderr is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .helpers import add_gene, init_project, last_line, ok, refused, wrap
from .test_escaping_cli import EVIL_GENE  # writes input["keys"] as CACHE entries

#: Keys whose listing differs from the key: controls, a bidi override, a
#: backslash (alone, and before letters an escape would read), a surrogate's look-alike.
KEYS = ["k/esc\x1b[31mred", "k/back\\slash", "k/back\\nslash", "k/tab\there", "k/\u202eevil",
        "k/nul-look\\x00", "k/plain"]


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = init_project(tmp_path / "proj")
    add_gene(root, "writer", EVIL_GENE, domain="k")
    wrap(root, "writer")
    ok(root, "agent", "create", "bot", "--genes", "writer")
    return root


def _keys_column(table: str) -> list[str]:
    """The KEY column of ``agent memory list``, cut at the next column's offset."""
    lines = table.splitlines()
    width = lines[0].index("CATEGORY")
    return [line[:width].rstrip() for line in lines[1:] if not line.startswith("Usage:")
            and not line.startswith("(")]


def test_a_message_quoting_a_key_or_input_is_escaped_once(proj: Path) -> None:
    line = last_line(refused(proj, "MEMORY_NOT_FOUND", "agent", "memory", "delete", "bot",
                             "--key", "esc\x1b[31mred"))
    assert "'esc\\x1b[31mred'" in line, line
    assert "\\\\" not in line, line
    line = last_line(refused(proj, "INVALID_INPUT", "agent", "run", "bot", "--input",
                             '{"code": "\\ud800"}'))
    assert "holds \\ud800," in line, line
    assert "\\\\" not in line, line


def test_every_key_memory_list_shows_can_be_pasted_into_delete(proj: Path) -> None:
    ok(proj, "agent", "run", "bot", "--input", json.dumps({"keys": KEYS}))
    shown = _keys_column(ok(proj, "agent", "memory", "list", "bot"))
    assert len(shown) == len(KEYS)
    assert "k/back\\\\slash" in shown and "k/esc\\x1b[31mred" in shown
    for text in shown:
        lines = ok(proj, "agent", "audit", "show", "bot", "--key", text).splitlines()
        assert len(lines) == 2 and " write " in lines[1], (text, lines)  # the header, the write
        assert ok(proj, "agent", "memory", "delete", "bot", "--key", text).startswith(
            "Removed 1 entry"), text
    assert json.loads(ok(proj, "agent", "memory", "list", "bot", "--json"))["entries"] == []


@pytest.mark.parametrize("text", ["k/\\q", "k/\\", "k/\\x4", "k/\\u12", "k/\\U0011ffff"])
def test_a_key_option_with_a_broken_escape_is_a_usage_error(proj: Path, text: str) -> None:
    line = last_line(refused(proj, "USAGE_ERROR", "agent", "memory", "delete", "bot",
                             "--key", text))
    assert "--key" in line and "\\\\" in line, line  # says how to write a backslash


def test_long_keys_are_cut_in_tables_never_in_json(proj: Path) -> None:
    long_key = "k/" + "x" * 1022  # 1,024 bytes, the largest key
    ok(proj, "agent", "run", "bot", "--input", json.dumps({"keys": [long_key, "k/short"]}))
    listing = ok(proj, "agent", "memory", "list", "bot")
    assert max(len(line) for line in listing.splitlines()) < 200, listing
    assert "…" in listing and "--json" in listing  # the marker, and where the whole key is
    entries = json.loads(ok(proj, "agent", "memory", "list", "bot", "--json"))["entries"]
    assert sorted(e["key"] for e in entries) == sorted([long_key, "k/short"])
    history = ok(proj, "agent", "audit", "show", "bot")
    assert max(len(line) for line in history.splitlines()) < 250, history
    assert "…" in history
    lines = ok(proj, "agent", "audit", "show", "bot", "--json").splitlines()
    assert long_key in [json.loads(line)["key"] for line in lines]


@given(st.text())
def test_unshown_reads_back_what_shown_prints(text: str) -> None:
    from rotifer.cli.common import shown, unshown

    assert unshown(shown(text)) == text


@given(st.text())
def test_said_escapes_only_what_is_not_printable(text: str) -> None:
    from rotifer.cli.common import said

    out = said(text)
    assert out.isprintable()
    assert out.count("\\") >= text.count("\\")
    if text.isprintable():
        assert out == text  # a backslash a message already holds is left alone
