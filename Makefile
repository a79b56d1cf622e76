# vibethinker: the two front doors are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint format bench clean

install: $(STAMP)

# Re-install only when the package metadata or the pins change.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt torch==2.13.0
	$(PIP) install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: install
	$(VENV)/bin/vibethinker run recipes/tiny.yaml

test: install
	$(PY) -m pytest -q tests

test-fast: install
	$(PY) -m pytest -q -m "not slow" tests

lint: install
	$(VENV)/bin/ruff format --check vibethinker tests benchmarks scripts
	$(VENV)/bin/ruff check vibethinker tests benchmarks scripts

format: install
	$(VENV)/bin/ruff format vibethinker tests benchmarks scripts
	$(VENV)/bin/ruff check --fix vibethinker tests benchmarks scripts

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) runs .pytest_cache
