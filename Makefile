# flock — run `make help` for the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin

# The version this tree is (VERSION; see CHANGELOG.md), and the commit, stamped
# into every binary (-version, flock_build_info) by internal/version.
VERSION ?= $(shell cat $(CURDIR)/VERSION)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X github.com/flockd/flock/internal/version.version=$(VERSION) -X github.com/flockd/flock/internal/version.commit=$(COMMIT)

.DEFAULT_GOAL := help

help: ## Show this help.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## Build peer-finder (and other binaries) into ./bin.
	$(GO) build -ldflags='$(LDFLAGS)' -o $(BIN)/ ./cmd/...

test: cluster-build images verify helm ## Run all tests (unit, integration, real pods on the three real nodes; race detector on) against the local cluster.
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@# Reuses a running cluster; one started here is stopped when the tests end.
	@# test/realnode runs real pods and takes about 27-32 minutes on 2 shared
	@# cores (1,597 s at 19a6dc0; past 1,800 s at 6e49c38, when TestAppGalera grew
	@# by a step), past go test's default 10m per-package limit: give it room.
	@# The tally (internal/testing/need) says how many root and real-node tests
	@# ran and which were skipped, and why.
	@tally=$$(mktemp); trap 'rm -f "$$tally"' EXIT; \
	FLOCK_TEST_TALLY=$$tally FLOCK_HELM=$(HELM) $(FLOCK_CLUSTER) exec -- $(GO) test -race -count=1 -timeout=55m ./...; rc=$$?; \
	for k in real-node root; do \
		echo "$$k tests: $$(grep "^$$k ran " "$$tally" | cut -d' ' -f3 | sort -u | wc -l) ran, $$(grep "^$$k skipped " "$$tally" | cut -d' ' -f3 | sort -u | wc -l) skipped"; \
		grep "^$$k skipped " "$$tally" | sort -u | sed 's/^/  /'; \
	done; exit $$rc

test-unit: ## Fast tier: every test that needs no local cluster (go test -short: the cluster helpers skip), race detector on; about 3 minutes.
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) test -race -short -count=1 ./...

# The torch example's image (ghcr.io/flockd/apps/torch: Debian's PyTorch,
# ~200 MB archive, ~550 MB unpacked) is too large to build at every make
# images and make test: make test-torch builds it and runs its one test.
TORCH_IMAGE = $(IMAGE_OUT)/apps-torch.tar

torch-image: ## Build the torch example's image ghcr.io/flockd/apps/torch (this machine's arch; ~200 MB, not part of make images) into bin/images.
	@$(GO) run ./hack/images -torch -out=$(IMAGE_OUT) -repo=$(IMAGE_REPO) -tag=$(IMAGE_TAG) -aliases=$(IMAGE_ALIASES) \
		-source-date-epoch=$(SOURCE_DATE_EPOCH) -revision=$(shell git rev-parse HEAD 2>/dev/null)

test-torch: cluster-build images torch-image ## Run examples/batch/torch on two real nodes (TestExampleTorch, build tag torch; not part of make test: ~2 min cold, see README).
	$(GO) vet -tags=torch ./test/realnode/
	FLOCK_TORCH_IMAGE=$(abspath $(TORCH_IMAGE)) $(FLOCK_CLUSTER) exec -- $(GO) test -tags=torch -race -count=1 -run '^TestExampleTorch$$' -v ./test/realnode/

FLOCK_CLUSTER := $(BIN)/flock-cluster

# Always rebuilt (seconds when cached) so the binary never lags behind the source.
$(FLOCK_CLUSTER): FORCE
	@$(GO) build -o $@ ./cmd/flock-cluster

cluster-build: $(FLOCK_CLUSTER) ## Build (or reuse) etcd, Kubernetes (control plane, kubelet, kube-proxy), kwok, CoreDNS, the volume provisioner under ~/.cache/flock, and unpack prometheus and promtool (Debian package) there; as root, install the real nodes' Debian packages.
	@$(FLOCK_CLUSTER) build

cluster-up: cluster-build images ## Start the local cluster (or reuse it); prints exports: eval "$(make -s cluster-up)".
	@$(FLOCK_CLUSTER) up

cluster-env: $(FLOCK_CLUSTER) ## Print the exports (KUBECONFIG, FLOCK_DNS, ...) of the running local cluster.
	@$(FLOCK_CLUSTER) env

cluster-down: $(FLOCK_CLUSTER) ## Stop the local cluster (exactly the processes cluster-up started).
	@$(FLOCK_CLUSTER) down

demo: cluster-build images ## The main demo: a StatefulSet of real pods spread over the three real nodes, peer-finder's image as a sidecar in each, scaled 3 -> 5 -> 2 (simulated pods without root).
	@$(GO) build -o $(BIN)/peer-finder ./cmd/peer-finder
	@$(GO) build -o $(BIN)/flock-demo ./cmd/flock-demo
	@# Reuses a running cluster; one started here is stopped when the demo ends.
	@$(FLOCK_CLUSTER) exec -- $(BIN)/flock-demo

demo-simulated: cluster-build ## The demo on simulated (kwok) pods, one peer-finder process per member on this machine.
	@$(GO) build -o $(BIN)/peer-finder ./cmd/peer-finder
	@$(GO) build -o $(BIN)/flock-demo ./cmd/flock-demo
	@$(FLOCK_CLUSTER) exec -- $(BIN)/flock-demo -mode=simulated

# Images: static binaries per architecture, then OCI archives in bin/images
# (no base image, no registry; Debian packages cached in ~/.cache/flock/debs).
IMAGE_ARCHES ?= amd64 arm64
IMAGE_REPO ?= ghcr.io/flockd
# Images are named $(IMAGE_REPO)/<name>:$(IMAGE_TAG), the version; make images
# adds the alias :dev, the name the local cluster and the tests use.
IMAGE_TAG ?= $(VERSION)
IMAGE_ALIASES ?= dev
IMAGE_OUT ?= $(BIN)/images
# The application images (stand-ins for the real applications the tests run;
# never released).
IMAGE_APPS ?= -apps
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

