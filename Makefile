# One entry point for people and CI. `make test` works on a fresh machine: it creates the
# virtualenv, installs PostgreSQL and Prometheus from Debian's packages when missing (as root), builds or
# reuses the Kubernetes control plane (kube-apiserver, etcd, kwok) from Go modules, then
# runs the whole suite: lint, unit, integration (real PostgreSQL + SQLite, real gRPC) and
# end-to-end (real kube-apiservers).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: setup test unit lint proto demo bench controlplane postgres-deps prometheus-deps clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

postgres-deps:
	./hack/ensure-postgres.sh

prometheus-deps:
	./hack/ensure-prometheus.sh

controlplane:
	./hack/build-controlplane.sh

test: setup postgres-deps prometheus-deps controlplane lint
	$(BIN)/python -m pytest -m "not perf" $(PYTEST_ARGS)

unit: setup
	$(BIN)/python -m pytest tests/unit -q $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

proto: setup
	PATH=$(CURDIR)/$(BIN):$$PATH ./hack/gen-proto.sh

demo: setup
	$(BIN)/federation demo

bench: setup
	$(BIN)/federation bench --scenario federation/sim/scenarios/demo.yaml

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
