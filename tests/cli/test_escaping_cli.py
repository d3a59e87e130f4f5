"""Text a gene controls (keys, log lines, rejections, crash messages, test
output) never reaches a user's terminal raw: the human output shows it
escaped (``rotifer.cli.common.shown``), on a terminal and in a pipe alike,
and ``--json`` keeps the exact value.  The terminal case runs ``rotifer``
on a real pseudo-terminal."""

from __future__ import annotations

import ast
import errno
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .helpers import add_gene, clean_env, init_project, ok, refused, rotifer_command, run, wrap

EVIL_KEY = "keys/evil\n\x1b[31mRED\x1b[0m\rOVER"
#: How the listing shows it: one line, every control character spelled out.
EVIL_SHOWN = "keys/evil\\n\\x1b[31mRED\\x1b[0m\\rOVER"
#: A right-to-left override, a C1 CSI, DEL, a zero-width space and a backslash.
SNEAKY_KEY = "keys/\u202etxt.exe\x9b2J\x7f\u200b\\end"
SNEAKY_SHOWN = "keys/\\u202etxt.exe\\x9b2J\\x7f\\u200b\\\\end"
#: The listing is sorted by key, then shown.
LISTED = [EVIL_SHOWN, SNEAKY_SHOWN]

EVIL_GENE = '''
import json
def express(input, ctx):
    for key in input.get("keys", []):
        ctx.memory.write_memory(key, b"x", "CACHE")
    if "log" in input:
        ctx.log(input["log"])
    if "reject" in input:
        return {"__rotifer_error": {"code": "BAD_INPUT", "message": input["reject"]}}
    if "crash" in input:
        raise ValueError(input["crash"])
    return {"echo": input.get("echo")}
'''

#: What no human output may contain: ESC, CR, the C1 CSI, the bidi override.
RAW = ("\x1b", "\r", "\x9b", "\u202e", "\x7f", "\u200b")


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = init_project(tmp_path / "proj")
    add_gene(root, "evil", EVIL_GENE, domain="keys")
    wrap(root, "evil")
    ok(root, "agent", "create", "bot", "--genes", "evil")
    ok(root, "agent", "run", "bot", "--input", json.dumps({"keys": [EVIL_KEY, SNEAKY_KEY]}))
    return root


def assert_no_raw(text: str) -> None:
    for char in RAW:
        assert char not in text, (char, text)


def on_a_terminal(cwd: Path, *args: str) -> tuple[int, str]:
    """Run ``rotifer ARGS`` with stdin, stdout and stderr on a new pseudo-terminal;
    its exit status and everything it wrote (the terminal's CRLF turned back into LF)."""
    leader, follower = os.openpty()
    try:
        proc = subprocess.Popen([*rotifer_command(), *args], cwd=cwd, env=clean_env(),
                                stdin=follower, stdout=follower, stderr=follower)
    finally:
        os.close(follower)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError as exc:  # EIO: every writer closed the terminal
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    status = proc.wait(timeout=120)
    return status, b"".join(chunks).decode().replace("\r\n", "\n")


# -- memory list ---------------------------------------------------------------------------


def test_memory_list_shows_keys_escaped_on_a_terminal(proj: Path) -> None:
    status, out = on_a_terminal(proj, "agent", "memory", "list", "bot")
    assert status == 0, out
    assert_no_raw(out)
    rows = out.splitlines()
    assert [line.split()[0] for line in rows[1:3]] == LISTED
    assert len(rows) == 4  # header, two entries, usage: no line was forged


def test_memory_list_shows_keys_escaped_in_a_pipe(proj: Path) -> None:
    done = run(proj, "agent", "memory", "list", "bot")
    assert done.returncode == 0, done.stderr
    assert_no_raw(done.stdout)
    rows = done.stdout.splitlines()
    assert [line.split()[0] for line in rows[1:3]] == LISTED
    assert len(rows) == 4


