# clustermgr-lab developer and CI entry points.
#
#   make lab      build + install into .venv (only what changed since the last install), then start JupyterLab on
#                 127.0.0.1; REBUILD=1 installs and builds everything again
#   make test     everything CI runs: the wheel check, Python tests, then the galata UI tests; fails if the run leaves
#                 anything running
#   make test-stress  the suites N times under CPU load (flake guard; not part of make test)
#
# Needs only python3 (3.10+), Node.js 20 and, for the UI tests, Debian's
# chromium (installed with apt-get when missing). Never downloads browsers.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= $(CURDIR)/.venv
VENV_PY := $(VENV)/bin/python
CHROMIUM ?= /usr/bin/chromium
LABEXT_LINK := $(VENV)/share/jupyter/labextensions/clustermgr-lab
LAB_PORT ?= 8888
# dask-labextension, for the side-by-side benchmark rows, in a venv of its own (pip, from PyPI).
LABEXT_VENV := $(CURDIR)/.venv-labext
LABEXT_VERSION ?= 7.0.0
# apt-get needs root; use sudo when not running as root.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Single-node SLURM (tests/test_slurm.py, ...) and Grid Engine (tests/test_hpc.py): `ci/services.sh start`
# starts what is not running (~15-30 s the first time); `stop`, at the end of the run (pass or fail), stops
# only what this run started, so a developer's running SLURM or Grid Engine is left alone. KEEP_SERVICES=1
# keeps even those.
# CLUSTERMGR_HUB=1 (make test, make ui-test): also a JupyterHub with two system users (ci/hub/start-hub.sh), per run.
SERVICES := $(SUDO) env CLUSTERMGR_HUB="$${CLUSTERMGR_HUB:-0}" CLUSTERMGR_TEST_RUN="$$CLUSTERMGR_TEST_RUN" bash $(CURDIR)/ci/services.sh
# One folder per test run: what services it started, pytest's temporary folders (and so the clusters' work folders).
TEST_RUNS ?= /tmp/clustermgr-test-runs
# pytest-xdist: 3 workers on 2 cores (most tests wait on processes they start: 9.1 min against 11.1 with 2); the
# tests of one group (conftest.py: SLURM, Grid Engine, SSH, the test bed) on one worker.
PYTEST_WORKERS ?= 3
PYTEST_ARGS ?= -n $(PYTEST_WORKERS) --dist loadgroup
# make test-stress: runs of each suite, and busy CPU workers of the load (stress-ng --cpu).
STRESS_RUNS ?= 3
STRESS_CPUS ?= 4

export PATH := $(VENV)/bin:$(PATH)
export VIRTUAL_ENV := $(VENV)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help venv install build lab test test-stress pytest ui-test chromium sshd clean bench lint lint-deps ts-test wheel-check

help:
	@echo "make lab     - install into .venv (what changed; REBUILD=1: all) and start JupyterLab (127.0.0.1:$(LAB_PORT))"
	@echo "make test    - install, lint, TypeScript unit tests, pytest, then the galata UI tests"
	@echo "make install - create/update .venv and install the package (editable, with test extras)"
	@echo "make build   - rebuild the frontend (jlpm build) after an install"
	@echo "make pytest / make ui-test - run one test suite"
	@echo "make lint    - ruff (lint + format check), prettier --check, eslint; bash ci/lint-fix.sh fixes what it can"
	@echo "make ts-test - the TypeScript unit and parity tests (jest)"
	@echo "make wheel-check - build sdist + wheel, install the wheel in a clean venv without Node, use it"
	@echo "make test-stress - both suites STRESS_RUNS (3) times under CPU load: a table of test -> failures"
	@echo "make bench   - benchmarks/results/<date>.json + .png: targets, side by side with dask-labextension"
	@echo "make clean   - remove build outputs (keeps .venv)"

# --- environment -------------------------------------------------------------

$(VENV_PY):
	@if ! $(PYTHON) -m venv "$(VENV)"; then \
	  echo "python3 -m venv failed; installing python3-venv with apt-get"; \
	  rm -rf "$(VENV)"; \
	  $(SUDO) apt-get update && $(SUDO) apt-get install -y python3-venv; \
	  $(PYTHON) -m venv "$(VENV)"; \
	fi
	"$(VENV_PY)" -m pip install --upgrade pip

venv: $(VENV_PY)

