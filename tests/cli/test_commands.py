"""``rotifer init | wrap | compile | run | test`` and finding the project, through
the real CLI in-process (tests/cli/helpers.py) on temporary projects: these tests
read only stdout, stderr and the exit status."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from rotifer.genes.ids import v1_id, v2_id
from tests.genes.helpers import FORMATTER

from .helpers import (
    add_gene,
    add_wat_gene,
    agent_list,
    audit,
    init_project,
    last_line,
    ok,
    refused,
    run,
    spec_path,
    store_agents,
    v2_of,
    wrap,
)

DENIED = "MEMORY_ACCESS_DENIED"

#: Calls each of the four memory functions and reports what became of each.
PROBE = '''
def express(input, ctx):
    calls = {
        "read": lambda: ctx.memory.read_memory("probe/k"),
        "write": lambda: ctx.memory.write_memory("probe/k", b"v", "CACHE"),
        "query": lambda: ctx.memory.query_memory({"keyPrefix": "probe/"}),
        "delete": lambda: ctx.memory.delete_memory("probe/k"),
    }
    result = {}
    for name, call in calls.items():
        try:
            call()
            result[name] = "ok"
        except Exception as exc:
            code = getattr(exc, "code", None)
            result[name] = getattr(code, "value", code)
    return result
'''
ECHO = "def express(input, ctx):\n    return {'echo': input}\n"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """A project with the seed's formatter gene ``fmt`` (not wrapped yet)."""
    root = init_project(tmp_path / "proj")
    add_gene(root, "fmt", FORMATTER)
    return root


def phenotype_of(folder: Path) -> object:
    return json.loads((folder / "phenotype.json").read_text())


# -- init and finding the project -------------------------------------------------------------


def test_init_makes_the_folders_and_is_idempotent(tmp_path: Path) -> None:
    root = tmp_path / "new" / "proj"
    out = ok(tmp_path, "init", str(root))
    assert out.splitlines()[0] == f"Initialized rotifer project in {root.resolve()}"
    assert out.splitlines()[1] == "Next:"  # the next steps (issue 36)
    assert (root / ".rotifer").is_dir() and (root / "genes").is_dir()
    assert (root / ".rotifer" / "agents").is_dir()  # where the import hint's `cp` copies to
    add_gene(root, "fmt", FORMATTER)
    wrap(root, "fmt")
    ok(root, "agent", "create", "a", "--genes", "fmt")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    ok(tmp_path, "init", str(root))  # again: keeps everything
    ok(root, "init")  # DIR defaults to the working folder
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert [a["name"] for a in agent_list(root)] == ["a"]


def test_init_without_dir_uses_the_working_folder(tmp_path: Path) -> None:
    ok(tmp_path, "init")
    assert (tmp_path / ".rotifer").is_dir() and (tmp_path / "genes").is_dir()


def test_init_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    refused(tmp_path, "USAGE_ERROR", "init", "afile")
    assert (tmp_path / "afile").read_text() == "x"


def test_the_project_is_found_upward_by_option_and_by_environment(proj: Path,
                                                                  tmp_path: Path) -> None:
    wrap(proj, "fmt")
    ok(proj, "agent", "create", "a", "--genes", "fmt")
    deep = proj / "genes" / "fmt"
    assert "a " in ok(deep, "agent", "list")  # the nearest .rotifer/ upward
    outside = tmp_path / "outside"
    outside.mkdir()
    assert "a " in ok(outside, "--project", str(proj), "agent", "list")
    assert "a " in ok(outside, "agent", "list", env={"ROTIFER_PROJECT": str(proj)})
    # --project wins over $ROTIFER_PROJECT, which wins over the working folder.
    other = init_project(tmp_path / "other")
    assert "No agents" in ok(outside, "--project", str(other), "agent", "list",
                             env={"ROTIFER_PROJECT": str(proj)})
    assert "No agents" in ok(proj, "agent", "list", env={"ROTIFER_PROJECT": str(other)})
    # wrap via --project registers the gene in that project
    assert v2_of(ok(outside, "--project", str(proj), "wrap", "fmt")).startswith("v2:")


