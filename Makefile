# The two front-door commands: `make demo` and `make test` (see README.md).
# Everything runs from a project-local virtual environment, created on demand.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Two workers: the CI machines have two cores.
PYTEST_WORKERS ?= 2

.PHONY: install demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash examples/formatter/demo.sh

lint: install
	$(VENV)/bin/ruff check src tests $(wildcard bench scripts)

typecheck: install
	$(VENV)/bin/mypy

pytest: install
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q

test: lint typecheck pytest

bench: install
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
