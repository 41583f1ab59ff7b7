GO      ?= go
BIN     := bin/weir
PKGS    := ./...
# Unit and in-process tests run with the race detector; the process-level tests in test/
# build their own weir binary. Most of the suite waits (on processes, sockets, timeouts),
# so packages run side by side (-p 3); the longest start first (SLOWPKGS), so the suite
# is not left waiting on one of them at the end. The in-process clusters' tests give
# leases and Raft room for a busy machine (cluster/cluster_test.go: testTimeouts).
TESTFLAGS ?= -count=1 -timeout 25m -p 3
SLOWPKGS  := ./test/ ./test/zonelab/ ./cluster/ ./test/chaos/ ./controller/ ./test/hostile/ ./broker/ ./wal/

.PHONY: run build test vet fuzz bench bench-quick fsxlab clean

run: build ## run a local Weir on the embedded defaults (data under ./data, Kafka on 127.0.0.1:9092)
	./$(BIN) dev

build:
	$(GO) build -o $(BIN) ./cmd/weir

vet:
	$(GO) vet $(PKGS)

test: vet ## everything CI runs
	$(GO) test $(TESTFLAGS) -race $(SLOWPKGS) $(PKGS)

# Every func FuzzX in a *_test.go file has a line here: internal/repocheck's
# TestMakeFuzzRunsEveryTarget fails otherwise. -fuzz is a regexp that must match one target.
fuzz: ## a short run of every fuzz target
	$(GO) test ./wal/ -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 30s
	$(GO) test ./broker/kafka/ -run '^$$' -fuzz FuzzParseRequest -fuzztime 30s
	$(GO) test ./internal/recbatch/ -run '^$$' -fuzz FuzzValidateProduce -fuzztime 30s
	$(GO) test ./internal/recbatch/ -run '^$$' -fuzz FuzzValidateRecords -fuzztime 20s
	$(GO) test ./broker/group/ -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 20s
	$(GO) test ./gossip/ -run '^$$' -fuzz FuzzDecodeMeta -fuzztime 20s
	$(GO) test ./objectstore/objfmt/ -run '^$$' -fuzz FuzzParseFooter -fuzztime 20s
	$(GO) test ./objectstore/objfmt/ -run '^$$' -fuzz FuzzParseIndex -fuzztime 20s
	$(GO) test ./objectstore/objfmt/ -run '^$$' -fuzz FuzzSplitBatches -fuzztime 20s
	$(GO) test ./routing/ -run '^$$' -fuzz FuzzZoneTag -fuzztime 20s
	$(GO) test ./broker/peer/ -run '^$$' -fuzz FuzzDecoders -fuzztime 20s
	$(GO) test ./broker/peer/ -run '^$$' -fuzz FuzzAuth -fuzztime 20s
	$(GO) test ./security/sasl/ -run '^$$' -fuzz FuzzScram -fuzztime 20s

# BENCHFLAGS: e.g. --json, --keep, --skip cold, -v (weir bench suite --help).
bench: build ## the performance suite: one table of figures beside their limits (~6 min)
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
