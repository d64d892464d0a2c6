# raet-go. `make demo` shows it working; `make test` is everything CI checks.
GO        ?= go
FUZZTIME  ?= 30s
SMOKETIME ?= 4s
TESTFLAGS ?= -race -timeout 30m -tags pcap
DEMO_DIR  ?= $(or $(TMPDIR),/tmp)/raet-demo

.PHONY: all help install demo test deps generate check-gen fmt-check vet lint tidy-check unit allocs flood heap fuzz fuzz-smoke bench bench-codec plugins bench-plugins bench-peers bench-peers-check bench-wan netem-check bench-fleet clean

all: test

## help: list the targets and what they do.
help:
	@awk '/^## [a-z-]+:/ { sub(/^## /, ""); t = $$0; sub(/:.*/, "", t); d = $$0; sub(/^[^:]*: */, "", d); printf "  %-18s %s\n", t, d; next } \
		/^## / { sub(/^## /, ""); printf "  %-18s %s\n", "", $$0 }' $(firstword $(MAKEFILE_LIST))

## install: install raet and raetdump into $(go env GOBIN) (or ~/go/bin).
install:
	$(GO) install ./cmd/raet ./cmd/raetdump

## demo: the main job; needs nothing but Go. Two estates join, allow and
## exchange messages (the default AEAD coat); raetdump then shows their traffic,
## verified and decrypted with the key log, and draws it (flow.html).
demo:
	@mkdir -p $(DEMO_DIR)
	@rm -rf $(DEMO_DIR)/demo.pcapng $(DEMO_DIR)/keys.log $(DEMO_DIR)/keeps $(DEMO_DIR)/flow.html
	$(GO) run ./examples/demo -pcap $(DEMO_DIR)/demo.pcapng -keylog $(DEMO_DIR)/keys.log -keeps $(DEMO_DIR)/keeps
	@echo
	@echo "== raetdump: the same traffic, the handshake's signatures verified with the keeps, every AEAD coat opened (and so authenticated) with the key log =="
	$(GO) run ./cmd/raetdump -r $(DEMO_DIR)/demo.pcapng -keylog $(DEMO_DIR)/keys.log \
		-keep $(DEMO_DIR)/keeps/alpha -keep $(DEMO_DIR)/keeps/beta -c 12
	@echo
	@echo "== raetdump: the small messages in bundles, their dones in answers =="
	@$(GO) run ./cmd/raetdump -r $(DEMO_DIR)/demo.pcapng -keylog $(DEMO_DIR)/keys.log \
		-keep $(DEMO_DIR)/keeps/alpha -keep $(DEMO_DIR)/keeps/beta -q | grep -E 'RAET message (bundle|answers)'
	@echo
	@echo "== raetdump -T: the transactions; -flow: the sequence diagram =="
	$(GO) run ./cmd/raetdump -r $(DEMO_DIR)/demo.pcapng -keylog $(DEMO_DIR)/keys.log \
		-keep $(DEMO_DIR)/keeps/alpha -keep $(DEMO_DIR)/keeps/beta -T -flow $(DEMO_DIR)/flow.html
	@echo "the flow: $(DEMO_DIR)/flow.html"

## test: everything CI checks (.ci/run calls this).
test: deps check-gen fmt-check vet lint tidy-check unit allocs flood heap fuzz-smoke bench-peers-check netem-check

## deps: install what the tests need when it is missing (Debian packages when root).
deps:
	@scripts/deps.sh

## generate: write the generated files from spec/raet.yaml.
generate:
	$(GO) run ./cmd/raetgen -w
	plugins/proto/gen.sh

## check-gen: fail when a generated file is stale (prints the diff).
check-gen:
	$(GO) run ./cmd/raetgen
	plugins/proto/gen.sh -check

## fmt-check: fail when a Go file is not gofmt'd.
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## vet: go vet, with and without the pcap tag.
vet:
	$(GO) vet ./...
	$(GO) vet -tags pcap,flood,heap ./...

## lint: staticcheck, pinned in go.mod (the layering rules are a test, internal/layering).
lint:
	$(GO) tool staticcheck -tags pcap,flood,heap ./...

## tidy-check: fail when go.mod or go.sum is not tidy.
tidy-check:
	$(GO) mod tidy -diff

## unit: every test with -race (TESTFLAGS).
unit:
	$(GO) test $(TESTFLAGS) ./...

## allocs: the allocation tests, which -race skips (its instrumentation allocates),
## without -race (part of make test).
allocs:
	$(GO) test -count=1 -tags pcap -run 'Alloc' ./codec/... ./dissect/... ./lane/... ./packet/... ./road/...

## flood: the road's flood tests (a known peer joins and sends while the stack is
## flooded), alone, since they time the known peer (part of make test).
flood:
	$(GO) test -race -timeout 10m -tags pcap,flood -count=1 -run Flood ./road/

