# stencil. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

export GOTOOLCHAIN := local
# Binaries built by `make tools`; the local control plane finds them here.
BIN := $(CURDIR)/bin
comma := ,
export STENCIL_BIN_DIR := $(BIN)

KUBECTL ?= $(BIN)/kubectl
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint
IMG ?= stencil:dev
# Integration and e2e tests start their own control plane; each can take a few
# minutes on two cores.
TEST_TIMEOUT ?= 30m
# STAMP is the release a clean checkout is at (its tag vX.Y.Z), else empty
# (a checkout with changes is not the release): stamped into the binary
# (stencil version, stencil_build_info). Not VERSION, which make kind and
# make api-version read as an API version.
STAMP := $(shell git diff --quiet HEAD 2>/dev/null && git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null)
LDFLAGS = $(if $(STAMP),-X github.com/stencil-operator/stencil/internal/cli.stampedVersion=$(STAMP))

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z_-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: tools
tools: ## Build the pinned tools into bin/ (cached; a second run builds nothing).
	hack/tools/install.sh $(BIN)

.PHONY: manifests
manifests: tools ## Generate the CRDs (config/crd/bases, and the test kind's), the RBAC (config/rbac/role.yaml), the graph kinds' deletion policy (config/policy/graph_deletion.yaml) and the Helm chart (dist/chart).
	rm -f config/crd/bases/*.yaml internal/testing/testkind/crd/*.yaml # from scratch: a renamed or removed kind leaves no CRD behind
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) crd paths=./internal/testing/testkind/... output:crd:artifacts:config=internal/testing/testkind/crd
	go run . manifests

.PHONY: kind
kind: tools ## Scaffold a kind: make kind GROUP=gadgets.example.com VERSION=v1alpha1 KIND=Gadget (API types, templates, samples, registration, a first template test with its expected output).
	go run . create kind --group "$(GROUP)" --version "$(or $(VERSION),v1alpha1)" --kind "$(KIND)"
	$(MAKE) generate manifests
	go run . test --templates templates --update $(shell echo "$(KIND)" | tr A-Z a-z)

.PHONY: api-version
api-version: tools ## Give a kind a new API version: make api-version KIND=Gadget VERSION=v1 (docs/evolve-api.md).
	go run . create version --kind "$(KIND)" --version "$(VERSION)"
	$(MAKE) generate manifests

.PHONY: generate
generate: tools ## Generate DeepCopy methods for the API types and render/schema's table of the built-in types' required fields.
	$(CONTROLLER_GEN) object paths=./api/... paths=./internal/testing/testkind/...
	go generate ./render/schema

.PHONY: fmt
fmt: ## Format the Go code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet, with every build tag the tests use.
	go vet ./...
	go vet -tags e2e ./e2e/...

.PHONY: lint
lint: tools ## Run golangci-lint (.golangci.yml).
	$(GOLANGCI_LINT) run ./...

.PHONY: test
test: tools build ## Run every test tier: unit, integration and e2e, each on a real local control plane, several test processes at once (hack/testrun; about 7 minutes warm on 2 cores, bound by CPU: it prints each process's CPU time).
	go run ./hack/testrun -timeout $(TEST_TIMEOUT) $(TEST_ARGS) ./...

# The edit loop: the unit tests, and the SSA engine's integration tests on one
# local control plane; not the kind reconciler's, the decorators' or e2e.
FAST_PACKAGES := ./api/... ./render/... ./reconciler/engine/... ./reconciler/rollout/... ./reconciler/shard/... ./internal/testing/layering/... ./reconciler/fence/... ./internal/operator/metricsauth/... ./internal/cli/...

.PHONY: test-fast
test-fast: tools ## Run the unit tests and the SSA engine's own integration tests (about 30 s warm): the edit loop; `make test` before a commit.
	go run ./hack/testrun -timeout $(TEST_TIMEOUT) $(TEST_ARGS) $(FAST_PACKAGES)

.PHONY: test-e2e
test-e2e: tools build ## Run only the e2e suite (the real binary driven by kubectl), its shards side by side.
	go run ./hack/testrun -timeout $(TEST_TIMEOUT) -v $(TEST_ARGS) ./e2e/...

.PHONY: verify
verify: generate manifests fmt ## Regenerate everything and fail if the tree changed.
	@test -z "$$(git status --porcelain -- .)" || { git status --porcelain -- .; git diff;  echo "generated files are out of date: run 'make generate manifests fmt' and commit"; exit 1; }

.PHONY: bench-decorators
bench-decorators: tools build ## Measure a decorator: the heap its cache of 2,000 pods costs (metadata-only) beside a cache of whole pods; then bin/stencil at 10,000 ReplicaSets, replicaset-podcount off, scoped and cluster-wide (several minutes).
	go run ./hack/decobench -scale=10000

.PHONY: bench-peers
bench-peers: tools build ## Measure stencil (and stencil with one kind, as stencil init builds it) beside the hand-written operator (both variants), kro, the Helm operator (built from hack/tools) and the raw + status floor, one run each per N (default 100, 500, 1000, 5000: about 80 minutes on 2 cores), then the graph workload (bench-graph); writes docs/benchmarks/peers/ and docs/benchmarks/graph/.
	PEERS=1 hack/tools/install.sh $(BIN)
	go run ./hack/bench -peers -n $(if $(N),$(N),100$(comma)500$(comma)1000$(comma)5000) -out docs/benchmarks/peers $(BENCH_ARGS)
	go run ./hack/bench -graph -n 100,500,1000 -quiet 30s -out docs/benchmarks/graph $(BENCH_ARGS)

.PHONY: bench-graph
bench-graph: tools build ## Measure the graph workload alone: stencil's AppStack beside kro with the same graph, N = 100, 500, 1000 (about 10 minutes on 2 cores); writes docs/benchmarks/graph/.
	PEERS=1 hack/tools/install.sh $(BIN)
	go run ./hack/bench -graph -n $(if $(N),$(N),100$(comma)500$(comma)1000) -quiet 30s -out docs/benchmarks/graph $(BENCH_ARGS)

.PHONY: bench
bench: tools build ## Measure stencil against a raw server-side-apply loop (N = 100, 500, 1000, or N=5000,10000: one run each, into docs/benchmarks/large); writes docs/benchmarks/.
	go run ./hack/bench $(if $(N),-n $(N) -runs 1 -out docs/benchmarks/large) $(BENCH_ARGS)

##@ Build

.PHONY: build
build: ## Build the stencil binary into bin/, also as the kubectl plugin bin/kubectl-stencil.
	# Static, as in the image: with cgo the linker exports every symbol
	# (kustomize links Go's plugin package) and the binary grows by a quarter.
	# fieldsv1string: apimachinery interns every managedFields record, so the
	# cache's objects and stencil's baselines keep one copy of each.
	CGO_ENABLED=0 go build -tags fieldsv1string -ldflags "$(LDFLAGS)" -o $(BIN)/stencil .
	ln -f $(BIN)/stencil $(BIN)/kubectl-stencil

# `make run` starts a local control plane whatever the kubeconfig says.
# CONTEXT=<name> runs against that kubeconfig context instead (the current
# one: naming it is the confirmation), joining the deployed operator's leader
# election; there SAMPLES=1 applies config/samples and CRDS=apply applies
# config/crd/bases over the deployed CRDs. RUN_ARGS passes more of hack/run's
# flags (go run ./hack/run -h). CONTEXT, SAMPLES and CRDS count only on make's
# command line: a CONTEXT left in the environment names no cluster.
cmdline = $(if $(filter command line,$(origin $(1))),$($(1)))

.PHONY: run
run: tools build ## Run stencil on a local control plane it starts; CONTEXT=<kubeconfig context> runs it against that cluster instead, under leader election; samples there only with SAMPLES=1.
	go run ./hack/run -context='$(call cmdline,CONTEXT)' -samples='$(call cmdline,SAMPLES)' -crds='$(call cmdline,CRDS)' $(RUN_ARGS)

.PHONY: docker-build
docker-build: ## Build the container image $(IMG) (needs a Docker engine).
	docker build --build-arg VERSION=$(STAMP) -t $(IMG) .

##@ Deployment (to the cluster of the current kubeconfig)

.PHONY: install
install: tools ## Install the CRDs.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: uninstall
uninstall: tools ## Remove the CRDs (and with them every custom resource).
	$(KUBECTL) delete --ignore-not-found -k config/crd

# INSTALLER is where build-installer writes the install manifest.
INSTALLER ?= dist/install.yaml

.PHONY: release
release: ## Cut release RELEASE=vX.Y.Z: CHANGELOG's section for it checked, the CRDs kept as released, a commit and the tag.
	hack/release.sh "$(RELEASE)"

.PHONY: release-crds
release-crds: manifests ## At a release: keep the kinds' CRDs as released (config/crd/released), which stencil lint checks every later change against.
	rm -rf config/crd/released && mkdir -p config/crd/released
	cp config/crd/bases/*.yaml config/crd/released/
	git rev-parse HEAD > config/crd/released/commit.txt

.PHONY: build-installer
build-installer: tools ## Write $(INSTALLER): CRDs, RBAC, namespace and the operator's Deployment with image $(IMG), one file to kubectl apply.
	@mkdir -p $(dir $(INSTALLER))
	$(KUBECTL) kustomize config/default | sed 's|image: stencil:latest|image: $(IMG)|' > $(INSTALLER)

.PHONY: deploy
deploy: build-installer ## Deploy the operator with image $(IMG).
	$(KUBECTL) apply --server-side -f $(INSTALLER)

.PHONY: undeploy
undeploy: tools ## Remove the operator.
	$(KUBECTL) delete --ignore-not-found -k config/default
