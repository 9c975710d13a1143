# ssdlab: `make demo` and `make test` set everything up on a fresh Debian machine (as root).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
APT_PACKAGES := fio nvme-cli util-linux mount procps e2fsprogs python3 python3-venv python3-pip \
	fuse3 libfuse3-dev pkg-config gcc make chromium chromium-headless-shell poppler-utils fonts-dejavu-core \
	xfsprogs btrfs-progs fdisk lvm2 mdadm smartmontools hdparm \
	openssh-server openssh-client sshfs nbdkit libnbd-bin iproute2 \
	mariadb-server mariadb-client sysbench postgresql \
	qemu-system-x86 qemu-utils debootstrap
STAMP := .make

.PHONY: setup apt venv emulator vmlab demo test lint unit integration bench clean distclean help

help:
	@echo "make demo   - set up, then run the quick PTS suite on the built-in target"
	@echo "make test   - set up, then lint (ruff, mypy) and run the whole test suite"
	@echo "make bench  - performance benchmarks (results in bench/results/)"
	@echo "make lint   - ruff and mypy (needs only python3 with its venv module)"
	@echo "make unit   - the unit tests (the same: no apt packages, no emulator, no fio)"
	@echo "make vmlab  - build (5-15 min) or reuse the VM lab's guest image (docs/vmlab.md)"

# setup installs the apt packages first (python3-venv among them), then the rest
setup: apt
	@$(MAKE) --no-print-directory venv emulator

emulator: apt
	$(MAKE) -s -C emulator

apt: $(STAMP)/apt
$(STAMP)/apt: Makefile
	@mkdir -p $(STAMP)
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "Error: run as root to install $$missing" >&2; exit 1; fi; \
	  if printf "%s\n" $$missing | grep -qx openssh-server && [ ! -e /etc/ssh/sshd_not_to_be_run ]; then \
	    mkdir -p /etc/ssh && touch /etc/ssh/sshd_not_to_be_run; \
	    echo "note: openssh-server is for the multi-host tests (their own sshd per namespace); the machine's own sshd stays off: remove /etc/ssh/sshd_not_to_be_run to run it"; \
	  fi; \
	  made_policy=; \
	  if printf "%s\n" $$missing | grep -qxE 'mariadb-server|postgresql' && [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1; \
	    echo "note: the database packages are for ssdlab run db's private servers; their own services are not started"; \
	  fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  status=$$?; [ -z "$$made_policy" ] || rm -f /usr/sbin/policy-rc.d; [ $$status = 0 ] || exit $$status; \
	fi
	@touch $@

# the virtual environment needs only python3 and its venv module (no apt packages):
# lint and unit depend on it alone
venv: $(STAMP)/venv
$(STAMP)/venv: pyproject.toml
	@mkdir -p $(STAMP)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) >/dev/null 2>&1 || { rm -rf $(VENV); \
	  echo "Error: '$(PYTHON) -m venv' failed: install Python 3.11+ with its venv module" \
	    "(Debian: apt-get install python3 python3-venv), or run 'make setup' as root" >&2; \
	  exit 1; }
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,serve,postgres]'
	@touch $@

demo: setup
	$(BIN)/ssdlab demo

lint: venv
	$(BIN)/ruff check src tests bench tools
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests/unit -q

integration: setup
	$(BIN)/pytest tests/integration -q

# the VM lab's guest image, cached outside the clone in /var/cache/ssdlab-vmlab/<key>/
# (docs/vmlab.md): built from Debian's packages when the recipe is new, else reused
vmlab: setup
	$(BIN)/python -m tests.support.vmimage build

# the suite in three parts: two test files at a time (pytest-xdist, each file whole on one
# worker), then the files marked solo, which judge speed, alone, then the VM lab's tests
# (guests under QEMU's software emulation take the CPU: nothing else runs beside them; two
# guests at once, one per worker, each module whole on the worker planned for it:
# tests/vmlab/conftest.py)
test: setup vmlab
	@$(MAKE) --no-print-directory lint
	$(MAKE) -s -C emulator test
	$(BIN)/pytest -q -n 2 --dist loadfile -m "not solo and not vmlab" --durations=10
	$(BIN)/pytest -q -m "solo and not vmlab" --durations=5
	$(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m vmlab tests/vmlab --durations=5

bench: setup
	$(BIN)/python bench/harness_overhead.py
	$(BIN)/python bench/emulator_ceiling.py
	$(BIN)/python bench/multi_host.py
	$(BIN)/python bench/predict_accuracy.py

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache demo-results
	find . -name __pycache__ -prune -exec rm -rf {} +
	$(MAKE) -s -C emulator clean

distclean: clean
	rm -rf $(VENV) $(STAMP) src/*.egg-info
