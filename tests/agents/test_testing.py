"""test_gene: tests.json cases in order on one empty temporary memory, dropped afterwards."""

from __future__ import annotations

import json
import os
import signal
import threading
from typing import Any

import pytest

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.agents.run import run_agent
from rotifer.agents.testing import TEST_AGENT_PREFIX, json_equal
from rotifer.agents.testing import test_gene as run_tests
from rotifer.genes.errors import GeneNotFound, InvalidGene, InvalidTests

from ..genes.helpers import FORMATTER, write_gene, write_wat_gene
from .conftest import audit_lines


def write_tests(project: Project, gene: str, doc: Any) -> None:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (project.genes_dir / gene / "tests.json").write_text(text)


@pytest.fixture
def fmt(project: Project) -> Project:
    write_gene(project.genes_dir, "fmt", FORMATTER)
    wrap_gene(project, "fmt")
    return project


def agents_in_store(project: Project) -> list[str]:
    with project.open_store() as store:
        return store.agents()


def test_cases_share_one_memory_and_leave_agents_alone(fmt: Project) -> None:
    project = fmt
    Agents(project).create("a", ["fmt"])
    run_agent(project, "a", {"code": "x", "indent": 8})
    with project.open_store() as store:
        before = store.deployer("a").list()
    write_tests(project, "fmt", {"cases": [
        {"name": "fresh memory", "input": {"code": "x"}, "expect": {"formatted": "  x",
                                                                     "indent": 2}},
        {"name": "remember", "input": {"code": "x", "indent": 3}},
        {"name": "recall", "input": {"code": "y"}, "expect": {"formatted": "   y",
                                                               "indent": 3}},
    ]})
    report = run_tests(project, "fmt")
    assert [(c.name, c.passed, c.detail) for c in report.cases] == [
        ("fresh memory", True, "ok"), ("remember", True, "ok"), ("recall", True, "ok")]
    assert report.passed and report.hints == []
    assert agents_in_store(project) == ["a"]
    with project.open_store() as store:
        assert store.deployer("a").list() == before
    dropped = [line for line in audit_lines(project) if line["action"] == "drop_agent"]
    assert len(dropped) == 1 and dropped[0]["agent"].startswith(TEST_AGENT_PREFIX + "fmt:")
    # the temporary memory was written under the gene's own id, in its own agent
    writes = [line for line in audit_lines(project) if line["agent"] == dropped[0]["agent"]]
    assert writes[0]["actor"] == project.load_gene("fmt").v2_id


def test_each_run_starts_empty(fmt: Project) -> None:
    write_tests(fmt, "fmt", [{"input": {"code": "x"}, "expect": {"formatted": "  x", "indent": 2}},
                            {"input": {"code": "x", "indent": 5}}])
    assert run_tests(fmt, "fmt").passed
    assert run_tests(fmt, "fmt").passed
    assert agents_in_store(fmt) == []


def test_failures_are_reported_and_memory_still_dropped(fmt: Project) -> None:
    write_tests(fmt, "fmt", [
        {"name": "wrong", "input": {"code": "x"}, "expect": {"formatted": "x", "indent": 2}},
        {"name": "no code", "input": {"indent": 1}},
        {"name": "want error", "input": {"code": "x"}, "expectError": "INVALID_INPUT"},
        {"name": "bool is not int", "input": {"code": "", "indent": 1},
         "expect": {"formatted": "", "indent": True}},
        {"name": "after failures", "input": {"code": "z"}, "expect": {"formatted": " z",
                                                                      "indent": 1}},
    ])
    report = run_tests(fmt, "fmt")
    assert not report.passed
    results = {c.name: c for c in report.cases}
    assert results["wrong"].detail.startswith('expected {"formatted": "x"')
    assert results["no code"].error is None and results["no code"].passed  # no expect: any output
    assert "expected error INVALID_INPUT, got output" in results["want error"].detail
    assert not results["bool is not int"].passed
    assert results["after failures"].passed
    assert agents_in_store(fmt) == []


def test_expected_errors(project: Project) -> None:
    write_gene(project.genes_dir, "g", (
        "from rotifer.genes.errors import GeneRejected\n"
        "def express(i, ctx):\n"
        "    if i == 'reject': raise GeneRejected('TOO_SHORT', 'short')\n"
        "    if i == 'crash': raise KeyError('k')\n"
        "    if i == 'memory': ctx.memory.delete_memory('none/here')\n"
        "    return i\n"), inputSchema={"type": "string"})
    wrap_gene(project, "g")
    write_tests(project, "g", {"cases": [
        {"input": "reject", "expectError": "TOO_SHORT"},
        {"input": "crash", "expectError": "GENE_FAILED"},
        {"input": "memory", "expectError": "MEMORY_NOT_FOUND"},
        {"input": 3, "expectError": "INVALID_INPUT"},
        {"input": "crash", "expectError": "TOO_SHORT"},
        {"input": "crash"},
    ]})
    report = run_tests(project, "g")
    assert [c.passed for c in report.cases] == [True, True, True, True, False, False]
    assert report.cases[4].detail.startswith("expected error TOO_SHORT, got GENE_FAILED: ")
    assert report.cases[5].detail == report.cases[5].error
    assert report.cases[5].error is not None and "KeyError" in report.cases[5].error


