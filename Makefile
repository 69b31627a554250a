# One entry point for people and CI. `make test` works on a fresh machine: it creates the
# virtualenv, installs PostgreSQL and Prometheus from Debian's packages when missing (as root), builds or
# reuses the Kubernetes control plane (kube-apiserver, etcd, kwok) and the Go clients the tests
# drive the service with (grpc-health-probe, grpcurl, helm) from Go modules, then
# runs the whole suite: lint, unit, integration (real PostgreSQL + SQLite, real gRPC) and
# end-to-end (real kube-apiservers).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: setup test unit lint proto demo bench controlplane tools image postgres-deps prometheus-deps clean

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

# The image deploy/chart/ references (image.repository:appVersion): keep IMAGE in step
# with the charts' values.yaml and Chart.yaml (tests/unit/test_image_reference.py checks).
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= federation:$(VERSION)
image:
	docker build -t $(IMAGE) .

# grpc-health-probe, grpcurl and helm, from their Go modules (cached like the control plane).
tools:
	./hack/build-tools.sh

test: setup postgres-deps prometheus-deps controlplane tools lint
	$(BIN)/python hack/pytest_shards.py -m "not perf" $(PYTEST_ARGS)

unit: setup
	$(BIN)/python -m pytest tests/unit -q $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	MYPY=$(BIN)/mypy ./hack/mypy-tests.sh
	$(BIN)/lint-imports --no-cache

proto: setup
	PATH=$(CURDIR)/$(BIN):$$PATH ./hack/gen-proto.sh

demo: setup
	$(BIN)/federation demo

bench: setup
	$(BIN)/federation bench --scenario federation/sim/scenarios/demo.yaml

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