def test_project_not_found(tmp_path: Path) -> None:
    if any((p / ".rotifer").exists() for p in [tmp_path, *tmp_path.parents]):
        pytest.skip("a folder above the temporary folder is a rotifer project")
    commands = [["wrap", "g"], ["compile", "g"], ["run", "g", "--input", "{}"], ["test", "g"],
                ["agent", "create", "a", "--genes", "g"], ["agent", "list"],
                ["agent", "run", "a", "--input", "{}"],
                ["agent", "update-genes", "a", "--genes", "g"],
                ["agent", "memory", "list", "a"], ["agent", "memory", "delete", "a", "--key", "k"]]
    for args in commands:
        err = refused(tmp_path, "PROJECT_NOT_FOUND", *args)
        assert "rotifer init" in err
    missing = str(tmp_path / "missing")
    refused(tmp_path, "PROJECT_NOT_FOUND", "--project", missing, "agent", "list")
    refused(tmp_path, "PROJECT_NOT_FOUND", "agent", "list", env={"ROTIFER_PROJECT": missing})
    refused(tmp_path, "PROJECT_NOT_FOUND", "--project", str(tmp_path), "agent", "list")
    assert not (tmp_path / ".rotifer").exists()  # nothing made on the way


# -- wrap and compile -------------------------------------------------------------------------


def test_wrap_prints_the_v2_id_of_the_content(proj: Path) -> None:
    folder = proj / "genes" / "fmt"
    out = ok(proj, "wrap", "fmt")
    first = v2_of(out)
    assert first == v2_id(phenotype_of(folder), "gene.py", (folder / "gene.py").read_bytes())
    assert f"Gene ID (v1): {v1_id(phenotype_of(folder))}" in out.splitlines()
    assert wrap(proj, "fmt") == first  # same content, same id
    assert v2_of(ok(proj, "compile", "fmt")) == first  # nothing to compile: the same id

    (folder / "gene.py").write_text(FORMATTER + "\n# a comment is a change\n")
    changed = wrap(proj, "fmt")
    assert changed != first
    assert changed == v2_id(phenotype_of(folder), "gene.py", (folder / "gene.py").read_bytes())

    doc = json.loads((folder / "phenotype.json").read_text())
    doc["version"] = "1.0.1"
    (folder / "phenotype.json").write_text(json.dumps(doc, indent=4))
    assert wrap(proj, "fmt") not in (first, changed)

    (folder / "gene.py").write_text(FORMATTER)
    doc["version"] = "1.0.0"
    (folder / "phenotype.json").write_text(json.dumps(doc))  # other whitespace, same JSON
    assert wrap(proj, "fmt") == first


def test_compile_writes_gene_wasm_and_hashes_it(proj: Path) -> None:
    folder = add_wat_gene(proj, "prefs", "prefs")
    wrapped = wrap(proj, "prefs")  # wrap leaves the WAT as it is
    assert wrapped == v2_id(phenotype_of(folder), "gene.wat", (folder / "gene.wat").read_bytes())
    assert not (folder / "gene.wasm").exists()

    out = ok(proj, "compile", "prefs")
    assert "gene.wat -> gene.wasm" in out
    wasm = (folder / "gene.wasm").read_bytes()
    assert wasm.startswith(b"\0asm")
    compiled = v2_of(out)
    assert compiled == v2_id(phenotype_of(folder), "gene.wasm", wasm) != wrapped
    assert v2_of(ok(proj, "compile", "prefs")) == compiled  # deterministic

    # the compiled gene runs with its memory in an agent
    ok(proj, "agent", "create", "w", "--genes", "prefs")
    assert json.loads(ok(proj, "agent", "run", "w", "--input", '{"indent": 6}')) == {"indent": 6}
    assert json.loads(ok(proj, "agent", "run", "w", "--input", "{}")) == {"indent": 6}
    assert audit(proj)[-1]["actor"] == compiled


