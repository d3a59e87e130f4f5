# The two front-door commands: `make demo` and `make test` (see README.md).
# Everything runs from a project-local virtual environment, created on demand.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Two workers: the CI machines have two cores.
PYTEST_WORKERS ?= 2

.PHONY: install node-deps demo test lint typecheck pytest bench clean

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

bench: install
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m bench

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis
