"""Hostile ``--input`` and hostile outputs through the real ``rotifer`` command
(issue 13, items 2 and 3): text that is not valid Unicode and numbers JSON
cannot hold are the caller's INVALID_INPUT at the door, for every command that
takes ``--input`` and every kind of gene; a gene that returns them has failed
(GENE_FAILED).  Never an INTERNAL_ERROR, never raw bytes echoed back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .helpers import (
    ERROR_LINE,
    add_gene,
    add_wat_gene,
    clean_env,
    init_project,
    last_line,
    ok,
    refused,
    rotifer_command,
    wrap,
)

ECHO = "def express(input, ctx):\n    return {'echo': input}\n"


@pytest.fixture(scope="module")
def proj(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with an echoing Python gene, a WASM gene and an agent of each."""
    root = init_project(tmp_path_factory.mktemp("edges") / "proj")
    add_gene(root, "echo", ECHO)
    add_wat_gene(root, "prefs", "prefs")
    wrap(root, "echo")
    ok(root, "compile", "prefs")
    ok(root, "agent", "create", "py", "--genes", "echo")
    ok(root, "agent", "create", "wa", "--genes", "prefs")
    return root


#: Inputs that are JSON text but no JSON value rotifer can pass on.
BAD_INPUTS = {
    "lone surrogate": '"\\ud800"',
    "surrogate in an object": '{"a": ["\\udfff"]}',
    "surrogate in a key": '{"\\ud800": 1}',
    "overflowing number": "1e999999",
    "overflow in an object": '{"a": [-1e400]}',
}


@pytest.mark.parametrize("command", [["run", "echo"], ["run", "prefs"],
                                     ["agent", "run", "py"], ["agent", "run", "wa"]],
                         ids=" ".join)
@pytest.mark.parametrize("text", list(BAD_INPUTS.values()), ids=list(BAD_INPUTS))
def test_input_that_json_cannot_carry_is_invalid_input(proj: Path, command: list[str],
                                                       text: str) -> None:
    line = last_line(refused(proj, "INVALID_INPUT", *command, "--input", text))
    assert "not valid Unicode" in line or "too large for JSON" in line, line


def test_the_same_through_stdin_and_a_file(proj: Path, tmp_path: Path) -> None:
    refused(proj, "INVALID_INPUT", "run", "echo", "--input", "-", stdin='"\\ud800"')
    (tmp_path / "in.json").write_text('{"n": 1e999}')
    refused(proj, "INVALID_INPUT", "agent", "run", "py", "--input", f"@{tmp_path / 'in.json'}")


def run_bytes(cwd: Path, *args: bytes, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """The command line as raw bytes (what a shell passes), output as raw bytes."""
    command = [c.encode() for c in rotifer_command()]
    return subprocess.run([*command, *args], cwd=cwd, env=clean_env(), capture_output=True,
                          timeout=120, check=False, input=stdin)


@pytest.mark.parametrize("args", [[b"run", b"echo"], [b"agent", b"run", b"py"],
                                  [b"run", b"prefs"]], ids=lambda a: b" ".join(a).decode())
@pytest.mark.parametrize("raw", [b'"\xff"', b'{"k": "a\xc3"}', b"\xff", b"\xed\xa0\x80"])
def test_bytes_that_are_not_utf8_are_refused_and_never_echoed(proj: Path, args: list[bytes],
                                                              raw: bytes) -> None:
    done = run_bytes(proj, *args, b"--input", raw)
    assert done.returncode == 1, done
    assert done.stdout == b""
    stderr = done.stderr.decode("utf-8")  # strict: nothing raw came back
    assert "Traceback" not in stderr
    assert last_line(stderr).startswith("INVALID_INPUT: "), stderr
    assert ERROR_LINE.match(last_line(stderr))


def test_stdin_that_is_not_utf8_is_invalid_input(proj: Path) -> None:
    done = run_bytes(proj, b"run", b"echo", b"--input", b"-", stdin=b'"caf\xe9"')
    assert done.returncode == 1 and done.stdout == b""
    assert last_line(done.stderr.decode("utf-8")).startswith("INVALID_INPUT: "), done.stderr


def test_valid_unicode_still_goes_through_exactly(proj: Path) -> None:
    text = '{"s": "caf\\u00e9 \\ud83d\\ude00 \\u2028", "n": 1e300, "m": -0.5}'
    out = ok(proj, "run", "echo", "--input", text)
    assert json.loads(out) == {"echo": json.loads(text)}


@pytest.mark.parametrize(("returned", "says"), [
    ("float('nan')", "NaN"), ("[1, {'x': float('inf')}]", "Infinity"),
    ("-float('inf')", "-Infinity"), ("'\\ud800'", "\\ud800"), ("{'\\udcff': 1}", "\\udcff"),
])
def test_a_gene_returning_what_json_cannot_carry_has_failed(proj: Path, returned: str,
                                                            says: str) -> None:
    add_gene(proj, "bad", f"def express(input, ctx):\n    return {returned}\n")
    err = refused(proj, "GENE_FAILED", "run", "bad", "--input", "{}")
    assert "gene 'bad'" in last_line(err) and says in last_line(err), err