@pytest.mark.parametrize("command", ["wrap", "compile"])
def test_wrap_and_compile_refusals(proj: Path, command: str) -> None:
    genes = proj / "genes"
    refused(proj, "GENE_NOT_FOUND", command, "nope")
    refused(proj, "INVALID_GENE", command, "../fmt")

    add_gene(proj, "nophen", ECHO)
    (genes / "nophen" / "phenotype.json").write_text('{"name": "nophen"}')
    assert "domain" in refused(proj, "INVALID_PHENOTYPE", command, "nophen")
    (genes / "nophen" / "phenotype.json").write_text("{not json")
    refused(proj, "INVALID_PHENOTYPE", command, "nophen")
    (genes / "nophen" / "phenotype.json").unlink()
    refused(proj, "INVALID_PHENOTYPE", command, "nophen")

    add_gene(proj, "bad", "def express(input, ctx:\n    return 1\n")
    assert "gene.py line 1" in refused(proj, "INVALID_GENE", command, "bad")
    add_gene(proj, "nocode", ECHO)
    (genes / "nocode" / "gene.py").unlink()
    refused(proj, "INVALID_GENE", command, "nocode")
    assert not (proj / ".rotifer" / "genes.json").exists() or "bad" not in (
        proj / ".rotifer" / "genes.json").read_text()


def test_compile_of_bad_wat_fails_and_writes_nothing(proj: Path) -> None:
    folder = add_gene(proj, "badwat", "(module (func $f (result i32))", file="gene.wat")
    err = refused(proj, "COMPILE_FAILED", "compile", "badwat")
    assert "not valid WAT" in last_line(err)
    assert len(err.strip().splitlines()) == 1  # the parser's diagram is folded into the line
    assert not (folder / "gene.wasm").exists()
    refused(proj, "INVALID_GENE", "wrap", "badwat")

    (folder / "gene.wat").write_text("(module\n  (func $f (result i32)))\n")  # type error
    assert "not a valid WebAssembly module" in refused(proj, "COMPILE_FAILED", "compile",
                                                       "badwat")
    (folder / "gene.wat").write_text("(module)")  # valid, but no express/memory exports
    refused(proj, "COMPILE_FAILED", "compile", "badwat")
    assert not (folder / "gene.wasm").exists()


# -- run --------------------------------------------------------------------------------------


def test_run_prints_the_output_json(proj: Path, tmp_path: Path) -> None:
    add_gene(proj, "echo", ECHO)
    doc = {"text": "héllo", "n": [1, 2.5, None, True]}
    out = ok(proj, "run", "echo", "--input", json.dumps(doc))
    assert len(out.splitlines()) == 1 and json.loads(out) == {"echo": doc}
    # --input - reads stdin, @FILE a file
    assert json.loads(ok(proj, "run", "echo", "--input", "-", stdin='{"a": 1}\n')) == {
        "echo": {"a": 1}}
    (tmp_path / "in.json").write_text('["from", "file"]')
    assert json.loads(ok(proj, "run", "echo", "--input", f"@{tmp_path / 'in.json'}")) == {
        "echo": ["from", "file"]}
    # the gene runs alone: no agent memory is made
    assert store_agents(proj) == []


def test_run_refuses_every_memory_call(proj: Path) -> None:
    add_gene(proj, "probe", PROBE)
    expected = {"read": DENIED, "write": DENIED, "query": DENIED, "delete": DENIED}
    assert json.loads(ok(proj, "run", "probe", "--input", "{}")) == expected
    wrap(proj, "probe")  # with a v2 id it is still refused outside an agent
    assert json.loads(ok(proj, "run", "probe", "--input", "{}")) == expected
    denied = [line for line in audit(proj) if line["action"] == "access_denied"]
    assert len(denied) == 8 and {line["operation"] for line in denied} == {
        "read", "write", "query", "delete"}
    assert store_agents(proj) == []


def test_run_a_gene_that_lets_the_refusal_escape(proj: Path) -> None:
    wrap(proj, "fmt")
    done = run(proj, "run", "fmt", "--input", '{"code": "x", "indent": 4}')
    assert done.returncode == 1 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert last_line(done.stderr).startswith(f"{DENIED}: ")
    assert "rotifer run" in last_line(done.stderr)
    refused(proj, DENIED, "run", "fmt", "--input", '{"code": "x"}')  # a read, refused too


