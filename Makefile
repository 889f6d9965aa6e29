# ascend.kvpool: set-up, demo and tests. Every target installs what it needs.
#   make demo   - the main job on the embedded default: the mock cluster (SIMULATED Atlas nodes)
#   make test   - everything: lint, sanity, unit tests, molecule scenarios against the mock cluster
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_FORCE_COLOR ?= 0
NODES ?= 2

.PHONY: help setup venv docker image sim-up sim-down demo verify lint sanity unit equipment molecule test bench clean

help:
	@echo "make demo   - build the mock cluster and run the main job against it"
	@echo "make test   - run every test (lint, sanity, unit, molecule)"
	@echo "make bench  - speed figures (prints ratios)"
	@echo "make sim-up / sim-down - start / remove the mock cluster (NODES=$(NODES))"

$(VENV)/.stamp: requirements.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	touch $@

venv: $(VENV)/.stamp

# ansible-test sanity has its own venv: it pins versions that would clash with ansible-lint's.
.venv-sanity/.stamp: requirements-sanity.txt
	python3 -m venv .venv-sanity
	.venv-sanity/bin/pip install -q --upgrade pip
	.venv-sanity/bin/pip install -q -r requirements-sanity.txt
	touch $@

docker:
	bash scripts/ensure-docker.sh

setup: venv docker

image: setup
	$(PY) tests/mock/mockctl image

sim-up: image
	$(PY) tests/mock/mockctl up --nodes $(NODES)

sim-down:
	-$(PY) tests/mock/mockctl down

verify: sim-up
	$(BIN)/ansible-playbook verify_network.yml -i inventories/sim

# The main job on the mock cluster: network check, master, pool, two instances sharing it, then the benchmark.
demo: sim-up
	$(BIN)/ansible-playbook site.yml -i inventories/sim
	$(BIN)/ansible-playbook benchmark.yml -i inventories/sim
	@echo "demo: reports in reports/: npu_network.json, vllm_instances.json,"
	@echo "      kvpool_benchmark.md (table), kvpool_benchmark.json, kvpool_benchmark.png (chart)"

lint: venv
	$(BIN)/yamllint -s .
	$(BIN)/ruff check .
	$(BIN)/ansible-lint --profile production
	$(PY) tools/check_argument_specs.py

sanity: .venv-sanity/.stamp
	bash scripts/sanity.sh

unit: venv
	$(BIN)/pytest -q tests/unit tests/mock -m "not docker"

# The test equipment itself in docker (the stubs over SSH on real containers).
equipment: image
	$(BIN)/pytest -q -p no:cacheprovider tests/mock -m docker

# Every scenario on one mock cluster: the default scenario creates it, the others share it.
# The reset drops molecule's state of an earlier run from the same directory (else prepare is skipped as done).
molecule: image
	$(BIN)/molecule reset --all
	$(BIN)/molecule test --all --shared-state

test: lint sanity unit equipment molecule
	@echo "make test: all green"

bench: sim-up
	$(PY) tools/bench_verify_network.py
	$(PY) tools/bench_site.py

clean: sim-down
	rm -rf .tmp reports