def test_memory_list_json_keeps_the_exact_keys(proj: Path) -> None:
    for status, out in (on_a_terminal(proj, "agent", "memory", "list", "bot", "--json"),
                        (0, ok(proj, "agent", "memory", "list", "bot", "--json"))):
        assert status == 0
        assert_no_raw(out)  # escaped as \u... inside the JSON strings
        keys = [e["key"] for e in json.loads(out)["entries"]]
        assert keys == sorted([EVIL_KEY, SNEAKY_KEY])


# -- what a gene says -------------------------------------------------------------------------


def test_a_genes_log_lines_are_escaped(proj: Path) -> None:
    message = "done\n[other] forged line\x1b[2K\rOVER \u202eevil"
    for status, out in (on_a_terminal(proj, "agent", "run", "bot", "--input",
                                      json.dumps({"log": message})),
                        (0, run(proj, "agent", "run", "bot", "--input",
                                json.dumps({"log": message})).stderr)):
        assert status == 0
        assert_no_raw(out)
        assert "[evil] done\\n[other] forged line\\x1b[2K\\rOVER \\u202eevil" in out
        assert "\n[other]" not in out


@pytest.mark.parametrize("field", ["reject", "crash"])
def test_a_genes_error_message_is_escaped(proj: Path, field: str) -> None:
    message = "no\x1b[2K\rALL GOOD \u202e"
    code = "BAD_INPUT" if field == "reject" else "GENE_FAILED"
    err = refused(proj, code, "agent", "run", "bot", "--input", json.dumps({field: message}))
    assert_no_raw(err)
    assert "no\\x1b[2K\\rALL GOOD \\u202e" in err.splitlines()[-1]
    status, out = on_a_terminal(proj, "agent", "run", "bot", "--input",
                                json.dumps({field: message}))
    assert status == 1
    assert_no_raw(out)


def test_a_genes_output_json_cannot_drive_the_terminal(proj: Path) -> None:
    value = "\x1b[31m\x9b\u202e\x7f"
    out = ok(proj, "agent", "run", "bot", "--input", json.dumps({"echo": value}))
    assert_no_raw(out)
    assert json.loads(out) == {"echo": value}


def test_rotifer_test_output_is_escaped(proj: Path) -> None:
    (proj / "genes" / "evil" / "tests.json").write_text(json.dumps([
        {"name": "case \x1b[32mPASS\x1b[0m\r", "input": {"echo": "\x1b]0;title\x07"},
         "expect": {"echo": "other"}}]))
    done = run(proj, "test", "evil")
    assert done.returncode == 1
    assert_no_raw(done.stdout + done.stderr)
    assert "\x07" not in done.stdout
    assert "FAIL  case \\x1b[32mPASS\\x1b[0m\\r: " in done.stdout
    # The output is quoted as JSON (\u001b), escaped once: not shown again (\\u001b).
    assert '"\\u001b]0;title\\u0007"' in done.stdout


# -- the helper -------------------------------------------------------------------------------


def test_shown_leaves_printable_text_alone() -> None:
    from rotifer.cli.common import shown

    for text in ("formatter/indent", "clé/ünïcode/日本語/🙂", "a b", ""):
        assert shown(text) == text


@given(st.text())
def test_shown_is_printable_and_reversible(text: str) -> None:
    from rotifer.cli.common import shown

    out = shown(text)
    assert out.isprintable()
    # Python's own reading of the escapes gives the text back: two different
    # texts are never shown the same.
    assert ast.literal_eval('"' + out.replace('"', '\\"') + '"') == text


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=10))
def test_json_text_is_printable_and_exact(value: object) -> None:
    from rotifer.cli.common import json_text

    text = json_text(value)
    assert text.isprintable()
    assert json.loads(text) == value


def test_a_genes_domain_is_escaped_when_wrapped(tmp_path: Path) -> None:
    root = init_project(tmp_path / "proj")
    add_gene(root, "odd", "def express(input, ctx):\n    return 1\n", domain="d\x1b[2J\rx")
    out = ok(root, "wrap", "odd")
    assert_no_raw(out)
    assert "domain d\\x1b[2J\\rx," in out