def test_run_a_wasm_gene_gets_minus_2(proj: Path) -> None:
    add_wat_gene(proj, "probe", "err_not_found")  # one deleteMemory call, reports its result
    out = json.loads(ok(proj, "run", "probe", "--input", "{}"))
    assert out["result"] == -2
    assert out["body"]["__rotifer_error"]["code"] == DENIED
    ok(proj, "compile", "probe")
    assert json.loads(ok(proj, "run", "probe", "--input", "{}"))["result"] == -2
    # a WASM gene that returns the error body as its output: rejected with that code
    add_wat_gene(proj, "prefs", "prefs")
    refused(proj, DENIED, "run", "prefs", "--input", '{"indent": 3}')


def test_run_refusals(proj: Path, tmp_path: Path) -> None:
    add_gene(proj, "echo", ECHO)
    for bad in ["{", "", "NaN", "[1,]", "{'a': 1}"]:
        refused(proj, "INVALID_INPUT", "run", "echo", "--input", bad)
    assert "stdin" in refused(proj, "INVALID_INPUT", "run", "echo", "--input", "-", stdin="{")
    refused(proj, "INVALID_INPUT", "run", "echo", "--input", f"@{tmp_path / 'missing.json'}")
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe")
    refused(proj, "INVALID_INPUT", "run", "echo", "--input", f"@{tmp_path / 'bad.json'}")
    refused(proj, "USAGE_ERROR", "run", "echo")  # --input is required
    refused(proj, "GENE_NOT_FOUND", "run", "nope", "--input", "{}")
    add_gene(proj, "boom", "def express(input, ctx):\n    raise ValueError('kaboom')\n")
    assert "kaboom" in refused(proj, "GENE_FAILED", "run", "boom", "--input", "{}")
    add_gene(proj, "notjson", "def express(input, ctx):\n    return {1, 2}\n")
    refused(proj, "GENE_FAILED", "run", "notjson", "--input", "{}")
    add_gene(proj, "syntax", "def express(:\n")  # found when it runs: the gene failed
    assert "SyntaxError" in refused(proj, "GENE_FAILED", "run", "syntax", "--input", "{}")
    add_gene(proj, "noexpress", "x = 1\n")
    assert "express" in refused(proj, "INVALID_GENE", "run", "noexpress", "--input", "{}")
    refused(proj, "USAGE_ERROR", "frobnicate")


# -- test -------------------------------------------------------------------------------------


def write_tests(root: Path, gene: str, doc: object) -> None:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (root / "genes" / gene / "tests.json").write_text(text)


SHARED_CASES = {"cases": [
    {"name": "fresh memory", "input": {"code": "x"}, "expect": {"formatted": "  x", "indent": 2}},
    {"name": "remember", "input": {"code": "x", "indent": 3}},
    {"name": "recall", "input": {"code": "y"}, "expect": {"formatted": "   y", "indent": 3}},
]}


def test_test_cases_share_one_temporary_memory(proj: Path) -> None:
    wrap(proj, "fmt")
    ok(proj, "agent", "create", "a", "--genes", "fmt")
    ok(proj, "agent", "run", "a", "--input", '{"code": "x", "indent": 8}')
    before = json.loads(ok(proj, "agent", "memory", "list", "a", "--json"))
    write_tests(proj, "fmt", SHARED_CASES)

    out = ok(proj, "test", "fmt")
    assert out.splitlines() == ["PASS  fresh memory", "PASS  remember", "PASS  recall",
                                "3 passed, 0 failed"]
    # the agent's memory is untouched, and no temporary agent is left behind
    assert json.loads(ok(proj, "agent", "memory", "list", "a", "--json")) == before
    assert json.loads(ok(proj, "agent", "run", "a", "--input", '{"code": "x"}'))["indent"] == 8
    assert [a["name"] for a in agent_list(proj)] == ["a"]
    assert store_agents(proj) == ["a"]
    assert sorted(p.name for p in (proj / ".rotifer" / "agents").iterdir()) == ["a.json"]
    ok(proj, "test", "fmt")  # a second run starts empty again ("fresh memory" passes)
    assert store_agents(proj) == ["a"]