# Editable install, redone only for what changed since the last one (stamp files in the venv, so a new venv
# or a fresh clone installs everything; REBUILD=1 forces it):
#  - pip install -e ".[test]" when the package's metadata changed (pyproject.toml, package.json, install.json,
#    jupyter-config/); it also builds the frontend, through hatch-jupyter-builder (jlpm install + jlpm build in
#    an isolated build environment that has jupyterlab);
#  - jlpm build alone when only the frontend's sources changed (src/, style/, schema/, tsconfig.json, yarn.lock);
#  - jupyter labextension develop only when the link to the built frontend is missing or points elsewhere.
STAMPS := $(VENV)/.clustermgr-stamps
PIP_STAMP := $(STAMPS)/pip
BUILD_STAMP := $(STAMPS)/frontend
PIP_INPUTS := pyproject.toml package.json install.json $(shell find jupyter-config -type f 2>/dev/null)
FRONTEND_INPUTS := $(shell find src style schema -type f 2>/dev/null) tsconfig.json yarn.lock

install: venv
ifeq ($(REBUILD),1)
	rm -rf "$(STAMPS)"
endif
	@# a cleaned or never-built frontend (make clean) is built again
	@[ -f clustermgr_lab/labextension/package.json ] || rm -f "$(PIP_STAMP)" "$(BUILD_STAMP)"
	@# two runs of make: the second sees the frontend stamp that pip's install left
	@"$(MAKE)" --no-print-directory "$(PIP_STAMP)"
	@"$(MAKE)" --no-print-directory "$(BUILD_STAMP)"
	@# Link, not copy, the built frontend: a copy goes stale at the next `jlpm build`.
	@if [ "$$(readlink -f "$(LABEXT_LINK)")" != "$(CURDIR)/clustermgr_lab/labextension" ]; then \
	  jupyter labextension develop . --overwrite && jupyter labextension list 2>&1 | grep "clustermgr-lab"; \
	fi

$(PIP_STAMP): $(PIP_INPUTS) | $(VENV_PY)
	@# pip must not write the labextension's shared data through the link that `develop` made
	@# last time (it would land in clustermgr_lab/labextension and break the next build).
	if [ -L "$(LABEXT_LINK)" ]; then rm "$(LABEXT_LINK)"; fi
	rm -f clustermgr_lab/labextension/install.json
	"$(VENV_PY)" -m pip install -e ".[test]"
	mkdir -p "$(STAMPS)"
	touch "$@"
	@# pip built the frontend too: stamped after the pip stamp, so it is not built again
	touch "$(BUILD_STAMP)"

$(BUILD_STAMP): $(FRONTEND_INPUTS) | $(PIP_STAMP)
	[ -d node_modules ] || jlpm install
	jlpm build
	touch "$@"

build: venv
	jlpm install
	jlpm build

# --- running -----------------------------------------------------------------

# Nothing changed since the last install: JupyterLab answers within seconds (make checks the stamps only).
lab: install
	jupyter lab --ip=127.0.0.1 --port=$(LAB_PORT) --allow-root --no-browser

# --- tests -------------------------------------------------------------------

