# redfence: `make lint` and `make test` are what CI runs (.ci/run) and what a
# newcomer runs.
SHELL := /bin/bash
GO ?= go
GOTEST_FLAGS ?= -race -count=1 -timeout 10m

# make test prints a line per package as it finishes, and the failures.
.PHONY: test deps vet unit
test: deps unit

# The tests start their own redis-server processes and need PostgreSQL
# (a running local server, REDFENCE_TEST_DATABASE_URL, or the binaries to start
# a throwaway one). As root on a system with apt-get, missing pieces are
# installed; otherwise this says exactly what to install.
deps:
	@./scripts/deps.sh

# The repository's modules (go.work names them all). The root is the core
# and the PostgreSQL driver, and requires neither go-redis nor etcd; redis/
# holds the Redis drivers and everything that keeps state in Redis;
# etcddriver/ the etcd driver; cmd/ the redfence command (every store);
# examples/, chaos/ and bench/ their programs and suites; internal/redistest
# and internal/etcdtest the tests' servers. Each builds alone (GOWORK=off):
# lint checks that; the tests run in the workspace.
MODULES := . redis etcddriver cmd examples chaos internal/apicheck internal/redistest internal/etcdtest bench
# bench/'s tests are its benchmarks' self-checks, run by make bench.
TEST_MODULES := $(filter-out bench,$(MODULES))

vet:
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done

# Lint, run by .ci/run before the tests: gofmt, go vet, staticcheck at a
# pinned version, go.mod/go.sum tidy (every module). The instrumentation
# scope's version is one constant (internal/otelscope).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
.PHONY: lint fmt-check staticcheck tidy-check
lint: fmt-check vet staticcheck tidy-check

fmt-check:
	@files=$$(gofmt -l .); if [ -n "$$files" ]; then \
		echo "gofmt -w needed on:"; echo "$$files"; exit 1; fi

staticcheck:
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) run $(STATICCHECK) ./...) || exit 1; done

tidy-check:
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy -diff) || { echo "in $$m"; exit 1; }; done

# Every module's tests; etcddriver's start embedded etcd members, nothing
# to install.
unit:
	@for m in $(TEST_MODULES); do (cd $$m && $(GO) test $(GOTEST_FLAGS) ./...) || status=1; done; exit $${status:-0}

# Side-by-side benchmarks (bench/ is its own module, so peers never enter
# redfence's go.mod): BENCH_ROUNDS interleaved rounds of every benchmark, then
# medians and per-round ratios; then the same for the etcd driver
# (bench-etcd). BENCH=regexp narrows the Redis rounds, ETCD_BENCH the etcd
# ones.
BENCH ?= .
BENCH_ROUNDS ?= 5
BENCH_TIME ?= 1s
.PHONY: bench bench-redis
bench: bench-redis bench-etcd

bench-redis:
	@rm -f bench/rounds.txt
	@for i in $$(seq 1 $(BENCH_ROUNDS)); do \
		echo "### round $$i" | tee -a bench/rounds.txt; \
		(cd bench && $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCH_TIME) -count 1 .) | tee -a bench/rounds.txt || exit 1; \
	done
	cd bench && $(GO) run ./report < rounds.txt

# The etcd driver against concurrency.Mutex on one embedded etcd member
# (etcddriver/internal/bench, in the etcd module so that bench/ never compiles
# etcd): the same rounds and report as make bench. ETCD_BENCH=regexp narrows it.
ETCD_BENCH ?= .
.PHONY: bench-etcd
bench-etcd:
	@rm -f bench/etcd-rounds.txt
	@for i in $$(seq 1 $(BENCH_ROUNDS)); do \
		echo "### round $$i" | tee -a bench/etcd-rounds.txt; \
		(cd etcddriver && $(GO) test -run '^$$' -bench '$(ETCD_BENCH)' -benchtime $(BENCH_TIME) -count 1 ./internal/bench) | tee -a bench/etcd-rounds.txt || exit 1; \
	done
	cd bench && $(GO) run ./report < etcd-rounds.txt

# What one uncontended Lock+Unlock costs the Redis server, in instructions
# (callgrind): repeatable where wall-clock numbers on a small VM are not.
.PHONY: bench-server
bench-server:
	cd bench && $(GO) run ./servercost

# The stampede demo: embedded Redis, nothing to set up (REDIS_URL to use a server).
.PHONY: demo
demo:
	$(GO) run ./examples/stampede

# The reliability suite for CHAOS_DURATION per setup (single node, Redlock,
# Sentinel, the other stores, the multi-key transfers; then etcd, in its
# module); make test runs a bounded version. Both runs go on when one
# fails; the target fails if either did (pipefail: the filter alone would
# always succeed).
CHAOS_DURATION ?= 4m
CHAOS_FILTER = grep -E '^(=== RUN|--- |ok|FAIL|PASS)|^\s+\S+\.go:[0-9]+: |Error'
.PHONY: chaos
chaos:
	@set -o pipefail; status=0; \
	(cd chaos && $(GO) test -race -count=1 -timeout 60m -v -run Chaos . -chaos.duration=$(CHAOS_DURATION)) 2>&1 | $(CHAOS_FILTER) || status=1; \
	(cd etcddriver && $(GO) test -race -count=1 -timeout 60m -v -run Chaos ./internal/chaos -chaos.duration=$(CHAOS_DURATION)) 2>&1 | $(CHAOS_FILTER) || status=1; \
	exit $$status
