"""The bridge carries the gene's words only (issue 30, finding 6).

A contained gene can write anything on its own message pipe: a message that
claims the run was interrupted, one nested 100,000 deep, one the protocol has
no place for.  Each is a protocol violation of that gene -- GENE_FAILED naming
it -- and a ``try`` composition goes on to its fallback, as for any failed
gene; never INTERRUPTED (exit 130) or INTERNAL_ERROR.  Whether a run was
interrupted is decided by rotifer's own signal handling: a trusted gene that
sends SIGINT to its own process (rotifer's) does stop the run, which shows the
attack bites where nothing stands between the gene and rotifer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import (
    add_gene,
    init_project,
    last_line,
    ok_process,
    refused_process,
    run_process,
    wrap,
)

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

FALLBACK = "def express(input, ctx):\n    return 'fallback ran'\n"

#: Python: what each attack writes on the gene's own message pipe (the last
#: descriptor in sys.argv), then waits to be ended.
PY_FORGER = r'''
import os, sys, time
def express(input, ctx):
    line = input["line"].replace("DEEP", "[" * 100_000 + "]" * 100_000)
    os.write(int(sys.argv[-1]), line.encode() + b"\n")
    time.sleep(2)
    return "not refused"
'''

NODE_FORGER = r'''
const fs = require("fs");
exports.express = (input) => {
  const line = input.line.replace("DEEP", "[".repeat(100000) + "]".repeat(100000));
  fs.writeSync(Number(process.argv[3]), line + "\n");
  const until = Date.now() + 2000;
  while (Date.now() < until) {}
  return "not refused";
};
'''

SELF_INTERRUPT = r'''
import os, signal, time
def express(input, ctx):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(2)
    return "not interrupted"
'''

DEEP = "DEEP"  # the gene writes 100,000 "[" and as many "]" there

ATTACKS = {
    "interrupted": json.dumps({"type": "error", "kind": "interrupted"}),
    "deep result": '{"type":"result","output":' + DEEP + "}",
    "deep call": '{"type":"call","op":"read","args":{"key":' + DEEP + "}}",
    "deep log": '{"type":"log","line":' + DEEP + "}",
    "not an object": DEEP,
    "unknown type": json.dumps({"type": "exit", "status": 130}),
    "ready again": json.dumps({"type": "ready"}),
    "transpiled": json.dumps({"type": "transpiled", "text": "exports.express = () => 1;"}),
    "unavailable": json.dumps({"type": "error", "kind": "unavailable", "message": "no"}),
    "bad field": json.dumps({"type": "log", "line": {"not": "text"}}),
    "extra field": json.dumps({"type": "result", "output": 1, "exitCode": 130}),
}


def project(tmp_path: Path, kind: str) -> Path:
    root = init_project(tmp_path / "proj")
    if kind == "python":
        add_gene(root, "liar", PY_FORGER)
    else:
        add_gene(root, "liar", NODE_FORGER, file="index.js")
    add_gene(root, "fallback", FALLBACK)
    wrap(root, "liar")
    wrap(root, "fallback")
    ok_process(root, "agent", "create", "alone", "--genes", "liar")
    ok_process(root, "agent", "create", "both", "--genes", "liar,fallback", "--composition", "try")
    return root


@needs_node
@pytest.mark.parametrize("kind", ["python", "node"])
def test_a_forged_or_malformed_message_is_the_gene_failing(tmp_path: Path, kind: str) -> None:
    root = project(tmp_path, kind)
    for attack, line in ATTACKS.items():
        text = json.dumps({"line": line})
        stderr = refused_process(root, "GENE_FAILED", "agent", "run", "alone", "--input", text)
        last = last_line(stderr)
        assert "gene 'liar'" in last and "protocol" in last, (attack, last)
        assert "INTERRUPTED" not in stderr and "INTERNAL_ERROR" not in stderr, (attack, stderr)
        done = run_process(root, "agent", "run", "both", "--input", text)
        assert done.returncode == 0, (attack, done.returncode, done.stderr[-2000:])
        assert json.loads(done.stdout) == "fallback ran", (attack, done.stdout)


def test_a_gene_interrupting_itself_does_not_interrupt_rotifer(tmp_path: Path) -> None:
    """SIGINT to its own process: contained, that is the child, and the run
    goes on to the fallback; trusted, that is rotifer's process, and the run
    ends INTERRUPTED (130) -- the attack is real where nothing contains it."""
    root = init_project(tmp_path / "proj")
    add_gene(root, "selfish", SELF_INTERRUPT)
    add_gene(root, "fallback", FALLBACK)
    wrap(root, "selfish")
    wrap(root, "fallback")
    ok_process(root, "agent", "create", "c", "--genes", "selfish,fallback", "--composition", "try")
    done = run_process(root, "agent", "run", "c", "--input", "0")
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert json.loads(done.stdout) == "fallback ran"
    ok_process(root, "agent", "create", "t", "--genes", "selfish,fallback", "--composition", "try",
               "--trust", "selfish")
    trusted = run_process(root, "agent", "run", "t", "--input", "0")
    assert trusted.returncode == 130, (trusted.returncode, trusted.stderr[-2000:])


PY_FLOOD = r'''
import os, sys
def express(input, ctx):
    for i in range(2000):
        print("p" * 1000)
        ctx.log("l" * 1000)
        sys.stderr.write("e" * 1000 + "\n")
        os.write(1, b"r" * 1000 + b"\n")
    return "done"
'''

NODE_FLOOD = r'''
exports.express = (input, ctx) => {
  for (let i = 0; i < 2000; i++) {
    console.log("c".repeat(1000));
    console.error("e".repeat(1000));
    ctx.log("l".repeat(1000));
  }
  return "done";
};
'''


@needs_node
@pytest.mark.parametrize("kind", ["python", "node"])
def test_every_stream_together_is_capped_at_1_mib(tmp_path: Path, kind: str) -> None:
    """print, ctx.log, console.log and raw writes: 6-8 MB written, at most
    1 MiB passed on, then one line saying how much was dropped.  A trusted
    Python gene prints in rotifer's own process, where nothing counts it."""
    root = init_project(tmp_path / "proj")
    if kind == "python":
        add_gene(root, "loud", PY_FLOOD)
    else:
        add_gene(root, "loud", NODE_FLOOD, file="index.js")
    wrap(root, "loud")
    ok_process(root, "agent", "create", "a", "--genes", "loud")
    done = run_process(root, "agent", "run", "a", "--input", "0")
    assert done.returncode == 0 and json.loads(done.stdout) == "done", done.stderr[-500:]
    assert len(done.stderr.encode()) < (1 << 20) + (16 << 10), len(done.stderr)
    dropped = [line for line in done.stderr.splitlines() if "bytes of output dropped" in line]
    assert len(dropped) == 1, dropped
    assert done.stderr.rstrip().endswith(dropped[0])
    if kind == "python":
        ok_process(root, "agent", "create", "t", "--genes", "loud", "--trust", "loud")
        trusted = run_process(root, "agent", "run", "t", "--input", "0")
        assert trusted.returncode == 0
        assert len(trusted.stderr.encode()) > 6 << 20


def test_an_agent_may_pass_on_more_output(tmp_path: Path) -> None:
    """``agent create --gene-output MIB``: the cap is per agent."""
    root = init_project(tmp_path / "proj")
    add_gene(root, "loud", PY_FLOOD)
    wrap(root, "loud")
    ok_process(root, "agent", "create", "a", "--genes", "loud", "--gene-output", "4")
    assert "output 4 MiB" in ok_process(root, "agent", "list")
    done = run_process(root, "agent", "run", "a", "--input", "0")
    assert done.returncode == 0, done.stderr[-500:]
    assert 3 << 20 < len(done.stderr.encode()) < (4 << 20) + (64 << 10)  # with "[loud] "s
    assert done.stderr.count("bytes of output dropped") == 1
    refused_process(root, "INVALID_AGENT", "agent", "create", "b", "--genes", "loud",
                    "--gene-output", "0")
