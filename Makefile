# Two entry points: `make run` (the main job) and `make test` (the test suite).
# Both create or update the local virtual environment `.venv` first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv run test docs lint clean-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m experiments.run --config experiments/configs/online_ns_tfno.py

# The whole suite, slow tests included, on every core (pytest-xdist; one
# worker per core measured fastest on the 2-core CI machine). The Slurm module
# stays on one worker (`--dist loadgroup`). FAST=1 leaves out the tests marked
# slow; TEST_WORKERS=0 runs in this one process. See CONTRIBUTING.md.
TEST_WORKERS ?= auto
FAST ?=
test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=20 --timeout=900 -n $(TEST_WORKERS) --dist loadgroup \
		$(if $(FAST),-m "not slow")

# Builds the site (executing the tutorials), then checks it as a reader meets
# it: maths typeset, no warnings in tutorial output, nothing loaded from
# another host (docs/check_site.py).
# MPLBACKEND is unset for the build: with it set (CI sets Agg for the tests),
# the notebook kernel does not use its inline backend and every figure is lost.
docs: $(STAMP)
	env -u MPLBACKEND NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	$(BIN)/python docs/check_site.py site

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean-venv:
	rm -rf $(VENV)

# The GPU suite (docs/benchmarks.md, "GPU suite"): both parts, results under GPU_OUT.
GPU_OUT ?= runs/gpu
.PHONY: gpu
gpu: $(STAMP)
	$(BIN)/python -m benchmarks.gpu --part speed --out $(GPU_OUT)/speed
	$(BIN)/python -m benchmarks.gpu --part paper --out $(GPU_OUT)/paper
