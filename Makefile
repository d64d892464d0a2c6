# raet-go. `make demo` shows it working; `make test` is everything CI checks.
GO        ?= go
FUZZTIME  ?= 30s
SMOKETIME ?= 4s
TESTFLAGS ?= -race -timeout 30m

.PHONY: all demo test deps generate check-gen fmt-check vet tidy-check unit fuzz fuzz-smoke bench bench-codec clean

all: test

## demo: the main job; needs nothing but Go.
demo:
	$(GO) run ./examples/heads

## test: everything CI checks (.ci/run calls this).
test: deps check-gen fmt-check vet tidy-check unit fuzz-smoke

## deps: install what the tests need when it is missing (Debian packages when root).
deps:
	@scripts/deps.sh

## generate: write the generated files from spec/raet.yaml.
generate:
	$(GO) run ./cmd/raetgen -w

## check-gen: fail when a generated file is stale (prints the diff).
check-gen:
	$(GO) run ./cmd/raetgen

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

tidy-check:
	$(GO) mod tidy -diff

unit:
	$(GO) test $(TESTFLAGS) ./...

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

## fuzz-smoke: every fuzz target briefly (part of make test).
fuzz-smoke:
	scripts/fuzz.sh $(SMOKETIME)

## bench: every benchmark, with allocations.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

bench-codec:
	$(GO) test -run='^$$' -bench=Codecs -benchmem -count=6 ./codec/

clean:
	$(GO) clean -testcache
