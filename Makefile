# Roost — make targets. `make help` lists them.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
TOOLS := $(BIN)/tools
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/roostfleet/roost/version.Version=$(VERSION)

# Pinned code generators (make generate): changing one is a reviewed change.
BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2

.DEFAULT_GOAL := help

help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build roost-hub, roostctl, roost-agent and roost-image into bin/
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

test: ## run every test tier CI runs (unit, root/integration, Kubernetes API, simulations with 8 rollout seeds of make test-sim's 20 to keep CI under an hour, e2e), printing each tier's time
	@for t in test-unit test-root test-kube test-sim e2e; do \
		s=$$(date +%s); ROOST_SIM_SEEDS=$${ROOST_SIM_SEEDS:-8} $(MAKE) --no-print-directory $$t || { echo "== tier $$t FAILED after $$(( $$(date +%s) - s ))s"; exit 1; }; \
		echo "== tier $$t: $$(( $$(date +%s) - s ))s"; \
	done

test-unit: ## fast unit tests with the race detector (no root, no processes, no VMs; installs the image builder's Debian packages, e.g. squashfs-tools, promtool for the alerting rules and systemd-journal-remote for the journal tests, when root)
	@if [ "$$(id -u)" = 0 ]; then ./images/deps.sh --monitoring; fi
	$(GO) test -short -race -count=1 ./...

test-root: build ## integration tests: real hub processes and Raft clusters on loopback; network-namespace tests need root
	ROOST_BIN=$(BIN) $(GO) test -v -count=1 -timeout 30m -run . ./test/... ./netprofiles/...
	$(GO) test -v -count=1 -timeout 10m -run 'TestRolloutSurvivesLeaderLoss|TestExitStatusesMatchState' ./hub/

e2e: testbed testbin ## QEMU end-to-end tests (no KVM needed; ~40-55 min): the ISO enrolls under SeaBIOS and OVMF; the main job on a UEFI server; a v1 → v2 rollout on two; a real Kubernetes worker joining kube-apiserver on the host (test/e2e)
	./images/deps.sh --e2e
	ROOST_E2E=1 ROOST_BIN=$(BIN) $(GO) test -v -count=1 -p 1 -timeout 85m ./imagebuilder/e2e/ ./test/e2e/

e2e-worker: testbed testbin ## the worker end-to-end test alone (TestWorker, also part of e2e): a QEMU server joins a real kube-apiserver on the host, its Node turns Ready, a pod with a PodDisruptionBudget is drained for a v1 → v2 rollout
	./images/deps.sh --e2e
	ROOST_E2E=1 ROOST_BIN=$(BIN) $(GO) test -v -count=1 -timeout 60m -run 'TestWorker' ./test/e2e/

testbed: build ## build the testbed OS release bundle from Debian packages (cached in _output/testbed; installs debootstrap etc.)
	ROOST_BIN=$(BIN) ./images/testbed/build.sh

testbin: ## build kube-apiserver, kube-controller-manager and etcd for the tests into a cache folder (hack/testbin; cold ~15 min, then seconds)
	./hack/testbin/build.sh

# Packages whose tests start a real kube-apiserver: those importing hub/kube/kubetest.
KUBE_TEST_PKGS = $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | awk '/ github.com\/roostfleet\/roost\/hub\/kube\/kubetest( |$$)/ {print $$1}'

test-kube: testbin ## tests against a real kube-apiserver and etcd (envtest; hub/kube/kubetest and every package importing it)
	KUBEBUILDER_ASSETS=$$(./hack/testbin/build.sh) $(GO) test -v -count=1 -timeout 20m $$($(KUBE_TEST_PKGS)) ./hub/kube/kubetest/

test-sim: ## simulations (fake clock, real FSM and controllers): the rollout over 2,000 servers in 40 pools, three time zones, a DST change, injected failures, 20 seeds; the operations log of 10,000 servers over a day; remediation and the safety freeze over 2,000 servers, 3 seeds
	$(GO) test -v -count=1 -timeout 60m -run 'TestRolloutSimulation|TestEventsSimulation' ./hub/rollout/
	$(GO) test -v -count=1 -timeout 10m -run TestRemediationSimulation ./hub/remediation/

bench: build testbin ## benchmarks: Raft commit throughput and latency (1, 16, 256 clients) side by side with a 3-member etcd in the same run (Roost ÷ etcd); 1 and 3 voters, both log stores; linearizable reads; FSM apply; 1,000 enrollments; hub memory per agent at 10,000 agents against a bare gRPC server; ISO write throughput vs xorriso; rollout planning and Revision rendering steps for 10,000 servers
	./images/deps.sh --bench
	ROOST_BIN=$(BIN) ROOST_TESTBIN_DIR=$$(./hack/testbin/build.sh) $(GO) test -run '^$$' -bench . -benchtime 3s -timeout 60m ./hub/state/ ./hub/raftnode/ ./hub/rollout/ ./hub/revisions/ ./test/bench/ ./imagebuilder/iso/

scale: build ## fleet rollout through real hub processes: ROOST_SCALE_AGENTS simulated Servers (default 2000; 10000 for the issue's size) in 50 pools, maxUnavailable 10%, roll to a new release on 1 member and on 3 with the leader killed (ROOST_SCALE_MEMBERS=1,3): publish→fleet Good time, hub CPU and RSS, Raft entries per Machine; fails on a pool over maxUnavailable or a double Lease
	ROOST_BIN=$(BIN) ROOST_SCALE_AGENTS=$${ROOST_SCALE_AGENTS:-2000} $(GO) test -run '^$$' -bench BenchmarkFleetRollout -benchtime 1x -timeout 180m ./test/bench/

lint: ## go vet, gofmt and buf lint
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(MAKE) --no-print-directory tools
	cd proto && PATH=$(TOOLS):$$PATH buf lint

tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc

$(TOOLS)/buf:
	GOBIN=$(TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

generate: tools ## regenerate protobuf code (pinned buf + plugins) and the CLI reference
	cd proto && PATH=$(TOOLS):$$PATH buf generate
	$(GO) run ./cmd/roostctl docs docs/cli

check-generated: generate ## fail when committed generated code differs from `make generate`
	@git diff --exit-code -- proto docs/cli || { echo "generated code is stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- proto docs/cli)" || { git status --porcelain -- proto docs/cli; echo "untracked generated files: run 'make generate' and commit"; exit 1; }

demo: ## the main job, narrated: a hub, the testbed image, a QEMU server that enrolls, is assigned to pool demo and boots from disk (hack/demo.sh)
	./hack/demo.sh

.PHONY: help build test test-unit test-root test-kube test-sim e2e e2e-worker testbed testbin bench scale lint tools generate check-generated demo