def test_test_a_wasm_gene(proj: Path) -> None:
    add_wat_gene(proj, "prefs", "prefs")
    ok(proj, "compile", "prefs")
    write_tests(proj, "prefs", [{"input": {"indent": 5}, "expect": {"indent": 5}},
                                {"input": {}, "expect": {"indent": 5}}])
    assert ok(proj, "test", "prefs").splitlines()[-1] == "2 passed, 0 failed"
    assert store_agents(proj) == []


def test_test_failures(proj: Path) -> None:
    wrap(proj, "fmt")
    write_tests(proj, "fmt", [
        {"name": "wrong", "input": {"code": "x"}, "expect": {"formatted": "x", "indent": 2}},
        {"name": "right", "input": {"code": "x"}, "expect": {"formatted": "  x", "indent": 2}},
    ])
    done = run(proj, "test", "fmt")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("FAIL  wrong: ") and lines[1] == "PASS  right"
    assert lines[-1] == "1 passed, 1 failed"
    assert last_line(done.stderr).startswith("TESTS_FAILED: ")
    assert store_agents(proj) == [] and agent_list(proj) == []

    # a gene changed since it was wrapped: a hint, and its memory calls fail the cases
    write_tests(proj, "fmt", SHARED_CASES)
    (proj / "genes" / "fmt" / "gene.py").write_text(FORMATTER + "# changed\n")
    err = refused(proj, "TESTS_FAILED", "test", "fmt")
    assert "hint: gene 'fmt' changed" in err and "rotifer wrap fmt" in err
    assert store_agents(proj) == []


@pytest.mark.parametrize("text", [
    "not json",
    '{"cases": 3}',
    '{"cases": []}',
    "[]",
    '{"tests": []}',
    '[{"name": "no input"}]',
    '[{"input": {}, "surprise": 1}]',
    '[{"input": {}, "expect": {}, "expectError": "GENE_FAILED"}]',
    '[{"input": {}, "expectError": 7}]',
    '[42]',
])
def test_test_malformed_tests_json(proj: Path, text: str) -> None:
    wrap(proj, "fmt")
    write_tests(proj, "fmt", text)
    refused(proj, "INVALID_TESTS", "test", "fmt")
    assert store_agents(proj) == []


def test_test_refusals(proj: Path) -> None:
    refused(proj, "GENE_NOT_FOUND", "test", "nope")
    add_gene(proj, "syntax", "def express(:\n")  # refused as wrap refuses it (issue 36)
    assert "gene.py line 1" in refused(proj, "INVALID_GENE", "test", "syntax")
    # without a tests.json the gene is only loaded: a hint says so
    done = run(proj, "test", "fmt")
    assert done.returncode == 0 and "tests.json" in done.stderr
    assert not spec_path(proj, "fmt").exists()


def test_no_value_in_error_messages(proj: Path) -> None:
    """A refusal quotes no input: a secret passed in the input stays out of stderr."""
    add_gene(proj, "reject", "def express(input, ctx):\n"
                             "    return {'__rotifer_error': {'code': 'INVALID_INPUT',"
                             " 'message': 'no'}}\n")
    secret = "s3cr3t-" + "z" * 20
    err = refused(proj, "INVALID_INPUT", "run", "reject", "--input", json.dumps({"k": secret}))
    assert secret not in err and base64.b64encode(secret.encode()).decode() not in err


def test_help_and_version(tmp_path: Path) -> None:
    out = ok(tmp_path, "--help")
    for command in ["init", "wrap", "compile", "run", "test", "agent"]:
        assert f"  {command} " in out
    agent = ok(tmp_path, "agent", "--help")
    for command in ["create", "list", "run", "update-genes", "memory"]:
        assert f"  {command} " in agent
    assert "--memory-quota" in ok(tmp_path, "agent", "create", "--help")
    assert ok(tmp_path, "--version").startswith("rotifer, version ")


def test_messages_are_folded_into_one_line() -> None:
    from rotifer.cli.main import one_line

    diagram = "bad WAT: expected `)`\n     --> <anon>:2:1\n      |\n    2 |\n      | ^"
    assert one_line(diagram) == "bad WAT: expected `)` --> <anon>:2:1"
    assert one_line("first\n  2 | (module  (func\n  second   part ") == (
        "first 2 | (module (func second part")
    assert one_line("plain") == "plain" and one_line("") == ""
