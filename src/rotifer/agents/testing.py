"""``rotifer test``: a gene's cases on an empty, temporary agent memory.

:func:`test_gene` runs the cases of ``genes/GENE/tests.json`` in order, sharing
one empty, temporary agent memory that is dropped afterwards (also when a case
fails or the run is interrupted); it first removes the temporary memories of
test runs that were killed.  (Apart from :mod:`.run` so that ``rotifer agent
run`` does not import it: speed, bench/startup.py.)

``tests.json`` format (either form)::

    {"cases": [{"name": "remembers", "input": {...}, "expect": {...}},
               {"name": "rejects",   "input": 42,    "expectError": "INVALID_INPUT"}]}
    [{"input": {...}, "expect": {...}}, ...]

Each case needs ``input``; ``name`` is optional (default ``case N``);
``expect`` (the exact output, compared as JSON: ``1`` is not ``true``) and
``expectError`` (an error code: the code of a rejection, ``GENE_FAILED``,
``INVALID_INPUT``, or a ``MEMORY_...`` code a gene let escape) are optional
and exclusive; with neither, a case passes when the gene returns any output.
Any other field, an empty case list, or a file that is not JSON is
INVALID_TESTS.  Without a ``tests.json`` the gene is only checked to load and
the report has no cases (and passes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rotifer.genes import jsonvalue
from rotifer.genes.errors import InvalidTests, RotiferError
from rotifer.genes.execute import DEFAULT_DEADLINE_S, express
from rotifer.genes.gene import Gene
from rotifer.memory import AgentMemoryError

from .run import _grant, _note_uncontained, stale_hint
from .scratch import PREFIX, scratch_agent, sweep

if TYPE_CHECKING:
    from rotifer.genes.python import LogSink
    from rotifer.memory import Clock

    from .project import Project

TESTS_FILE = "tests.json"
TEST_AGENT_PREFIX = PREFIX
"""Temporary test agents are ``rotifer-test:GENE:OWNER:<hex>``; ``:`` cannot occur
in an agent name, so a test memory never collides with a real agent's.  OWNER
names the process, so that the next test run can remove the memory of a run
that was killed (see :mod:`rotifer.agents.scratch`)."""

CASE_FIELDS = frozenset({"name", "input", "expect", "expectError"})


@dataclass(frozen=True)
class TestCase:
    __test__ = False  # not a pytest test class
    name: str
    input: Any
    expect: Any = None
    has_expect: bool = False
    expect_error: str | None = None


@dataclass(frozen=True)
class CaseResult:
    """One case: ``detail`` says why it failed ("ok" when it passed)."""

    name: str
    passed: bool
    detail: str
    output: Any = None
    error: str | None = None  # "CODE: message" of the error the case ended with


@dataclass
class TestReport:
    __test__ = False  # not a pytest test class
    gene: str
    cases: list[CaseResult] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cases)


def load_tests(gene: Gene) -> list[TestCase] | None:
    """Parse ``genes/GENE/tests.json`` (None when there is none); INVALID_TESTS if malformed."""
    path = gene.path / TESTS_FILE
    where = f"genes/{gene.name}/{TESTS_FILE}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidTests(f"{where}: cannot read: {exc}") from None
    try:
        doc = jsonvalue.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidTests(f"{where}: not valid JSON: {exc}") from None
    if isinstance(doc, dict):
        extra = sorted(set(doc) - {"cases"})
        if extra or "cases" not in doc:
            raise InvalidTests(f"{where}: must be a list of cases or {{\"cases\": [...]}}"
                               + (f" (unknown field(s): {', '.join(extra)})" if extra else ""))
        doc = doc["cases"]
    if not isinstance(doc, list):
        raise InvalidTests(f"{where}: 'cases' must be a list")
    if not doc:
        raise InvalidTests(f"{where}: has no cases")
    cases: list[TestCase] = []
    for i, raw in enumerate(doc):
        at = f"{where}: case {i + 1}"
        if not isinstance(raw, dict):
            raise InvalidTests(f"{at}: must be an object")
        extra = sorted(set(raw) - CASE_FIELDS)
        if extra:
            raise InvalidTests(f"{at}: unknown field(s): {', '.join(extra)} "
                               f"(allowed: {', '.join(sorted(CASE_FIELDS))})")
        if "input" not in raw:
            raise InvalidTests(f"{at}: missing field 'input'")
        name = raw.get("name", f"case {i + 1}")
        if not isinstance(name, str) or not name:
            raise InvalidTests(f"{at}: 'name' must be a non-empty string")
        if "expect" in raw and "expectError" in raw:
            raise InvalidTests(f"{at}: give 'expect' or 'expectError', not both")
        code = raw.get("expectError")
        if "expectError" in raw and (not isinstance(code, str) or not code):
            raise InvalidTests(f"{at}: 'expectError' must be an error code such as "
                               "\"INVALID_INPUT\"")
        cases.append(TestCase(name=name, input=raw["input"], expect=raw.get("expect"),
                              has_expect="expect" in raw, expect_error=code))
    return cases


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: unlike ``==``, ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _run_case(case: TestCase, call: Callable[[Any], Any]) -> CaseResult:
    try:
        output = call(case.input)
    except (RotiferError, AgentMemoryError) as exc:
        code = str(exc.code.value if hasattr(exc.code, "value") else exc.code)
        error = str(exc)
        if case.expect_error is not None:
            ok = code == case.expect_error
            detail = "ok" if ok else f"expected error {case.expect_error}, got {error}"
            return CaseResult(name=case.name, passed=ok, detail=detail, error=error)
        return CaseResult(name=case.name, passed=False, detail=error, error=error)
    if case.expect_error is not None:
        return CaseResult(
            name=case.name, passed=False,
            detail=f"expected error {case.expect_error}, got output {_dump(output)}",
            output=output)
    if case.has_expect and not json_equal(output, case.expect):
        return CaseResult(name=case.name, passed=False,
                          detail=f"expected {_dump(case.expect)}, got {_dump(output)}",
                          output=output)
    return CaseResult(name=case.name, passed=True, detail="ok", output=output)


def test_gene(project: Project, gene_name: str, *, deadline_s: float = DEFAULT_DEADLINE_S,
              clock: Clock | None = None, log_sink: LogSink | None = None,
              trusted: bool = False) -> TestReport:
    """Run the gene's test cases in order on one empty temporary agent memory
    (``trusted``: uncontained, ``rotifer test --trust``).

    The gene is first loaded as a run does (see :func:`rotifer.genes.execute.check_loads`):
    a gene that cannot load is refused with the error a run gives (INVALID_GENE,
    GENE_FAILED, ...), before any case runs, with or without a ``tests.json``."""
    from rotifer.genes.execute import check_loads

    from .build import check_gene

    gene = project.load_gene(gene_name)
    cases = load_tests(gene)
    report = TestReport(gene=gene.name)
    _note_uncontained([gene], lambda _: _grant(trusted), report.hints, "--trust")
    if gene.v2_id is None:
        report.hints.append(stale_hint(gene, project.registry()))
    check_gene(gene)  # as `rotifer wrap` checks it: the same refusals, in the same order
    check_loads(gene, deadline_s=deadline_s, cache_dir=project.cache_dir, log_sink=log_sink,
                grant=_grant(trusted))
    if cases is None:
        report.hints.append(f"genes/{gene.name}/{TESTS_FILE} not found: only checked that the "
                            "gene loads")
        return report
    agent = scratch_agent(gene.name)
    store = project.open_store(None, clock)
    try:
        swept = sweep(store)
        if swept:
            report.hints.append(
                f"removed {len(swept)} temporary test "
                f"{'memory' if len(swept) == 1 else 'memories'} left by test runs that were "
                "killed")
        store.create_agent(agent)
        try:
            def call(value: Any) -> Any:
                memory = store.for_gene(agent, gene.v2_id, gene.domain)
                return express(gene, value, memory, deadline_s=deadline_s,
                               cache_dir=project.cache_dir, agent=agent,
                               log_sink=log_sink, grant=_grant(trusted))

            for case in cases:
                report.cases.append(_run_case(case, call))
        finally:
            store.drop_agent(agent)
    finally:
        store.close()
    return report


test_gene.__test__ = False  # type: ignore[attr-defined]  # not a pytest test

__all__ = [
    "CASE_FIELDS",
    "TESTS_FILE",
    "TEST_AGENT_PREFIX",
    "CaseResult",
    "TestCase",
    "TestReport",
    "json_equal",
    "load_tests",
    "test_gene",
]
