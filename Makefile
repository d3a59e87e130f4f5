# The two front-door commands: `make demo` and `make test` (see README.md).
# Everything runs from a project-local virtual environment, created on demand.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Two workers: the CI machines have two cores.
PYTEST_WORKERS ?= 2

.PHONY: install node-deps demo test test-slow lint typecheck pytest bench bench-quick reliability reliability-report clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
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

pytest: install node-deps
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q

test: lint typecheck pytest

# The long runs (@pytest.mark.slow; `make test` leaves them out), e.g. the
# many-worker PostgreSQL load test for minutes, directly and through pgbouncer.
test-slow: install node-deps
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q -m slow

bench: install
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m bench

bench-quick: install
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m bench --quick

# The fault and attack suite alone (make test runs it too), and the table in
# docs/reliability.md regenerated from a run of it.
reliability: install node-deps
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q tests/reliability

reliability-report: install node-deps
	$(PY) scripts/reliability_report.py

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis
