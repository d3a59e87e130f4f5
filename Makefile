# The two front-door commands: `make demo` and `make test` (see README.md).
# Everything runs from a project-local virtual environment, created on demand.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Two workers: the CI machines have two cores.
PYTEST_WORKERS ?= 2

.PHONY: constraints install node-deps demo test test-slow test-langgraph-suites lint typecheck pytest bench bench-quick reliability reliability-report clean

# Every install takes the exact versions in constraints.txt (`make constraints`
# refreshes it), so a new release of a dependency never changes what CI tests.
PIP_INSTALL := $(PY) -m pip install --quiet -c constraints.txt

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) -e '.[dev,console,langgraph,mcp]'
	touch $(STAMP)

install: $(STAMP)

# The pinned typescript package that TypeScript genes are stripped with
# (package-lock.json); JavaScript genes need only node.
NODE_STAMP := node_modules/.installed
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

node-deps: $(NODE_STAMP)

demo: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash examples/formatter/demo.sh

lint: install
	$(VENV)/bin/ruff check src tests $(wildcard bench scripts)

typecheck: install
	$(VENV)/bin/mypy

# --durations=25: every run ends with its 25 slowest tests, so a test that
# makes the suite slower is seen the day it lands (make test must stay < ~10 min).
pytest: install node-deps
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q --durations=25

test: lint typecheck pytest

# The long runs (@pytest.mark.slow; `make test` leaves them out), e.g. the
# many-worker PostgreSQL load test for minutes, directly and through pgbouncer.
test-slow: install node-deps test-langgraph-suites
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q -m slow

# LangGraph's own store test suites (langgraph-checkpoint, langgraph-checkpoint-sqlite,
# langgraph-checkpoint-postgres; sync and async) against RotiferStore on rotifer's SQLite and PostgreSQL memory, the
# store's construction the only change (scripts/langgraph_suites.py; fetches the pinned
# source distributions with pip once, into .cache/).
test-langgraph-suites: install
	$(PY) scripts/langgraph_suites.py

bench: install
	$(PIP_INSTALL) -e '.[dev,console,langgraph,mcp,bench]'
	$(PY) -m bench

# A short run writes a copy (bench/results/, untracked), never the tracked
# docs/benchmarks.md, whose figures are the full run's.
bench-quick: install
	$(PIP_INSTALL) -e '.[dev,console,langgraph,mcp,bench]'
	mkdir -p bench/results && cp docs/benchmarks.md bench/results/benchmarks-quick.md
	$(PY) -m bench --quick --out bench/results/benchmarks-quick.md
	@echo "bench-quick: figures in bench/results/benchmarks-quick.md (docs/benchmarks.md unchanged)"

# The fault and attack suite alone (make test runs it too), and the table in
# docs/reliability.md regenerated from a run of it.
reliability: install node-deps
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q tests/reliability

reliability-report: install node-deps
	$(PY) scripts/reliability_report.py

# Re-resolve every extra in a throwaway venv at the newest versions pyproject.toml
# allows and write them to constraints.txt; review the diff, run make test, commit.
constraints:
	rm -rf .venv-constraints
	$(PYTHON) -m venv .venv-constraints
	.venv-constraints/bin/python -m pip install --quiet --upgrade pip
	.venv-constraints/bin/python -m pip install --quiet -e '.[dev,console,langgraph,mcp,bench]'
	{ sed -n '1,/^# Refresh/p' constraints.txt; \
	  .venv-constraints/bin/python -m pip freeze --exclude-editable | grep -v '^-e'; } > constraints.new
	mv constraints.new constraints.txt
	rm -rf .venv-constraints

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis
