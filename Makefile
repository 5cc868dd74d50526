# seqq — run `make help` for targets.
PY ?= .venv/bin/python
VENV := .venv

.PHONY: help venv test lint bench-estimators

help:  ## list targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q "torch==2.13.0" || $(VENV)/bin/pip install -q "torch>=2.1"
	$(VENV)/bin/pip install -q -e ".[dev]"
	touch $@

venv: $(VENV)/.installed  ## create .venv with seqq and its dependencies

test: venv  ## run the test suite
	$(PY) -m pytest

lint: venv  ## ruff
	$(VENV)/bin/ruff check seqq tests scripts

bench-estimators: venv  ## IS / hybrid throughput vs raw LSTM throughput
	$(PY) scripts/bench_estimators.py