images: cluster-build ## Build the peer-finder, flock-controller and pause images (linux/amd64+arm64) and the application images (ghcr.io/flockd/apps/*, this machine's arch) as OCI archives in bin/images.
	@for arch in $(IMAGE_ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags='-s -w $(LDFLAGS)' -o $(BIN)/$$arch/ \
			./cmd/peer-finder ./cmd/flock-controller ./cmd/pause || exit 1; \
	done
	@$(GO) run ./hack/images -bin=$(BIN) -out=$(IMAGE_OUT) -repo=$(IMAGE_REPO) -tag=$(IMAGE_TAG) -aliases=$(IMAGE_ALIASES) \
		-arches=$(shell echo $(IMAGE_ARCHES) | tr ' ' ,) -source-date-epoch=$(SOURCE_DATE_EPOCH) \
		-revision=$(shell git rev-parse HEAD 2>/dev/null) $(IMAGE_APPS)

# A release: static binaries of peer-finder and flock-controller for each
# arch, the images (named by the version only, no :dev), SHA256SUMS over all
# of them; then checked (checksums, the binaries' -version).
DIST ?= $(CURDIR)/dist
RELEASE_BINARIES := peer-finder flock-controller

# The Helm chart's version is VERSION without its v (Helm wants SemVer).
CHART_VERSION := $(VERSION:v%=%)
CHART_PACKAGE := flock-controller-$(CHART_VERSION).tgz

release: helm ## Build release $(VERSION) into dist/: binaries for linux/amd64 and linux/arm64, the image archives, the Helm chart, SHA256SUMS; then check them.
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@$(MAKE) --no-print-directory images IMAGE_OUT=$(DIST) IMAGE_ALIASES= IMAGE_APPS=
	@for arch in $(IMAGE_ARCHES); do for b in $(RELEASE_BINARIES); do \
		cp $(BIN)/$$arch/$$b $(DIST)/$$b-$(VERSION)-linux-$$arch || exit 1; \
	done; done
	@for f in $(DIST)/*.tar; do n=$$(basename $$f .tar); mv $$f $(DIST)/$$n-$(VERSION)-image.oci.tar; done
	@$(HELM) package charts/flock-controller --version $(CHART_VERSION) --app-version $(VERSION) --destination $(DIST) >/dev/null
	@cd $(DIST) && sha256sum -- $$(ls | grep -v '^SHA256SUMS$$') > SHA256SUMS
	@$(MAKE) --no-print-directory release-check

release-check: ## Check dist/: every file listed in SHA256SUMS and matching, each binary of this machine's arch prints $(VERSION) and $(COMMIT), the chart is $(VERSION)'s.
	@cd $(DIST) && test "$$(ls | grep -v '^SHA256SUMS$$' | sort)" = "$$(awk '{print $$2}' SHA256SUMS | sort)" \
		|| { echo "SHA256SUMS does not list exactly the files of $(DIST)"; exit 1; }
	@cd $(DIST) && sha256sum --quiet -c SHA256SUMS
	@arch=$$($(GO) env GOARCH); for b in $(RELEASE_BINARIES); do \
		out=$$($(DIST)/$$b-$(VERSION)-linux-$$arch -version) || exit 1; \
		case "$$out" in "$$b $(VERSION) commit=$(COMMIT) go="*) echo "$$out";; \
		*) echo "$$b -version: $$out; want $(VERSION) commit=$(COMMIT)"; exit 1;; esac; \
	done
	@chart=$$(tar -xOzf $(DIST)/$(CHART_PACKAGE) flock-controller/Chart.yaml) || exit 1; \
	for want in "version: $(CHART_VERSION)" "appVersion: $(VERSION)"; do \
		grep -qx "$$want" <<<"$$chart" || { echo "$(CHART_PACKAGE): Chart.yaml has no '$$want'"; exit 1; }; \
	done; echo "$(CHART_PACKAGE): chart $(CHART_VERSION), app $(VERSION)"
	@echo "release $(VERSION): $$(wc -l < $(DIST)/SHA256SUMS) files in $(DIST), checksums ok"

# Each fuzz target as package:Target; `make test` runs their seed corpora
# (testdata/fuzz/...) as ordinary tests.
FUZZ_TARGETS := ./peerfinder/config:FuzzInferDomain ./peerfinder/config:FuzzParse \
	./peerfinder/sink/hostsfile:FuzzRender ./peerfinder/sink/hostsfile:FuzzParseExpected ./peerfinder/sink/hostsfile:FuzzTemplate \
	./peerfinder/sink/hook:FuzzParseCommand ./peerfinder/source/dns:FuzzParse
FUZZTIME ?= 30s

fuzz: ## Fuzz each target for FUZZTIME (default 30s); a failure leaves its input under the package's testdata/fuzz.
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

bench: ## Run the benchmarks.
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-latency: cluster-build ## Latency side by side: pod ready -> hook start for flock's endpointslice, pods, dns sources and upstream peer-finder (root; see bench/README.md).
	@$(FLOCK_CLUSTER) exec -- $(GO) run ./bench/latency

bench-footprint: cluster-build ## RSS and CPU at 1,000 peers side by side: flock's endpointslice, pods and dns sources and upstream peer-finder; FOOTPRINT_FLAGS e.g. -pods=5000 -rounds=10 (root; see bench/README.md).
	@$(FLOCK_CLUSTER) exec -- $(GO) run ./bench/footprint $(FOOTPRINT_FLAGS)

CAMPAIGN_FLAGS ?= -rounds=10 -parallel=2

# Each campaign's summary (command, commit, verdicts, the machine's CPU) is
# kept as a file of bench/results/, named by its start; commit it with the
# figures of bench/README.md brought up to date (TestResultsFiles checks them).
CAMPAIGN_RESULTS ?= bench/results/campaign-run-$(shell date -u +%Y%m%dT%H%M%SZ).json

campaign: cluster-build images ## Split-brain campaign: randomized etcd bootstrap rounds on the real nodes, flock and upstream peer-finder side by side under one fault schedule (root; see bench/README.md; CAMPAIGN_FLAGS).
	@$(FLOCK_CLUSTER) exec -- $(GO) run -ldflags='$(LDFLAGS)' ./bench/campaign -results=$(CAMPAIGN_RESULTS) $(CAMPAIGN_FLAGS)

bench-apiload: cluster-build ## API load of 100 endpointslice finders on one service (steady, rolling restart) from the apiserver's metrics, beside upstream's DNS load on CoreDNS; APILOAD_FLAGS e.g. -finders=50 -steady=10m (root for the DNS part; see bench/README.md).
	@$(FLOCK_CLUSTER) exec -- $(GO) run ./bench/apiload $(APILOAD_FLAGS)

bench-compare: cluster-build ## Every side-by-side comparison, one after the other on one cluster: latency, footprint at 1,000 peers with churn rounds, 5,000 peers, API load (about 35 minutes; see bench/README.md).
	@$(FLOCK_CLUSTER) exec -- bash -c 'set -e; uptime; \
		echo "== latency (pod ready -> hook)"; $(GO) run ./bench/latency; uptime; \
		echo "== footprint and churn, 1,000 peers"; $(GO) run ./bench/footprint -idle=60s -rounds=10; uptime; \
		echo "== scale, 5,000 peers"; $(GO) run ./bench/footprint -pods=5000 -idle=30s -rounds=10; uptime; \
		echo "== API load, 100 finders on one service"; $(GO) run ./bench/apiload -steady=10m; uptime'

# The packages whose rules matter; a mutant is run against its own package's unit tests.
MUTATE_PKGS ?= ./peerfinder/membership ./peerfinder/bootstrap ./peerfinder/source/dns ./peerfinder/engine ./peerfinder/sink/hook ./internal/atomicfile ./peerfinder/sink/hostsfile
MUTATE_FLAGS ?= -max=30

mutate: ## Mutation check: put one small bug at a time into MUTATE_PKGS, print caught/survived and the survivors (low priority, one at a time; MUTATE_FLAGS=-max=0 runs all).
	$(GO) run ./hack/mutate $(MUTATE_FLAGS) $(MUTATE_PKGS)

# controller-gen is installed into a cache dir, per version, on first use.
TOOLS_DIR ?= $(HOME)/.cache/flock/tools
CONTROLLER_GEN_VERSION ?= v0.23.0
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS_DIR)/$(CONTROLLER_GEN_VERSION)
	GOBIN=$(TOOLS_DIR)/$(CONTROLLER_GEN_VERSION) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	@mv $(TOOLS_DIR)/$(CONTROLLER_GEN_VERSION)/controller-gen $@

# crd-ref-docs renders docs/api.md from api/v1alpha1 (types, doc comments, markers).
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION).d
	GOBIN=$(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION).d $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mv $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION).d/golangci-lint $@ && rmdir $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION).d

lint: $(GOLANGCI_LINT) ## Run golangci-lint with .golangci.yml: depguard (the products do not import each other), errorlint, sloglint, staticcheck, vet (built once under ~/.cache/flock/tools).
	$(GOLANGCI_LINT) run ./...

# Helm, from its Go module at a pinned version, for the chart's tests (helm
# lint, template, install/test/upgrade/uninstall on the local cluster) and the
# release's chart package. A cold build (empty Go build cache) took 3m54s
# on 2 shared cores (182s user CPU); later runs reuse the binary.
HELM_VERSION ?= v4.3.2
HELM := $(TOOLS_DIR)/helm-$(HELM_VERSION)

$(HELM):
	@mkdir -p $(TOOLS_DIR)/helm-$(HELM_VERSION).d
	GOBIN=$(TOOLS_DIR)/helm-$(HELM_VERSION).d $(GO) install -ldflags='-X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	@mv $(TOOLS_DIR)/helm-$(HELM_VERSION).d/helm $@ && rmdir $(TOOLS_DIR)/helm-$(HELM_VERSION).d

helm: $(HELM) ## Build Helm $(HELM_VERSION) once under ~/.cache/flock/tools (the chart's tests find it there, or through $$FLOCK_HELM).

CRD_REF_DOCS_VERSION ?= v0.3.0
CRD_REF_DOCS := $(TOOLS_DIR)/crd-ref-docs-$(CRD_REF_DOCS_VERSION)

$(CRD_REF_DOCS):
	@mkdir -p $(TOOLS_DIR)/crd-ref-docs-$(CRD_REF_DOCS_VERSION).d
	GOBIN=$(TOOLS_DIR)/crd-ref-docs-$(CRD_REF_DOCS_VERSION).d $(GO) install github.com/elastic/crd-ref-docs@$(CRD_REF_DOCS_VERSION)
	@mv $(TOOLS_DIR)/crd-ref-docs-$(CRD_REF_DOCS_VERSION).d/crd-ref-docs $@ && rmdir $(TOOLS_DIR)/crd-ref-docs-$(CRD_REF_DOCS_VERSION).d

api-docs: $(CRD_REF_DOCS) ## Generate docs/api.md, the Flock API reference, from the types in api/v1alpha1.
	$(CRD_REF_DOCS) --config=hack/api-docs.yaml --source-path=./api --renderer=markdown --output-path=docs/api.md --log-level=ERROR

generate: $(CONTROLLER_GEN) ## Generate the API's deepcopy code (api/v1alpha1).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

manifests: $(CONTROLLER_GEN) ## Generate the Flock CRD and the controller's RBAC role under config/ (and the CRD into the Helm chart).
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true rbac:roleName=flock-controller paths=./api/... paths=./controller/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@# The Helm chart ships the same CRD (Helm installs crds/ before the templates).
	cp config/crd/bases/flockd.io_flocks.yaml charts/flock-controller/crds/

verify: generate manifests api-docs ## Fail when generated files (deepcopy, CRD, RBAC, docs/api.md) or go.mod/go.sum are stale.
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit"; exit 1; }
	@git diff --exit-code -- api config/crd config/rbac charts/flock-controller/crds docs/api.md || { echo "generated files are stale: run 'make generate manifests api-docs' and commit"; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- api config/crd config/rbac charts/flock-controller/crds docs/api.md)" || { echo "untracked generated files:"; git ls-files --others --exclude-standard -- api config/crd config/rbac charts/flock-controller/crds docs/api.md; exit 1; }

KUBECONFIG ?= $(HOME)/.kube/config

controller: ## Run flock-controller against $$KUBECONFIG (install the CRD first: kubectl apply --server-side -k config/crd).
	$(GO) run ./cmd/flock-controller -kubeconfig=$(KUBECONFIG) -leader-elect=false -metrics-bind-address=0 -health-probe-bind-address=0

controller-demo: cluster-build ## Flock demo: flock-controller creates a NodePinned Flock on the local cluster, scales it 3 -> 4 -> 2; peer-finder sees the members.
	@$(GO) build -o $(BIN)/ ./cmd/flock-controller ./cmd/peer-finder
	@$(FLOCK_CLUSTER) exec -- env BIN=$(BIN) hack/flock-controller-demo.sh

.PHONY: generate manifests api-docs verify controller controller-demo

.PHONY: help build test test-unit test-torch torch-image lint helm mutate fuzz campaign images release release-check demo-simulated bench bench-apiload cluster-build cluster-up cluster-env cluster-down demo FORCE
FORCE:
