# redfence: `make test` is what CI runs (.ci/run) and what a newcomer runs.
SHELL := /bin/bash
GO ?= go
GOTEST_FLAGS ?= -race -count=1 -timeout 10m

.PHONY: test deps vet unit
test: deps vet unit

# The tests start their own redis-server processes and need PostgreSQL
# (a running local server, REDFENCE_TEST_DATABASE_URL, or the binaries to start
# a throwaway one). As root on a system with apt-get, missing pieces are
# installed; otherwise this says exactly what to install.
deps:
	@./scripts/deps.sh

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

unit:
	$(GO) test $(GOTEST_FLAGS) ./...

# Side-by-side benchmarks (bench/ is its own module; peers arrive with issue 10).
.PHONY: bench
bench:
	cd bench && $(GO) test -run '^$$' -bench . -benchtime 2s -count 5 .

# The stampede demo: embedded Redis, nothing to set up (REDIS_URL to use a server).
.PHONY: demo
demo:
	$(GO) run ./examples/stampede
