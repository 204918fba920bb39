# Two entry points for a fresh Debian machine: `make demo` and `make test`.
# Each installs what it needs (idempotently) before it runs.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
TORCHX_STAMPS := .venv-torchx/.installed .venv-torchx-nightly/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 20
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 20
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
DEBIAN_PACKAGES := docker.io docker-registry busybox-static time strace tini dash gzip pigz zstd

.PHONY: test demo demo-stop synth lint bench deps system-deps clean

$(STAMP): pyproject.toml requirements.lock requirements-torch.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements.lock -e '.[infra,dev]'
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
.venv-torchx/.installed: pyproject.toml requirements-torchx.txt
	test -x .venv-torchx/bin/python || python3 -m venv .venv-torchx
	.venv-torchx/bin/python -m pip install -q --upgrade pip
	.venv-torchx/bin/python -m pip install -q -r requirements-torchx.txt
	.venv-torchx/bin/python -m pip install -q --no-deps -e .
	touch $@

.venv-torchx-nightly/.installed: pyproject.toml requirements-torchx-nightly.txt
	test -x .venv-torchx-nightly/bin/python || python3 -m venv .venv-torchx-nightly
	.venv-torchx-nightly/bin/python -m pip install -q --upgrade pip
	.venv-torchx-nightly/bin/python -m pip install -q -r requirements-torchx-nightly.txt
	.venv-torchx-nightly/bin/python -m pip install -q --no-deps -e .
	touch $@

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

# Debian packages the tests use: a Docker engine and the reference registry.
system-deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

deps: $(STAMP) $(CHECKOV_STAMP) $(TORCHX_STAMPS) node_modules/.package-lock.json system-deps

lint: deps
	$(VENV)/bin/ruff check launcher infra tests bench demo torchx_plugins
	$(VENV)/bin/mypy --strict --warn-unused-configs launcher torchx_plugins
	$(VENV)/bin/mypy infra

test: deps lint
	$(VENV)/bin/pytest -q

synth: deps
	cdk synth --quiet

demo: deps
	$(PY) -m demo

demo-stop:
	$(PY) -m demo stop

bench: deps
	$(PY) -m bench.run

clean:
	rm -rf cdk.out .pytest_cache
