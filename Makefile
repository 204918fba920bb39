# Entry points for a fresh Debian machine: `make demo`, `make test` and `make test-fast`.
# Each installs what it needs (idempotently) before it runs, and no more: the demo gets no
# test tool, the fast tier no engine, `make test` everything.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install -q -c requirements.lock
# What each entry point has installed into .venv (pip adds only what is missing).
VENV_STAMP := $(VENV)/.created
DEMO_STAMP := $(VENV)/.installed-demo
FAST_STAMP := $(VENV)/.installed-fast
MUTATION_STAMP := $(VENV)/.installed-mutation
STAMP := $(VENV)/.installed
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
TORCHX_STAMPS := .venv-torchx/.installed .venv-torchx-nightly/.installed
COVALENT_STAMP := .venv-covalent/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 20
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 20
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
# Debian's Python 3.11, from which the demo's base with python3 is made (devenv/images.py).
PYTHON_BASE_PACKAGES := python3.11-minimal libpython3.11-minimal libpython3.11-stdlib
# Debian's PyTorch 1.13 (CPU, Gloo) for the tests' torch base (devenv/images.py push_torch_base):
# TorchX's dist.ddp on two local nodes. About 155 MB to download, 40 s to install.
TORCH_BASE_PACKAGES := python3-torch python3-numpy python3-typing-extensions python3-astunparse python3-six bash
DEBIAN_PACKAGES := docker.io docker-registry busybox-static time strace tini dash gzip pigz zstd systemd jq zsh fish $(PYTHON_BASE_PACKAGES) $(TORCH_BASE_PACKAGES)
DEMO_DEBIAN_PACKAGES := docker.io docker-registry busybox-static $(PYTHON_BASE_PACKAGES)
FAST_DEBIAN_PACKAGES := dash gzip zstd systemd zsh fish

.PHONY: test test-fast demo demo-stop synth lint docs bench mutation deps system-deps \
	demo-system-deps fast-system-deps clean

# Dependency groups (pyproject.toml) need pip 25.1 or later.
$(VENV_STAMP):
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	touch $@

# The launcher, the CDK app and the development environment (devenv/): the demo's needs.
# pip's output as a progress line (devenv/install_progress.py), not a minute of silence.
$(DEMO_STAMP): pyproject.toml setup.py requirements.lock | $(VENV_STAMP)
	@echo "==> installing the launcher, the CDK app and the emulator into $(VENV) (1-2 minutes, once)"
	@set -o pipefail; $(PY) -m pip install --progress-bar off -c requirements.lock -e '.[infra]' \
	  --group devenv 2>&1 | python3 -m devenv.install_progress
	@touch $@

# The launcher, the CDK app (imported, never synthesized), pytest and cfn-lint: the fast tier's.
$(FAST_STAMP): pyproject.toml setup.py requirements.lock | $(VENV_STAMP)
	$(PIP_INSTALL) -e '.[infra]' --group test
	touch $@

# The fast tier's and mutmut (make mutation).
$(MUTATION_STAMP): pyproject.toml setup.py requirements.lock | $(VENV_STAMP)
	$(PIP_INSTALL) -e '.[infra]' --group test --group mutation
	touch $@

$(STAMP): pyproject.toml setup.py requirements.lock requirements-torch.txt | $(VENV_STAMP)
	$(PIP_INSTALL) -e '.[infra]' --group devenv --group test --group lint --group docs
	$(PY) -m pip install -q -r requirements-torch.txt
	touch $@

# The outside scanner, in a venv of its own (its pins conflict with moto's and cfn-lint's).
$(CHECKOV_STAMP): requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install -q -r requirements-checkov.txt
	touch $@

# The efa_batch TorchX scheduler against both TorchX lines, each in its own venv (they are
# one module, `torchx`, from two distributions); the launcher is installed editable in each.
.venv-torchx/.installed: pyproject.toml setup.py requirements-torchx.txt
	test -x .venv-torchx/bin/python || python3 -m venv .venv-torchx
	.venv-torchx/bin/python -m pip install -q --upgrade pip
	.venv-torchx/bin/python -m pip install -q -r requirements-torchx.txt
	.venv-torchx/bin/python -m pip install -q --no-deps -e .
	touch $@

.venv-torchx-nightly/.installed: pyproject.toml setup.py requirements-torchx-nightly.txt
	test -x .venv-torchx-nightly/bin/python || python3 -m venv .venv-torchx-nightly
	.venv-torchx-nightly/bin/python -m pip install -q --upgrade pip
	.venv-torchx-nightly/bin/python -m pip install -q -r requirements-torchx-nightly.txt
	.venv-torchx-nightly/bin/python -m pip install -q --no-deps -e .
	touch $@

# The efa_batch Covalent executor: the Covalent server (which runs executors) with the launcher
# installed editable, in a venv of its own (Covalent pins sqlalchemy<2 and an older FastAPI).
$(COVALENT_STAMP): pyproject.toml setup.py requirements-covalent.txt
	test -x .venv-covalent/bin/python || python3 -m venv .venv-covalent
	.venv-covalent/bin/python -m pip install -q --upgrade pip
	.venv-covalent/bin/python -m pip install -q -r requirements-covalent.txt
	.venv-covalent/bin/python -m pip install -q --no-deps -e .
	touch $@

node_modules/.package-lock.json: package.json package-lock.json
	@echo "==> installing the pinned CDK CLI into node_modules (npm ci)"
	npm ci --no-audit --no-fund --loglevel=error

# Debian packages, as root: a Docker engine and the reference registry (the demo, the tests);
# busybox and Debian's Python for offline bases; strace and GNU time to measure; tini and dash
# for entrypoints; systemd for systemd-analyze and systemctl --root, which check the nodes' unit
# files; jq, which the docs' examples use (tests/project/test_demo.py runs them). Another
# apt-get holding the lock (unattended-upgrades on a fresh machine) is waited for
# (devenv/apt_install.sh).
system-deps: PACKAGES := $(DEBIAN_PACKAGES)
demo-system-deps: PACKAGES := $(DEMO_DEBIAN_PACKAGES)
fast-system-deps: PACKAGES := $(FAST_DEBIAN_PACKAGES)
system-deps demo-system-deps fast-system-deps:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "==> installing Debian packages:$$missing"; \
	  sh devenv/apt_install.sh $$missing; \
	fi

deps: $(STAMP) $(CHECKOV_STAMP) $(TORCHX_STAMPS) $(COVALENT_STAMP) node_modules/.package-lock.json system-deps

lint: $(STAMP)
	$(VENV)/bin/ruff check launcher infra tests bench demo devenv torchx_plugins
	$(VENV)/bin/mypy --strict --warn-unused-configs launcher torchx_plugins devenv
	$(VENV)/bin/mypy infra
	$(VENV)/bin/lint-imports --no-cache
	find launcher demo devenv bench infra tests -name '*.sh' -print0 | xargs -0 $(VENV)/bin/shellcheck --shell=sh

# Every tier: the emulator, the Docker engine, the CDK CLI, the TorchX, Covalent and checkov
# venvs, torch.
# All of them are installed above, so a service that cannot start fails the run (as under CI).
# Two workers (pytest-xdist), a test file per worker: each starts the services its files use.
test: deps lint docs
	EFA_BATCH_TESTS_REQUIRE_ALL=1 $(VENV)/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder

# The tier that needs nothing (tests/support/tiers.py): the inner loop, well under a minute.
test-fast: $(FAST_STAMP) fast-system-deps
	$(VENV)/bin/pytest -q -m fast -n 2

# Mutation benchmark, not in CI: mutmut's mutants of the modules that decide what reaches AWS
# against the fast tier, in a copy of the checkout under TMPDIR (/tmp by default), never in it;
# a table of the kill rate per module, failing below 90% (bench/mutation.py).
mutation: $(MUTATION_STAMP) fast-system-deps
	$(PY) -m bench.mutation

# The docs site (docs/, mkdocs.yml) into build/site; strict: a broken link or anchor, or a page
# outside the nav, fails the build. The CLI reference and the outputs table are made from the
# code (docs/hooks/). Material's banner about its successor is not ours to show on every build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

synth: deps
	cdk synth --quiet

demo: $(DEMO_STAMP) node_modules/.package-lock.json demo-system-deps
	$(PY) -m demo

demo-stop:
	$(PY) -m demo stop

bench: deps
	$(PY) -m bench.run

clean:
	rm -rf cdk.out .pytest_cache
