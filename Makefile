# vibethinker: the two front doors are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint format bench mutate clean

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

# Mutation testing of the core (tens of minutes; not in CI). Runs in a copy under /tmp, never in
# this tree; the per-module table goes to docs/MUTATION.md by hand. TARGETS="algo.losses" for one.
mutate: install
	$(PY) scripts/mutate.py $(TARGETS) --json runs/mutation.json

clean:
	rm -rf $(VENV) runs .pytest_cache
