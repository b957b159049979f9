# clustermgr-lab developer and CI entry points.
#
#   make lab      build + install into .venv, then start JupyterLab on 127.0.0.1
#   make test     everything CI runs: Python tests, then the galata UI tests
#
# Needs only python3 (3.10+), Node.js 20 and, for the UI tests, Debian's
# chromium (installed with apt-get when missing). Never downloads browsers.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := $(CURDIR)/.venv
VENV_PY := $(VENV)/bin/python
CHROMIUM ?= /usr/bin/chromium
LABEXT_LINK := $(VENV)/share/jupyter/labextensions/clustermgr-lab
LAB_PORT ?= 8888
# dask-labextension, for the side-by-side benchmark rows, in a venv of its own (pip, from PyPI).
LABEXT_VENV := $(CURDIR)/.venv-labext
LABEXT_VERSION ?= 7.0.0
# apt-get needs root; use sudo when not running as root.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Single-node SLURM for tests/test_slurm.py: started before pytest, stopped after (pass or fail).
SLURM_START := $(SUDO) bash $(CURDIR)/ci/slurm/start-slurm.sh
SLURM_STOP := $(SUDO) bash $(CURDIR)/ci/slurm/stop-slurm.sh
# Single-node Grid Engine for the `sge` backend's test (tests/test_hpc.py): ~15-30 s the first time.
GRIDENGINE_START := $(SUDO) bash $(CURDIR)/ci/gridengine/start-gridengine.sh

export PATH := $(VENV)/bin:$(PATH)
export VIRTUAL_ENV := $(VENV)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help venv install build lab test pytest ui-test chromium sshd clean bench lint lint-deps ts-test

help:
	@echo "make lab     - install into .venv and start JupyterLab (127.0.0.1:$(LAB_PORT))"
	@echo "make test    - install, lint, TypeScript unit tests, pytest, then the galata UI tests"
	@echo "make install - create/update .venv and install the package (editable, with test extras)"
	@echo "make build   - rebuild the frontend (jlpm build) after an install"
	@echo "make pytest / make ui-test - run one test suite"
	@echo "make lint    - ruff (lint + format check), prettier --check, eslint; bash ci/lint-fix.sh fixes what it can"
	@echo "make ts-test - the TypeScript unit and parity tests (jest)"
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

# Editable install. Builds the frontend through hatch-jupyter-builder (jlpm
# install + jlpm build in an isolated build environment that has jupyterlab).
install: venv
	@# pip must not write the labextension's shared data through the link that `develop` made
	@# last time (it would land in clustermgr_lab/labextension and break the next build).
	if [ -L "$(LABEXT_LINK)" ]; then rm "$(LABEXT_LINK)"; fi
	rm -f clustermgr_lab/labextension/install.json
	"$(VENV_PY)" -m pip install -e ".[test]"
	@# Link, not copy, the built frontend: a copy goes stale at the next `jlpm build`.
	jupyter labextension develop . --overwrite
	jupyter labextension list 2>&1 | grep "clustermgr-lab"

build: venv
	jlpm install
	jlpm build

# --- running -----------------------------------------------------------------

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

define run_pytest
	trap '$(SLURM_STOP)' EXIT; $(SLURM_START); $(GRIDENGINE_START); "$(VENV_PY)" -m pytest
endef

pytest: sshd install
	$(run_pytest)

# The UI tests start their own JupyterLab on 127.0.0.1:$(LAB_PORT) (CI=1: never
# reuse a running one).
# SLURM stays up for the UI tests too (tests/hpc.spec.ts creates a SLURM cluster through the sidebar).
define run_ui_tests
	cd ui-tests && jlpm install
	trap '$(SLURM_STOP)' EXIT; $(SLURM_START); cd ui-tests && CI=1 CHROMIUM_PATH="$(CHROMIUM)" jlpm playwright test
endef

ui-test: chromium install
	$(run_ui_tests)

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
	  exit $$status

ts-test: lint-deps
	jlpm test

# One shell for both suites, so SLURM is started once and stopped at the end, pass or fail.
test: install lint ts-test chromium sshd
	cd ui-tests && jlpm install
	trap '$(SLURM_STOP)' EXIT; $(SLURM_START); $(GRIDENGINE_START); \
	  "$(VENV_PY)" -m pytest; \
	  cd ui-tests && CI=1 CHROMIUM_PATH="$(CHROMIUM)" jlpm playwright test

# --- benchmarks (not part of `make test`; the test suite runs only bench.py --smoke) ----

bench: install
	"$(VENV_PY)" -m pip install --quiet matplotlib
	if [ ! -x "$(LABEXT_VENV)/bin/python" ]; then $(PYTHON) -m venv "$(LABEXT_VENV)"; fi
	"$(LABEXT_VENV)/bin/python" -m pip install --quiet "dask-labextension==$(LABEXT_VERSION)"
	"$(VENV_PY)" benchmarks/bench.py --repeat 5 --labext-python "$(LABEXT_VENV)/bin/python"

clean:
	rm -rf lib tsconfig.tsbuildinfo clustermgr_lab/labextension clustermgr_lab/_version.py \
	  ui-tests/test-results ui-tests/playwright-report
