"""Misbehaving genes through the real ``rotifer`` command (issue 13, items 1, 4,
5, 9 and 13): whatever a gene raises is GENE_FAILED on one line; a gene's
prints never reach stdout; ``async def express`` is refused plainly; agents
are made only of wrapped genes; an edited ``gene.wat`` that was not compiled
again is pointed out."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .helpers import (
    add_gene,
    add_wat_gene,
    clean_env,
    init_project,
    last_line,
    rotifer_command,
    run,
    spec_path,
    wrap,
)
from .helpers import (
    ok_here as ok,
)
from .helpers import (
    refused_here as refused,
)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return init_project(tmp_path / "proj")


# -- item 1: anything a gene raises is the gene's failure ------------------------

RAISERS = {
    "BaseException subclass": ("class Halt(BaseException):\n    pass\n\n"
                               "def express(input, ctx):\n    raise Halt('stop here')\n",
                               "Halt: stop here"),
    "at load time": ("class Halt(BaseException):\n    pass\n\nraise Halt('on import')\n"
                     "def express(input, ctx):\n    return 1\n", "Halt: on import"),
    "KeyboardInterrupt": ("def express(input, ctx):\n    raise KeyboardInterrupt\n",
                          "KeyboardInterrupt"),
    "GeneratorExit": ("def express(input, ctx):\n    raise GeneratorExit('gen')\n",
                      "GeneratorExit: gen"),
    "sys.exit": ("import sys\n\ndef express(input, ctx):\n    sys.exit(3)\n", "exit(3)"),
}


@pytest.mark.parametrize("code", list(RAISERS.values()), ids=list(RAISERS))
def test_whatever_a_gene_raises_is_gene_failed(proj: Path, code: tuple[str, str]) -> None:
    add_gene(proj, "raiser", code[0])
    line = last_line(refused(proj, "GENE_FAILED", "run", "raiser", "--input", "{}"))
    assert "gene 'raiser'" in line and code[1] in line, line


def test_a_real_ctrl_c_while_a_gene_runs_is_an_interruption(proj: Path) -> None:
    started = proj / "started"
    add_gene(proj, "spin", "import pathlib\n\ndef express(input, ctx):\n"
             f"    pathlib.Path({str(started)!r}).write_text('x')\n"
             "    while True:\n        pass\n")
    # --trust: the gene says it started by writing a file outside its folder.
    proc = subprocess.Popen([*rotifer_command(), "run", "--trust", "spin", "--input", "{}"],
                            cwd=proj,
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        for _ in range(600):
            if started.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert started.exists(), proc.communicate(timeout=5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert out == "" and "Traceback" not in err
    assert last_line(err).startswith("INTERRUPTED: "), err


# -- item 4: stdout carries the output JSON and nothing else ---------------------

CHATTY = ("import os, sys\n\ndef express(input, ctx):\n"
          "    print('chatter', input)\n    print('to stdout', file=sys.stdout)\n"
          "    sys.stdout.write('partial')\n    os.write(1, b'raw fd\\n')\n"
          "    ctx.log('logged')\n    return input\n")


@pytest.mark.parametrize("composition", ["seq", "par", "cond", "try"])
def test_a_genes_prints_go_to_stderr_in_every_composition(proj: Path, composition: str) -> None:
    add_gene(proj, "chatty", CHATTY)
    wrap(proj, "chatty")
    genes = "chatty,chatty,chatty" if composition == "cond" else "chatty,chatty"
    ok(proj, "agent", "create", "a", "--genes", genes, "--composition", composition)
    done = run(proj, "agent", "run", "a", "--input", '{"n": 1}')
    assert done.returncode == 0, done
    expected = [{"n": 1}, {"n": 1}] if composition == "par" else {"n": 1}
    assert json.loads(done.stdout) == expected
    assert done.stdout.count("\n") == 1, done.stdout
    for line in ("[chatty] chatter {'n': 1}", "[chatty] to stdout", "[chatty] partial",
                 "raw fd", "[chatty] logged"):
        assert line in done.stderr, done.stderr


def test_prints_go_to_stderr_in_run_and_test(proj: Path) -> None:
    folder = add_gene(proj, "chatty", CHATTY)
    done = run(proj, "run", "chatty", "--input", "[1]")
    assert done.returncode == 0 and done.stdout == "[1]\n", done
    assert "[chatty] chatter [1]" in done.stderr
    (folder / "tests.json").write_text(json.dumps([{"input": 1, "expect": 1}]))
    done = run(proj, "test", "chatty")
    assert done.returncode == 0, done
    assert done.stdout.splitlines() == ["PASS  case 1", "1 passed, 0 failed"], done.stdout
    assert "[chatty] chatter 1" in done.stderr and "raw fd" in done.stderr


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_node_genes_output_never_reaches_stdout(proj: Path) -> None:
    add_gene(proj, "js", "module.exports.express = (input, ctx) => {\n"
             "  console.log('said', input); process.stdout.write('written\\n');\n"
             "  return {ok: input};\n};\n", file="index.js")
    done = run(proj, "run", "js", "--input", "2")
    assert done.returncode == 0, done
    assert done.stdout == '{"ok": 2}\n'
    assert "[js] said 2" in done.stderr


# -- item 5: express must be synchronous ------------------------------------------

ASYNC = "async def express(input, ctx):\n    return input\n"
#: Not visible to a static check: express is made at load time.
ASYNC_HIDDEN = ("def make():\n    async def inner(input, ctx):\n        return input\n"
                "    return inner\n\nexpress = make()\n")


def test_wrap_refuses_an_async_express(proj: Path) -> None:
    add_gene(proj, "aio", ASYNC)
    line = last_line(refused(proj, "INVALID_GENE", "wrap", "aio"))
    assert "express must be a plain (synchronous) function" in line, line


@pytest.mark.parametrize("code", [ASYNC, ASYNC_HIDDEN], ids=["async def", "made at load"])
def test_running_an_async_express_says_it_must_be_synchronous(proj: Path, code: str) -> None:
    add_gene(proj, "aio", code)
    err = refused(proj, "GENE_FAILED", "run", "aio", "--input", "{}")
    assert "express must be a plain (synchronous) function" in last_line(err), err
    assert "Warning" not in err and "never awaited" not in err and ".py" not in err, err
    assert len(err.strip().splitlines()) == 1, err


# -- item 9: agents are made of wrapped genes --------------------------------------


def test_create_refuses_a_gene_never_wrapped(proj: Path) -> None:
    add_gene(proj, "fresh", "def express(input, ctx):\n    return 1\n")
    line = last_line(refused(proj, "INVALID_GENE", "agent", "create", "a", "--genes", "fresh"))
    assert "gene 'fresh' was never wrapped" in line and "rotifer wrap fresh" in line, line
    assert not spec_path(proj, "a").exists()


def test_create_refuses_a_gene_that_wrap_refused(proj: Path) -> None:
    add_gene(proj, "broken", "def express(input, ctx)\n    return 1\n")
    refused(proj, "INVALID_GENE", "wrap", "broken")
    line = last_line(refused(proj, "INVALID_GENE", "agent", "create", "a", "--genes",
                             "broken"))
    assert "gene 'broken' was never wrapped" in line, line
    assert not spec_path(proj, "a").exists()


def test_create_and_update_refuse_a_gene_changed_since_wrapped(proj: Path) -> None:
    folder = add_gene(proj, "g", "def express(input, ctx):\n    return 1\n")
    wrap(proj, "g")
    ok(proj, "agent", "create", "a", "--genes", "g")
    (folder / "gene.py").write_text("def express(input, ctx):\n    return 2\n")
    line = last_line(refused(proj, "INVALID_GENE", "agent", "create", "b", "--genes", "g"))
    assert "gene 'g' changed since it was last wrapped" in line, line
    line = last_line(refused(proj, "INVALID_GENE", "agent", "update-genes", "a", "--genes",
                             "g"))
    assert "gene 'g' changed since it was last wrapped" in line, line


def test_create_refuses_a_wat_gene_never_compiled(proj: Path) -> None:
    add_wat_gene(proj, "w", "prefs")
    line = last_line(refused(proj, "INVALID_GENE", "agent", "create", "a", "--genes", "w"))
    assert "gene 'w' was never compiled" in line and "rotifer compile w" in line, line
    ok(proj, "compile", "w")
    ok(proj, "agent", "create", "a", "--genes", "w")


def test_the_run_time_hint_tells_never_wrapped_from_changed(proj: Path) -> None:
    folder = add_gene(proj, "g", "def express(input, ctx):\n    return 1\n")
    hint = [line for line in run(proj, "test", "g").stderr.splitlines()
            if line.startswith("hint: gene '")]
    assert hint == ["hint: gene 'g' was never wrapped, so its memory calls are refused: run "
                    "`rotifer wrap g`"], hint
    wrap(proj, "g")
    ok(proj, "agent", "create", "a", "--genes", "g")
    (folder / "gene.py").write_text("def express(input, ctx):\n    return 2\n")
    done = run(proj, "agent", "run", "a", "--input", "{}")
    assert done.returncode == 0, done
    assert ("hint: gene 'g' changed since it was last wrapped, so its memory calls are "
            "refused: run `rotifer wrap g` again") in done.stderr, done.stderr
    assert "never" not in done.stderr


# -- item 13: gene.wat newer than gene.wasm -----------------------------------------


def test_a_wat_edited_after_compile_is_pointed_out(proj: Path) -> None:
    folder = add_wat_gene(proj, "w", "prefs")
    ok(proj, "compile", "w")
    ok(proj, "agent", "create", "a", "--genes", "w")
    done = run(proj, "agent", "run", "a", "--input", "{}")
    assert done.returncode == 0 and "warning" not in done.stderr, done
    # As if gene.wat was edited 5 s after the compile (gene.wasm made 5 s before).
    earlier = (folder / "gene.wat").stat().st_mtime - 5
    os.utime(folder / "gene.wasm", (earlier, earlier))
    done = run(proj, "agent", "run", "a", "--input", "{}")
    assert done.returncode == 0, done
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: genes/w/gene.wat is newer than gene.wasm; run "
                        "`rotifer compile w`"], done.stderr
    ok(proj, "compile", "w")
    assert "warning" not in run(proj, "agent", "run", "a", "--input", "{}").stderr
