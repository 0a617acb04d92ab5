# loaderbench: every target sets up .venv first if it is missing or older than pyproject.toml.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.14.1
TORCHVISION_VERSION ?= 0.29.1
STUDY ?= quick
RESULTS ?= results
FIGURES ?= figures
FORMATS ?= png
CLUSTER ?= slurm
PYTEST_ARGS ?=
# pytest-xdist workers for `make test`: half again as many as the CPUs this process may use (2 on 1, 3 on 2). The
# suite waits for much of its time (Slurm jobs in other processes, sleeping cells and workers, the doctor's known
# sleeps, fresh interpreters starting), so a worker per CPU leaves CPUs idle; `make test-stress` runs the same
# xdist workers for make test: one per CPU; more overlap the Slurm tests' waits but starve the load-sensitive tests
TEST_WORKERS ?= auto
RUN_ARGS ?=
BENCH_ARGS ?=
TUNE_ARGS ?=

.PHONY: setup local run tune figures check test test-stress storage-tools report-tools bench submit status clean
.DEFAULT_GOAL := local

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==$(TORCH_VERSION) torchvision==$(TORCHVISION_VERSION)
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

setup: $(VENV)/.installed  ## create .venv and install torch, the project and its dev tools

local: setup  ## run STUDY here, then draw the figures of everything under RESULTS (fails if a cell failed)
	$(PY) -m loaderbench run "$(STUDY)" --results "$(RESULTS)" $(RUN_ARGS); rc=$$?; \
	$(PY) -m loaderbench.analysis "$(RESULTS)" --figures "$(FIGURES)" --formats "$(FORMATS)" && exit $$rc

run: setup  ## run STUDY here without drawing (RUN_ARGS="-k PATTERN --no-retry-failed")
	$(PY) -m loaderbench run "$(STUDY)" --results "$(RESULTS)" $(RUN_ARGS)

tune: setup  ## the best DataLoader settings of STUDY's matrix without the full grid (TUNE_ARGS="--max-memory-mb 4096")
	$(PY) -m loaderbench tune "$(STUDY)" --results "$(RESULTS)" $(TUNE_ARGS)

figures: setup  ## figures, tables and the report from every record under RESULTS (CLUSTER=x: that profile's; FORMATS=png,pdf,svg)
	$(PY) -m loaderbench figures $(if $(filter command line environment,$(origin RESULTS)),"$(RESULTS)",$(if $(filter command line,$(origin CLUSTER)),--cluster "slurm/$(CLUSTER).toml","$(RESULTS)")) --figures "$(FIGURES)" --formats "$(FORMATS)"

check: setup  ## static checks: the import layers (import-linter), lint and format (ruff), types (mypy)
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy

test: setup storage-tools report-tools check  ## the static checks, then the test suite in parallel
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# nginx and iproute2 for storage = "http" cells and their tests; exit 75 (no package archive) and 77 (not root)
# leave the tests to say what is missing
storage-tools:  ## install nginx and iproute2 when missing (Debian; needs root)
	@bash tools/install-storage-tools.sh || { rc=$$?; if [ $$rc = 75 ] || [ $$rc = 77 ]; then \
		echo "storage-tools: nginx/iproute2 not installed (exit $$rc); the storage tests will say so" >&2; \
		else exit $$rc; fi; }

# chromium, headless, for the test that opens the report in a browser; exit 75 and 77 as above
report-tools:  ## install chromium when missing (Debian; needs root)
	@bash tools/install-report-tools.sh || { rc=$$?; if [ $$rc = 75 ] || [ $$rc = 77 ]; then \
		echo "report-tools: chromium not installed (exit $$rc); the browser test will say so" >&2; \
		else exit $$rc; fi; }

test-stress: setup storage-tools  ## the suite STRESS_RUNS times (default 5) beside two CPU hogs; not part of test or CI
	PY=$(PY) PYTEST_ARGS="$(PYTEST_ARGS)" TEST_WORKERS=$(TEST_WORKERS) tests/stress.sh

bench: setup  ## benchmarks of the suite itself (BENCH_ARGS=--quick shortens them)
	$(PY) -m loaderbench.bench --out $(RESULTS)/bench.json $(BENCH_ARGS)

clean:  ## remove results (all but the shipped results/reference), figures and caches
	if [ -d "$(RESULTS)" ]; then find "$(RESULTS)" -mindepth 1 -maxdepth 1 ! -name reference -exec rm -rf {} +; fi
	rm -rf $(FIGURES) .cache .pytest_cache

-include slurm/slurm.mk containers/containers.mk