chromium:
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  echo "installing Debian chromium"; \
	  $(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi
	@"$(CHROMIUM)" --version 2>/dev/null | grep -v "unexpected operator" || true

# Debian's openssh-server for tests/test_ssh.py, which starts and stops a private sshd of its own.
sshd:
	$(SUDO) bash ci/sshd/install-openssh-server.sh

# $(1): commands to run with the services up, as one test run. CLUSTERMGR_TEST_RUN names the run: every process
# it starts inherits it, and ci/check-leftovers.sh finds by it what is left. At the end, pass or fail: stop the
# services this run started, then fail the run if anything it started still runs (process, daemon, job, namespace).
define with_services
	export CLUSTERMGR_TEST_RUN="$$(date +%Y%m%d-%H%M%S)-$$$$"; run_dir="$(TEST_RUNS)/$$CLUSTERMGR_TEST_RUN"; \
	export CLUSTERMGR_TEST_RUN_DIR="$$run_dir"; \
	bash $(CURDIR)/ci/check-leftovers.sh snapshot "$$run_dir"; \
	trap 'rc=$$?; $(SERVICES) stop "$$run_dir" || rc=1; bash $(CURDIR)/ci/check-leftovers.sh check "$$run_dir" || rc=1; exit $$rc' EXIT; \
	$(SERVICES) start "$$run_dir"; \
	$(1)
endef
RUN_PYTEST = "$(VENV_PY)" -m pytest $(PYTEST_ARGS) --basetemp="$$run_dir/pytest"
# The package as shipped (ci/wheel-check.sh, ~3-4 min): sdist + wheel, the wheel in a clean venv on a PATH without
# Node.js, pip check, the extension lists, a server that creates and deletes a cluster.
WHEEL_CHECK = BUILD_PYTHON="$(VENV_PY)" bash $(CURDIR)/ci/wheel-check.sh
# The UI tests start their own JupyterLab on a free port of 127.0.0.1 (CI=1: never reuse a running one).
# SLURM stays up for the UI tests too (tests/hpc.spec.ts creates a SLURM cluster through the sidebar).
# UI_TEST_SHARDS Playwright processes side by side, each with a server of its own (ci/ui_shards.py).
UI_TEST_SHARDS ?= 2
RUN_UI_TESTS = CHROMIUM_PATH="$(CHROMIUM)" "$(VENV_PY)" $(CURDIR)/ci/ui_shards.py --shards $(UI_TEST_SHARDS)
# The two-user test through the run's JupyterHub (ui-tests/hub/, playwright-hub.config.js; needs CLUSTERMGR_HUB=1).
RUN_HUB_TESTS = cd $(CURDIR)/ui-tests && CI=1 CHROMIUM_PATH="$(CHROMIUM)" jlpm playwright test -c playwright-hub.config.js

pytest: sshd install
	$(call with_services,$(RUN_PYTEST))

ui-test: chromium install
	cd ui-tests && jlpm install
	export CLUSTERMGR_HUB=1; $(call with_services,$(RUN_UI_TESTS); $(RUN_HUB_TESTS))

# --- lint and TypeScript unit tests (`make test` runs both first: fast fail) -------

# What they need when run alone: ruff (the `test` extras), jlpm (jupyterlab) and the root node_modules.
lint-deps: venv
	@[ -x "$(VENV)/bin/ruff" ] && [ -x "$(VENV)/bin/jlpm" ] || "$(MAKE)" install
	jlpm install

# Every check runs, so one run lists all there is to fix; the target fails if any failed.
lint: lint-deps
	status=0; \
	  ruff check --output-format concise . || status=1; \
	  ruff format --check --output-format concise . || status=1; \
	  jlpm prettier:check || status=1; \
	  jlpm eslint:check || status=1; \
	  jlpm types:check || status=1; \
	  exit $$status

ts-test: lint-deps
	jlpm test

# One run for both suites: the services are started once, and stopped at the end, pass or fail.
# Lint and the TypeScript unit tests first: they fail fast.
test: install lint ts-test chromium sshd
	cd ui-tests && jlpm install
	export CLUSTERMGR_HUB=1; $(call with_services,$(WHEEL_CHECK); $(RUN_PYTEST); $(RUN_UI_TESTS); $(RUN_HUB_TESTS))

wheel-check: install
	$(call with_services,$(WHEEL_CHECK))

# Flake guard (not part of `make test`): both suites STRESS_RUNS times under a CPU load it starts and stops
# (stress-ng --cpu STRESS_CPUS), then a table of test -> failures. Services as for `make test`.
test-stress: chromium sshd install
	cd ui-tests && jlpm install
	command -v stress-ng > /dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng || true
	SUDO="$(SUDO)" CHROMIUM_PATH="$(CHROMIUM)" STRESS_PYTEST_ARGS="$(PYTEST_ARGS) -q -p no:cacheprovider" \
	  "$(VENV_PY)" ci/stress.py --runs $(STRESS_RUNS) --cpus $(STRESS_CPUS)

# --- benchmarks (not part of `make test`; the test suite runs only bench.py --smoke) ----

bench: install
	"$(VENV_PY)" -m pip install --quiet matplotlib
	if [ ! -x "$(LABEXT_VENV)/bin/python" ]; then $(PYTHON) -m venv "$(LABEXT_VENV)"; fi
	"$(LABEXT_VENV)/bin/python" -m pip install --quiet "dask-labextension==$(LABEXT_VERSION)"
	# rfc3987 (GPL) in a folder of its own, for one reference row only: the restart without jupyter_server's
	# upstream import cost (jupyter_server#1559). It is never installed into the venv or required by the wheel.
	"$(VENV_PY)" -m pip install --quiet --upgrade --target .bench-rfc3987 rfc3987
	"$(VENV_PY)" benchmarks/bench.py --repeat 5 --labext-python "$(LABEXT_VENV)/bin/python" --rfc3987-path .bench-rfc3987

clean:
	rm -rf lib tsconfig.tsbuildinfo clustermgr_lab/labextension clustermgr_lab/_version.py \
	  ui-tests/test-results* ui-tests/playwright-report*
