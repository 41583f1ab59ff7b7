GO      ?= go
BIN     := bin/weir
PKGS    := ./...
# The suite runs as two halves side by side, each two packages at a time, the longest
# first (so nothing long starts last):
# - PROCPKGS, the process-level tests (test/...): Weir runs in processes of its own, built
#   without the race detector; the test binaries only drive clients and check results, and
#   instrumenting them would cost a core while finding races in test code alone.
# - RACEPKGS, everything else, with the race detector: unit tests and the in-process
#   clusters (which give leases and Raft room for a busy machine: cluster_test.go's
#   testTimeouts).
# Its output comes first; the process-level half's follows when both are done.
TESTFLAGS ?= -count=1 -timeout 25m -p 2
PROCPKGS  := ./test/ ./test/zonelab/ ./test/chaos/ ./test/hostile/ ./test/nfsfs/ ./test/proccluster/
RACEPKGS   = ./cluster/ ./controller/ ./broker/ ./wal/ $(shell $(GO) list ./... | grep -v '/weir/test' | sed 's|^github.com/weir-io/weir|.|')

# The image's labels: `weir version` prints VERSION; REVISION is the commit.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGEDIR := bin/image

.PHONY: run build test vet fuzz bench bench-quick fsxlab clean image deploy-test

run: build ## run a local Weir on the embedded defaults (data under ./data, Kafka on 127.0.0.1:9092)
	./$(BIN) dev

build:
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(REVISION)" -o $(BIN) ./cmd/weir

vet:
	$(GO) vet $(PKGS)
	cd deploy && $(GO) vet ./...

# The container image, built without a container engine (deploy/image): a static binary
# in $(IMAGEDIR)/oci (OCI image layout: skopeo, crane, podman) and $(IMAGEDIR)/weir.tar
# (docker load). deploy/image/Dockerfile builds the same image with an engine.
image: ## the container image: bin/image/oci and bin/image/weir.tar
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION) -X main.commit=$(REVISION)" -o $(IMAGEDIR)/weir ./cmd/weir
	cd deploy && SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null) $(GO) run ./image/mkimage \
		--binary ../$(IMAGEDIR)/weir --version $(VERSION) --revision $(REVISION) \
		--layout ../$(IMAGEDIR)/oci --tarball ../$(IMAGEDIR)/weir.tar

# deploy/ is a module of its own (go-containerregistry, compose-go and Prometheus's rule
# parser stay out of Weir's): the image, compose file, alerts, chart and Terraform tests.
# About 6 s with a warm build cache; compiling its test binaries cold takes ~1.5 min on
# 2 busy cores. The compose test builds cmd/weir (cached by then under make test).
deploy-test:
	cd deploy && $(GO) test -count=1 -timeout 15m ./...

test: vet ## everything CI runs
	@proclog=$$(mktemp); \
	( $(GO) test $(TESTFLAGS) $(PROCPKGS); rc=$$?; $(MAKE) --no-print-directory deploy-test || rc=1; exit $$rc ) >$$proclog 2>&1 & proc=$$!; \
	$(GO) test $(TESTFLAGS) -race $(RACEPKGS); race=$$?; \
	wait $$proc; procrc=$$?; \
	echo "--- process-level tests (test/...) and deploy/"; cat $$proclog; rm -f $$proclog; \
	test $$race -eq 0 && test $$procrc -eq 0

# Every func FuzzX in a *_test.go file has a line here: internal/repocheck's
# TestMakeFuzzRunsEveryTarget fails otherwise. -fuzz is a regexp that must match one target.
fuzz: ## a short run of every fuzz target
	$(GO) test ./wal/ -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 30s
	$(GO) test ./broker/kafka/ -run '^$$' -fuzz FuzzParseRequest -fuzztime 30s
	$(GO) test ./broker/kafka/ -run '^$$' -fuzz FuzzFetchSessionUpdate -fuzztime 20s
	$(GO) test ./internal/recbatch/ -run '^$$' -fuzz FuzzValidateProduce -fuzztime 30s
	$(GO) test ./internal/recbatch/ -run '^$$' -fuzz FuzzValidateRecords -fuzztime 20s
	$(GO) test ./broker/group/ -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 20s
	$(GO) test ./broker/txn/ -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 20s
	$(GO) test ./gossip/ -run '^$$' -fuzz FuzzDecodeMeta -fuzztime 20s
	$(GO) test ./objectstore/objfmt/ -run '^$$' -fuzz FuzzParseFooter -fuzztime 20s
	$(GO) test ./objectstore/objfmt/ -run '^$$' -fuzz FuzzParseIndex -fuzztime 20s
	$(GO) test ./objectstore/objfmt/ -run '^$$' -fuzz FuzzSplitBatches -fuzztime 20s
	$(GO) test ./routing/ -run '^$$' -fuzz FuzzZoneTag -fuzztime 20s
	$(GO) test ./broker/peer/ -run '^$$' -fuzz FuzzDecoders -fuzztime 20s
	$(GO) test ./broker/peer/ -run '^$$' -fuzz FuzzDecodeMarkersRequest -fuzztime 20s
	$(GO) test ./broker/peer/ -run '^$$' -fuzz FuzzDecodeVerifyTxnRequest -fuzztime 20s
	$(GO) test ./broker/peer/ -run '^$$' -fuzz FuzzAuth -fuzztime 20s
	$(GO) test ./security/sasl/ -run '^$$' -fuzz FuzzScram -fuzztime 20s

# BENCHFLAGS: e.g. --json, --keep, --skip cold, -v (weir bench suite --help).
bench: build ## the performance suite: one table of figures beside their limits and targets (~6 min)
	./$(BIN) bench suite $(BENCHFLAGS)

bench-quick: build ## the same suite with short runs (~2 min, noisier)
	./$(BIN) bench suite --quick $(BENCHFLAGS)

# The FSx-like lab's measurements (docs/FSXLAB.md): produce latency on the FSx profile,
# a 30 s storage freeze under load, failover on the lab file system. Root and /dev/fuse.
fsxlab: build ## measurements on the FSx-like lab file system (~6 min)
	WEIR_FSXLAB_MEASURE=1 WEIR_FSXLAB_CAP_MIB=8 $(GO) test -count=1 -timeout 20m -run TestFSxProduceLatencyMeasure -v ./test/
	WEIR_FSX_FREEZE=30s $(GO) test -count=1 -timeout 20m -run 'TestFSxStorageFreeze$$' -v ./test/
	./$(BIN) bench failover --fsx fsx --partitions 1000 --tail-mib 64 --moves 0

clean:
	rm -rf bin data