def test_interrupt_still_drops_the_memory(project: Project) -> None:
    # A real SIGINT to rotifer while the gene runs (a KeyboardInterrupt the
    # gene raises itself, or a SIGINT it sends its own process, is its
    # failure, not an interruption: tests/containment/test_hostile_bridge.py).
    write_gene(project.genes_dir, "g", "import time\n\ndef express(i, ctx):\n"
               "    time.sleep(30)\n")
    write_tests(project, "g", [{"input": 1}])
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_tests(project, "g")
    finally:
        timer.cancel()
    assert agents_in_store(project) == []


def test_wasm_gene_under_test(project: Project) -> None:
    write_wat_gene(project.genes_dir, "prefs", "prefs")
    wrap_gene(project, "prefs")
    write_tests(project, "prefs", [{"input": {}, "expect": {"indent": 2}},
                                  {"input": {"indent": 4}, "expect": {"indent": 4}},
                                  {"input": {}, "expect": {"indent": 4}}])
    report = run_tests(project, "prefs")
    assert report.passed, report.cases
    write_wat_gene(project.genes_dir, "rej", "reject")
    write_tests(project, "rej", [{"input": {}, "expectError": "INVALID_INPUT"}])
    assert run_tests(project, "rej").passed


def test_stale_gene_under_test_is_denied_with_a_hint(project: Project) -> None:
    write_gene(project.genes_dir, "fmt", FORMATTER)  # never wrapped
    write_tests(project, "fmt", [{"input": {"code": "x"}, "expectError": "MEMORY_ACCESS_DENIED"}])
    report = run_tests(project, "fmt")
    assert report.passed
    assert report.hints and "rotifer wrap fmt" in report.hints[0]


def test_no_write_tests(project: Project) -> None:
    write_gene(project.genes_dir, "ok", "def express(i, ctx):\n    return i\n")
    report = run_tests(project, "ok")
    assert report.passed and report.cases == []
    assert any("tests.json not found" in h for h in report.hints)
    write_gene(project.genes_dir, "bad", "def express(:\n")
    # refused as `rotifer wrap` refuses it, before any memory is made (issue 36)
    with pytest.raises(InvalidGene, match=r"gene\.py line 1"):
        run_tests(project, "bad")
    assert agents_in_store(project) == []


@pytest.mark.parametrize(("doc", "words"), [
    ("{", "not valid JSON"),
    ("NaN", "not valid JSON"),
    ("3", "must be a list"),
    ({}, "must be a list of cases"),
    ({"cases": [], "x": 1}, "unknown field(s): x"),
    ({"cases": 3}, "must be a list"),
    ([], "has no cases"),
    ([1], "case 1: must be an object"),
    ([{"input": 1}, {"name": "x"}], "case 2: missing field 'input'"),
    ([{"input": 1, "expected": 2}], "unknown field(s): expected"),
    ([{"input": 1, "expect": 1, "expectError": "X"}], "not both"),
    ([{"input": 1, "expectError": 3}], "'expectError' must be an error code"),
    ([{"input": 1, "expectError": ""}], "'expectError' must be an error code"),
    ([{"input": 1, "name": ""}], "'name' must be a non-empty string"),
])
def test_malformed_write_tests(project: Project, doc: Any, words: str) -> None:
    write_gene(project.genes_dir, "g", "def express(i, ctx):\n    return i\n")
    write_tests(project, "g", doc)
    with pytest.raises(InvalidTests) as info:
        run_tests(project, "g")
    assert str(info.value).startswith("INVALID_TESTS: genes/g/tests.json")
    assert words in str(info.value)
    assert not (project.dot / "playground.db").exists()  # refused before any memory exists


def test_missing_gene(project: Project) -> None:
    with pytest.raises(GeneNotFound):
        run_tests(project, "nope")


@pytest.mark.parametrize(("a", "b", "equal"), [
    (1, 1.0, True), (True, 1, False), (0, False, False), ({"a": [1, "x"]}, {"a": [1, "x"]}, True),
    ({"a": 1}, {"a": 1, "b": 2}, False), ([1], [1, 2], False), (None, None, True),
    ("1", 1, False), ([True], [True], True),
])
def test_json_equal(a: Any, b: Any, equal: bool) -> None:
    assert json_equal(a, b) is equal
