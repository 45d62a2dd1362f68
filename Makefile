# fabriccheck: `make demo` and `make test` do all set-up on a fresh machine (venv, pip, apt).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
# Debian packages the tests need (lab: namespaces, sshd, tc, iperf3; reports: chromium).
APT_PACKAGES ?= iproute2 iperf3 traceroute iputils-ping iputils-tracepath openssh-server openssh-client procps psmisc slurmctld slurmd slurm-client munge chromium fonts-dejavu-core

.PHONY: all venv venv-core apt test test-slow test-all test-long demo lint bench clean

all: test

# The package alone (what `make demo` needs: no test tools, no torch).
$(STAMPS)/venv-core: pyproject.toml
	@mkdir -p $(STAMPS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@touch $@

# Everything the tests need: the test tools and the lab's CPU collective (torch, gloo).
$(STAMPS)/venv: $(STAMPS)/venv-core
	$(PY) -m pip install -q -e '.[test,lab]'
	@touch $@

venv-core: $(STAMPS)/venv-core
venv: $(STAMPS)/venv

$(STAMPS)/apt: Makefile
	@mkdir -p $(STAMPS)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    echo "apt: installing $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  fi; \
	else echo "apt: not root (or no apt-get); lab tests will be skipped"; fi
	@touch $@

apt: $(STAMPS)/apt

# The suite runs on every core (pytest-xdist, from the test extra); tests that share a machine-wide
# resource (the namespace lab, stray-process checks, a doc block's files) stay on one worker
# (tests/conftest.py). Every run prints its 20 slowest tests. PYTHONDONTWRITEBYTECODE is cleared
# so the workers and the CLI subprocesses reuse compiled modules instead of recompiling them.
XDIST ?= auto
PYTEST = PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(XDIST) --dist loadgroup --durations=20

# The fast tier: everything not marked slow (the README's test command)
test: venv apt
	$(PYTEST) -m "not slow"

# The slow tier alone: tests over ~20 s and the long property runs (CI runs it after `make test`)
test-slow: venv apt
	$(PYTEST) -m slow

# Both tiers in one run
test-all: venv apt
	$(PYTEST)

# The slow tier's old name (it started as the long hypothesis property runs)
test-long: test-slow

demo: venv-core
	$(VENV)/bin/fabriccheck demo

lint: venv
	$(VENV)/bin/ruff check fabriccheck tests bench

bench: venv
	$(PY) bench/run.py

# Regenerate every output sample of README.md and docs/*.md from real runs (tests/docs/samples.py;
# DOCS_ARGS=--check only checks, DOCS_ARGS=--force rewrites every block)
.PHONY: docs
docs: venv-core
	$(PY) -m tests.docs.samples $(DOCS_ARGS)

clean:
	rm -rf $(VENV) $(STAMPS) .pytest_cache .hypothesis

# The namespace lab end to end (root): build lab-4 with a degraded NIC, sweep it over SSH, tear down.
.PHONY: lab-demo
LAB_DEMO_FAULTS ?= fabriccheck/lab/demo-faults.yaml
lab-demo: venv apt
	@if [ "$$(id -u)" != 0 ]; then echo "lab-demo needs root (network namespaces)"; exit 2; fi
	@trap '$(VENV)/bin/fabriccheck lab down --name demo >/dev/null' EXIT; set -e; \
	$(VENV)/bin/fabriccheck lab up lab-4 --name demo --faults $(LAB_DEMO_FAULTS); \
	rc=0; $(VENV)/bin/fabriccheck sweep --executor ssh --topology lab-4 --probe iperf3 \
	  --inventory /tmp/fabriccheck-lab-demo/inventory.yaml || rc=$$?; \
	echo "sweep exit code: $$rc (1 = faults found)"