## heap: the memory bounds, alone and without the race detector, since they
## measure the process's heap: a main core's heap per remote, and what a main
## stack keeps of the remotes it forgot (part of make test).
heap:
	$(GO) test -count=1 -timeout 10m -tags heap -run 'Heap' ./road/internal/core/
	$(GO) test -count=1 -timeout 10m -tags heap -run 'ForgottenHeap' ./road/

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

## fuzz-smoke: every fuzz target briefly (part of make test).
fuzz-smoke:
	scripts/fuzz.sh $(SMOKETIME)

## bench: every benchmark, with allocations.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

## plugins: the example plugins in bin/plugins, a directory for raet serve --plugins.
plugins:
	$(GO) build -o bin/plugins/ ./plugins/serializer/zstdjson/cmd/raet-serializer-zstdjson \
		./plugins/coat/xchacha/cmd/raet-coat-xchacha ./plugins/queue/boltqueue/cmd/raet-queue-bolt

## bench-plugins: the plugin host's benchmarks.
bench-plugins:
	$(GO) test -run='^$$' -bench=. -benchtime=2s ./plugins/host/

## bench-peers: raw UDP, kcp-go, quic-go, ZeroMQ, NATS and the road stack side by side,
## windowed, one-way and fan-out (nested module bench/peers; ZeroMQ needs libzmq, which deps installs).
bench-peers: deps
	cd bench/peers && $(GO) run . -runs 3 -raet-fast-mps 8192 -modes windowed,one-way,fanout

## netem-check: raet-netem measures itself against a short loss-free scenario: delay, jitter and
## rate for UDP and TCP, and its own lateness (root: namespaces, TUN; part of make test, ~20 s).
## On a machine too busy to emulate the link it refuses (exit 3, as specified): tried three
## times, a refusal each time passes with a note; any other failure fails.
netem-check: deps
	@if [ "$$(id -u)" -ne 0 ]; then echo "netem-check: needs root (CI runs it as root)"; exit 0; fi; \
	$(GO) build -o bin/raet-netem ./cmd/raet-netem || exit 1; \
	for try in 1 2 3; do \
		bin/raet-netem -scenario cmd/raet-netem/scenarios/lan-check.yaml -check -packets 5000 -rate-dur 2s -tcp-dur 4s; \
		rc=$$?; [ $$rc -eq 3 ] || exit $$rc; sleep 2; \
	done; \
	echo "netem-check: refused 3 times: this machine is too busy for the bridge's 1 ms lateness bound (its refusal is the specified answer; measure on a quiet machine)"

## bench-wan: bench/peers over raet-netem's standard WAN scenarios (root): 64 B windowed at
## 50 ms RTT with 0, 1 and 5% loss and at 200 ms RTT with 1%, then 1 KiB one-way over 10 Mbit/s
## with 50 ms RTT; tables on stdout. WAN_FLAGS: more bench/peers flags (e.g. -peers).
WAN_RUNS ?= 3
WAN_DUR  ?= 20s
WAN_FLAGS ?=
bench-wan: deps
	$(GO) build -o bin/raet-netem ./cmd/raet-netem
	cd bench/peers && for s in wan-50ms wan-50ms-1pct wan-50ms-5pct wan-200ms-1pct; do \
		$(GO) run . -link ../../cmd/raet-netem/scenarios/$$s.yaml -netem ../../bin/raet-netem \
			-modes windowed -sizes 64 -runs $(WAN_RUNS) -dur $(WAN_DUR) $(WAN_FLAGS) || exit 1; done
	cd bench/peers && $(GO) run . -link ../../cmd/raet-netem/scenarios/wan-10mbit-50ms.yaml -netem ../../bin/raet-netem \
		-modes one-way -sizes 1024 -runs $(WAN_RUNS) -dur $(WAN_DUR) $(WAN_FLAGS)

## bench-fleet: one main estate and N client stacks over a few processes: the growth table and
## issue 14's checks (FLEET_N=100,1000,5000,10000 for the whole table; the keep goes under /var/tmp;
## more flags in FLEET_FLAGS, e.g. FLEET_FLAGS='-profiles fast -leave-timeout 0').
FLEET_N ?= 100,1000
FLEET_FLAGS ?=
bench-fleet:
	$(GO) run ./bench/fleet -n $(FLEET_N) -table $(FLEET_FLAGS)

## bench-peers-check: vet and smoke-test the nested bench/peers module (it downloads its
## peers; part of make test).
bench-peers-check: deps
	cd bench/peers && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 5m ./... && $(GO) mod tidy -diff

## bench-codec: head codec benchmarks, 6 runs (feed to benchstat).
bench-codec:
	$(GO) test -run='^$$' -bench=Codecs -benchmem -count=6 ./codec/

## clean: forget cached test results.
clean:
	$(GO) clean -testcache
