# flock — run `make help` for the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin

.DEFAULT_GOAL := help

help: ## Show this help.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## Build peer-finder (and other binaries) into ./bin.
	$(GO) build -o $(BIN)/ ./cmd/...

test: ## Run all tests (unit and integration, race detector on).
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) test -race -count=1 ./...

FLOCK_CLUSTER := $(BIN)/flock-cluster

# Always rebuilt (seconds when cached) so the binary never lags behind the source.
$(FLOCK_CLUSTER): FORCE
	@$(GO) build -o $@ ./cmd/flock-cluster

cluster-build: $(FLOCK_CLUSTER) ## Build (or reuse) etcd, Kubernetes, kwok, CoreDNS under ~/.cache/flock.
	@$(FLOCK_CLUSTER) build

bench: ## Run the benchmarks.
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: help build test bench cluster-build FORCE
FORCE:
