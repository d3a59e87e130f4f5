"""Running genes: in an agent, alone, and under test.

- :func:`run_agent` -- ``rotifer agent run``: the agent's genes in its
  composition, each gene acting on the agent's memory under its own v2 id.
- :func:`run_gene` -- ``rotifer run``: the gene alone; its memory is a
  :class:`rotifer.memory.DeniedMemory`, so every call is refused with
  MEMORY_ACCESS_DENIED and recorded in the audit log.
- :func:`test_gene` -- ``rotifer test``: the cases of ``genes/GENE/tests.json``
  in order, sharing one empty, temporary agent memory that is dropped
  afterwards (also when a case fails or the run is interrupted); it first
  removes the temporary memories of test runs that were killed.

Hints.  A gene whose current content was never wrapped or compiled has no v2
id; its memory calls are refused (MEMORY_ACCESS_DENIED, audited).  The runner
then produces a hint that tells the two cases apart (see
:func:`rotifer.genes.gene.unregistered`): ``gene 'fmt' changed since it was
last wrapped, so its memory calls are refused: run `rotifer wrap fmt` again``,
or ``gene 'fmt' was never wrapped, ...: run `rotifer wrap fmt```
(``compile`` for a gene with a ``gene.wat``).  Pass a list as ``hints=`` to collect
the hints (the CLI prints them on stderr as it likes); with ``hints=None`` they
are written to stderr as ``hint: ...`` so they are never lost.

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
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rotifer.genes import jsonvalue
from rotifer.genes.contain.sandbox import CONTAINED, Grant
from rotifer.genes.errors import InvalidTests, RotiferError
from rotifer.genes.execute import DEFAULT_DEADLINE_S, express
from rotifer.genes.gene import Gene, unregistered
from rotifer.genes.python import LogSink
from rotifer.memory import AgentMemoryError, DeniedMemory, GeneMemoryAccess

from .compositions import run_composition
from .genome import Agents
from .project import Project, require_memory
from .scratch import PREFIX, scratch_agent, sweep

if TYPE_CHECKING:
    from rotifer.genes.registry import Registry
    from rotifer.memory import Clock

TESTS_FILE = "tests.json"
TEST_AGENT_PREFIX = PREFIX
"""Temporary test agents are ``rotifer-test:GENE:OWNER:<hex>``; ``:`` cannot occur
in an agent name, so a test memory never collides with a real agent's.  OWNER
names the process, so that the next test run can remove the memory of a run
that was killed (see :mod:`rotifer.agents.scratch`)."""

CASE_FIELDS = frozenset({"name", "input", "expect", "expectError"})


# -- hints ----------------------------------------------------------------------


def stale_hint(gene: Gene, registry: Registry) -> str:
    what, command = unregistered(gene, registry)
    return f"gene '{gene.name}' {what}, so its memory calls are refused: run {command}"


def _emit(hints: list[str] | None, text: str) -> None:
    if hints is None:
        print(f"hint: {text}", file=sys.stderr)
    else:
        hints.append(text)


def _note_uncontained(genes: list[Gene], grant_of: Callable[[str], Grant],
                      hints: list[str] | None, why: str) -> None:
    """Once per run and gene: a trusted Python or Node gene runs uncontained."""
    for name in dict.fromkeys(g.name for g in genes if g.kind in ("python", "node")
                              and grant_of(g.name).trusted):
        _emit(hints, f"gene '{name}' runs uncontained ({why}): it can reach everything "
              "this process can")


def _stale(genes: list[Gene], registry: Registry, hints: list[str] | None) -> None:
    seen: set[str] = set()
    for gene in genes:
        if gene.v2_id is None and gene.name not in seen:
            seen.add(gene.name)
            _emit(hints, stale_hint(gene, registry))


# -- agents ---------------------------------------------------------------------


def run_agent(project: Project, name: str, input: Any, *, hints: list[str] | None = None,
              deadline_s: float = DEFAULT_DEADLINE_S, clock: Clock | None = None,
              log_sink: LogSink | None = None) -> Any:
    """Run agent ``name`` on ``input``; return its output.

    Errors: AGENT_NOT_FOUND, GENE_NOT_FOUND (a gene was removed since), the
    gene errors (GeneRejected, GeneFailed, INVALID_INPUT, GENE_UNAVAILABLE) and
    any MemoryError a Python gene let escape.
    """
    spec = Agents(project).get(name)
    genes = [project.load_gene(g) for g in spec.genes]
    _stale(genes, project.registry(), hints)
    grant_of = spec.containment.grant
    _note_uncontained(genes, grant_of, hints, f"trusted by agent '{name}'")
    # The agent's memory must exist: a run never creates or repairs its store.
    store = project.open_store(name, clock, create=False)
    try:
        require_memory(store, name, project)

        def memory_for(gene: Gene) -> GeneMemoryAccess:
            return store.for_gene(name, gene.v2_id, gene.domain)

        def runner(gene: Gene, value: Any, memory: GeneMemoryAccess) -> Any:
            return express(gene, value, memory, deadline_s=deadline_s,
                           cache_dir=project.cache_dir, agent=name,
                           log_sink=log_sink, grant=grant_of(gene.name))

        return run_composition(spec.composition, genes, input, memory_for, runner)
    finally:
        store.close()


# -- a gene alone ---------------------------------------------------------------


def denied_memory(project: Project, gene: Gene) -> DeniedMemory:
    """What ``rotifer run`` gives a gene: refuses every call, audited in the project."""
    from rotifer.memory import AuditLog

    return DeniedMemory(
        "memory calls only work when the gene runs as part of an agent (`rotifer run` runs "
        "it alone; use `rotifer test` or `rotifer agent run`)",
        audit=AuditLog(project.dot / "audit.jsonl", project.dot / "telemetry.jsonl"),
        actor=gene.v2_id,
    )


def _grant(trusted: bool) -> Grant:
    return Grant(trusted=True) if trusted else CONTAINED


def run_gene(project: Project, gene_name: str, input: Any, *,
             deadline_s: float = DEFAULT_DEADLINE_S, log_sink: LogSink | None = None,
             trusted: bool = False, hints: list[str] | None = None) -> Any:
    """Run one gene on ``input`` outside any agent (every memory call refused);
    ``trusted``: uncontained (``rotifer run --trust``)."""
    gene = project.load_gene(gene_name)
    _note_uncontained([gene], lambda _: _grant(trusted), hints, "--trust")
    return express(gene, input, denied_memory(project, gene), deadline_s=deadline_s,
                   cache_dir=project.cache_dir, agent=None, log_sink=log_sink,
                   grant=_grant(trusted))


# -- tests ----------------------------------------------------------------------


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
            return CaseResult(case.name, ok, detail, error=error)
        return CaseResult(case.name, False, error, error=error)
    if case.expect_error is not None:
        return CaseResult(case.name, False,
                          f"expected error {case.expect_error}, got output {_dump(output)}",
                          output=output)
    if case.has_expect and not json_equal(output, case.expect):
        return CaseResult(case.name, False,
                          f"expected {_dump(case.expect)}, got {_dump(output)}", output=output)
    return CaseResult(case.name, True, "ok", output=output)


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
    "CaseResult",
    "TestReport",
    "load_tests",
    "run_agent",
    "run_gene",
    "stale_hint",
    "test_gene",
]
