# cqlseq: build, test, lint, and a real Cassandra for the integration tests.
#
#   make demo               the embedded-store demo (offline)
#   make test               unit tests (-race, invariant checks, a 20 s fuzz run) + integration tests
#                           against a real cluster: CQLSEQ_CQL_HOSTS if set, else a
#                           container through testcontainers when a Docker engine
#                           answers (IT_CLUSTER), else a Cassandra this Makefile
#                           starts and always stops
#   make image              builds the Cassandra image cqlseq/cassandra:5.0.8 unless present
#   make check-containers   fails if a container or network of a test run is left
#   make bench-latency      RF 3 benchmarks on 3 containers with network delays (slow)
#   make test-netcluster    pause, partition, kill of a container node under load
#   make test-cluster       the replicated-cluster tests: RF=3 at LOCAL_QUORUM /
#                           LOCAL_SERIAL on CQLSEQ_CQL_HOSTS or a 3-node cluster
#                           it starts and stops (not part of make test: slow)
#   make torture            make simulate, then the crash and fault campaign on a
#                           3-node cluster it starts and stops (TORTURE_ARGS adds flags)
#   make simulate           the storage-contract simulation, SIM_RUNS seeds (20,000)
#   make gray-check         issue 22's gray-failure check (part of make test): a node
#                           of a 3-node cluster SIGSTOPped 10 s under load (GRAY_ARGS),
#                           then integration/grayfailure on the same cluster
#   make lint               go vet + staticcheck (+ check-ops when promtool is on PATH)
#   make check-ops          the alert rules (promtool check/test rules) and the
#                           metric names of ops/ (rules, tests, dashboard)
#   make figures            runs the command of each headline figure and prints the
#                           full table (docs/benchmarks.md, The current table) and
#                           the README's Figures list, with the machine named (about
#                           15 minutes: a launcher node, a 3-node cluster, then
#                           make bench-service)
#   make proto              regenerates idservice/gen from idservice/proto (buf and the
#                           protoc-gen-go/connect-go plugins, go install'd into .cache/tools)
#   make bench-recovery     issue 27: a sequencer opening and cqlseq actualize on
#                           1,000,000 events (cqlseq's and Voedger's PLog) on
#                           CQLSEQ_CQL_HOSTS or a launcher node it starts and stops;
#                           RECOVERY_NODES=3: a 3-node cluster at RF 3, RECOVERY_PAUSE=1:
#                           node 2 SIGSTOPped 5 s during each timed replay
#   make sizing             issue 50: bytes on disk per event, workspace and partition in
#                           each mode (scripts/sizing.sh) on a launcher node it starts
#                           and stops (about 10 minutes); docs/operations.md, Sizing
#   make crash-bbolt        SIGKILL cqlseq bench on a bbolt file 100 times, verify after each
#   make cassandra-up/down  a Cassandra for manual work (state in .cache/)
#   make cluster-up NODES=3 a cluster on 127.0.0.1..NODES (prints the hosts);
#   make cluster-down       stops every node it started (state in .cache/)
#   make cqlsh              cqlsh (PyPI, in .venv) against the running cluster
#   make release VERSION=v0.1.0  checks CHANGELOG.md, the tree and `cqlseq version`,
#                           then tags HEAD (DRY_RUN=1: the checks and the message only)

SHELL        := /bin/bash
GO           ?= go
BIN          := $(CURDIR)/bin
CACHE        := $(CURDIR)/.cache
STATE        := $(CACHE)/cassandra.state.json
CLUSTER_STATE := $(CACHE)/cluster.state.json
NODES        ?= 3
NODE_HEAP    ?= 512m
VENV         := $(CURDIR)/.venv
CQLSH        := $(VENV)/bin/cqlsh
CQLSH_VER    ?= 6.2.2
STATICCHECK_VER ?= v0.8.2
PROMTOOL     ?= promtool
LAUNCHER     := $(BIN)/cassandra-launcher
UNIT_FLAGS   ?= -race -tags cqlseq_invariants -count=1 -timeout 15m
IT_FLAGS     ?= -count=1 -p 1 -timeout 30m
# IT_CLUSTER: where test-integration runs the suite without CQLSEQ_CQL_HOSTS:
# testcontainers, launcher, or auto (testcontainers when docker info answers).
IT_CLUSTER   ?= auto
FUZZTIME     ?= 60000x
VOEDGER_FUZZTIME ?= 250000x
# bench-recovery: launcher nodes (1, or a cluster at RF RECOVERY_RF), and
# RECOVERY_PAUSE=1 to pause node 2 during each timed replay (RECOVERY_NODES > 1).
RECOVERY_NODES ?= 1
RECOVERY_RF  ?= 3
RECOVERY_PAUSE ?=
FIGURES_COUNT ?= 5
# simulate: the seeds it runs (make test runs 1..2000 in its unit tests).
SIM_RUNS     ?= 20000
SIM_SEED     ?= 2001
# VERSION: the release bin/cqlseq reports (cqlseq version): the tag at HEAD,
# else empty ("devel"); make release VERSION=vX.Y.Z tags it.
VERSION      ?= $(shell git describe --tags --exact-match 2>/dev/null)
LDFLAGS      := -X github.com/cqlseq/cqlseq/cmd/cqlseq/internal/cli.version=$(VERSION)

.PHONY: sizing release simulate help figures image check-containers bench-latency bench-recovery test-netcluster all build test test-unit test-integration test-cluster torture torture-short gray-check lint check-ops cassandra-up cassandra-down cluster-up cluster-down cqlsh cqlsh-venv demo bench bench-bbolt bench-cql crash-bbolt bench-global alloc-bbolt alloc-cql bench-service proto clean

all: build

build:
	$(GO) build ./...
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/cqlseq ./cmd/cqlseq
	$(GO) build -o $(LAUNCHER) ./testenv/cassandra/cmd/cassandra-launcher

$(LAUNCHER): $(shell find testenv -name '*.go') go.mod
	$(GO) build -o $(LAUNCHER) ./testenv/cassandra/cmd/cassandra-launcher

test:
	@if $(MAKE) --no-print-directory test-unit test-integration; then echo "make test: PASS"; else echo "make test: FAIL"; exit 1; fi

# release tags a version (scripts/release.sh: every check it makes is
# written there); DRY_RUN=1 checks without tagging.
release:
	scripts/release.sh "$(VERSION)" $(if $(DRY_RUN),--dry-run)

# help prints the targets (this file's header).
help:
	@sed -n '1,/^$$/{s/^# \{0,1\}//;p}' $(firstword $(MAKEFILE_LIST))

# test-unit also runs isequencer's tests with the golang-lru cache variant
# (cache_hashicorp.go, tag cqlseq_lru_hashicorp: the design's LRU, kept for
# the side-by-side measurement in docs/benchmarks.md), and ends with short fuzz runs of the bbolt open path (FuzzOpen:
# truncated and bit-flipped copies of a real file never crash the process;
# both bounded by a count of inputs (about 20 s and 10 s here), because a -fuzztime
# duration sometimes ends with the fuzzing engine's own "context deadline
# exceeded" and no failing input) and of the Voedger PLog decoder
# (FuzzDecode: any bytes decode or fail with a corrupt/unsupported-codec
# error, never a panic).
test-unit:
	$(GO) test $(UNIT_FLAGS) ./...
	$(GO) test -race -count=1 -timeout 15m -tags cqlseq_invariants,cqlseq_lru_hashicorp ./isequencer/
	$(GO) test -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME) -fuzzminimizetime 10x ./storage/boltdb/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(VOEDGER_FUZZTIME) -fuzzminimizetime 10x ./plog/voedger/

# test-integration runs the integration module against CQLSEQ_CQL_HOSTS when
# set. Otherwise, when a Docker engine answers (IT_CLUSTER=auto) or with
# IT_CLUSTER=testcontainers, each test package starts its own node in a
# container through testcontainers (integration/itest: CQLSEQ_CQL_IMAGE, else
# scylladb/scylla if it can be had, else cqlseq/cassandra, built if missing),
# every container carries this run's label, and check-containers fails the
# run if one is left; torture-short then runs on a launcher node. Without an
# engine (or IT_CLUSTER=launcher) it starts a Cassandra, runs the tests and
# torture-short with it, and stops it whatever the outcome (trap on EXIT,
# also on Ctrl-C). It never installs an engine. Packages run one at a time
# (-p 1): several use real-time leases, and one starts a private node.
# Then gray-check, on a 3-node cluster of its own.
test-integration: $(LAUNCHER) cqlsh-venv
	@set -euo pipefail; \
	if [ -n "$${CQLSEQ_CQL_HOSTS:-}" ]; then \
	  echo "test-integration: using CQLSEQ_CQL_HOSTS=$$CQLSEQ_CQL_HOSTS"; \
	  (cd integration && CQLSH=$(CQLSH) $(GO) test $(IT_FLAGS) ./...); \
	  $(MAKE) --no-print-directory torture-short HOSTS=$$CQLSEQ_CQL_HOSTS; \
	else \
	  path=$(IT_CLUSTER); \
	  if [ "$$path" = auto ]; then \
	    if docker info >/dev/null 2>&1; then path=testcontainers; else path=launcher; fi; \
	  fi; \
	  case "$$path" in testcontainers|launcher) ;; *) echo "IT_CLUSTER=$$path: want auto, testcontainers or launcher" >&2; exit 2;; esac; \
	  if [ "$$path" = testcontainers ]; then \
	    run=it-$$$$-$$(date +%s); began=$$(date +%s); \
	    echo "test-integration: the integration suite through testcontainers (run label org.cqlseq.run=$$run)"; \
	    itlog=$(CACHE)/it-$$run.log; mkdir -p $(CACHE); rm -f $$itlog; \
	    rc=0; (cd integration && CQLSEQ_IT_LOG=$$itlog CQLSEQ_RUN_ID=$$run CQLSEQ_CQL_CLUSTER=testcontainers CQLSH=$(CQLSH) $(GO) test $(IT_FLAGS) ./...) || rc=$$?; \
	    sed 's/^/test-integration: /' $$itlog 2>/dev/null || true; rm -f $$itlog; \
	    $(MAKE) --no-print-directory check-containers RUN_ID=$$run || rc=1; \
	    echo "test-integration: testcontainers pass $$( [ $$rc -eq 0 ] && echo passed || echo FAILED ) in $$(( $$(date +%s) - began )) s"; \
	    [ $$rc -eq 0 ]; \
	  fi; \
	  ( mkdir -p $(CACHE); state=$(CACHE)/cassandra.test.$$$$.json; \
	    trap '$(LAUNCHER) down -state '"$$state"' || true' EXIT; \
	    hosts=$$($(LAUNCHER) up -state "$$state"); \
	    echo "test-integration: Cassandra (launcher) at $$hosts"; \
	    if [ "$$path" = launcher ]; then \
	      echo "test-integration: the integration suite on the launcher's node"; \
	      (cd integration && CQLSEQ_CQL_HOSTS=$$hosts CQLSEQ_CQL_ENGINE=cassandra CQLSH=$(CQLSH) $(GO) test $(IT_FLAGS) ./...); \
	    fi; \
	    $(MAKE) --no-print-directory torture-short HOSTS=$$hosts; \
	    $(MAKE) --no-print-directory upgrade-cql HOSTS=$$hosts; \
	  ); \
	fi; \
	$(MAKE) --no-print-directory gray-check

# image builds cqlseq's Cassandra image (testenv/cassandra/image.go) unless
# it is present: a Debian base (debootstrap, else debian:bookworm-slim), a JRE
# and iproute2 from Debian, the jars the launcher fetches, an entrypoint
# that writes cassandra.yaml for the container's address.
image: $(LAUNCHER)
	$(LAUNCHER) image

# check-containers fails, after removing them, if containers or networks
# labelled org.cqlseq.test exist (RUN_ID: only that run's,
# org.cqlseq.run=RUN_ID). Without a Docker engine there is nothing to check.
check-containers:
	@if ! docker info >/dev/null 2>&1; then echo "check-containers: no Docker engine answers: nothing to check"; exit 0; fi; \
	filter="label=org.cqlseq.test"; [ -z "$(RUN_ID)" ] || filter="label=org.cqlseq.run=$(RUN_ID)"; \
	left=$$(docker ps -aq --filter "$$filter"); nets=$$(docker network ls -q --filter "$$filter"); \
	if [ -n "$$left$$nets" ]; then \
	  echo "check-containers: FAIL: left behind ($$filter): containers [$$(echo $$left)] networks [$$(echo $$nets)]; removing them" >&2; \
	  [ -z "$$left" ] || docker rm -f -v $$left >/dev/null; [ -z "$$nets" ] || docker network rm $$nets >/dev/null; \
	  exit 1; \
	fi; \
	echo "check-containers: no container or network left ($$filter)"

# torture-short is the campaign's CI variant (about 5 minutes): 20 client
# SIGKILLs across every mode on HOSTS, no node faults, then the short
# skew, contested, modechange and tools phases (-short; tools: cqlseq
# actualize --write between owners killed before their offset write, on a
# keyspace and a bbolt file per mode, about 40 s) and the short service
# phase (issue 37, about 45 s: 3 cqlseq serve instances under vegeta
# v12.13.0, go install'd into .cache/tools; one SIGTERMed, two SIGKILLed,
# each restarted; every response body checked).
torture-short:
	GOBIN=$(CACHE)/tools $(GO) install github.com/tsenart/vegeta/v12@v12.13.0
	$(GO) build -o $(BIN)/cqlseq ./cmd/cqlseq
	$(GO) build -o $(BIN)/cqlseq-torture ./testenv/torture/cmd/cqlseq-torture
	$(BIN)/cqlseq-torture -cqlseq $(BIN)/cqlseq -hosts $(HOSTS) -kills 20 -node-faults 0 -short -vegeta $(CACHE)/tools/vegeta

# upgrade-cql runs testenv/upgrade's CQL variant on HOSTS: owners of the
# commit before version ranges and of this tree alternate on one keyspace
# under load, the older one is refused after this tree's, verify --acks
# finds every acknowledged command (make test runs the bbolt variant).
upgrade-cql:
	CQLSEQ_CQL_HOSTS=$(HOSTS) $(GO) test -count=1 -timeout 10m -run 'TestUpgradeFromBeforeVersionRangesAndRollback/cql' -v ./testenv/upgrade/ 2>&1 | grep -E '^(=== RUN|---|\s+upgrade_test|ok|FAIL|PASS)' ; exit $${PIPESTATUS[0]}

# test-cluster runs the storage conformance suite and LWT race (cqlstore),
# elections, the fenced takeovers (fencing, orchestration) and the restart
# test (its own private node) in keyspaces of replication factor 3.
CLUSTER_PKGS ?= ./cqlstore/ ./elections/ ./fencing/ ./orchestration/ ./restart/
test-cluster: $(LAUNCHER) cqlsh-venv
	@set -euo pipefail; \
	if [ -n "$${CQLSEQ_CQL_HOSTS:-}" ]; then \
	  echo "test-cluster: using CQLSEQ_CQL_HOSTS=$$CQLSEQ_CQL_HOSTS"; hosts=$$CQLSEQ_CQL_HOSTS; \
	else \
	  mkdir -p $(CACHE); state=$(CACHE)/cluster.test.$$$$.json; \
	  trap '$(LAUNCHER) down -state '"$$state"' || true' EXIT; \
	  hosts=$$($(LAUNCHER) up -nodes 3 -heap $(NODE_HEAP) -timeout 600s -state "$$state"); \
	  echo "test-cluster: 3 nodes at $$hosts"; \
	fi; \
	cd integration && CQLSEQ_CQL_HOSTS=$$hosts CQLSEQ_CQL_ENGINE=cassandra CQLSEQ_CQL_RF=3 CQLSH=$(CQLSH) \
	  $(GO) test $(IT_FLAGS) $(CLUSTER_PKGS)

# torture builds cqlseq and the campaign driver, installs vegeta v12.13.0
# into .cache/tools (the service phase's load generator), starts a 3-node
# cluster (or uses CLUSTER_STATE_FILE, a running cluster's state),
# crash-safe (a node's SIGKILL loses no schema change: without it a
# restarted node can come back without the keyspaces created just before),
# runs every phase and prints the table (node_kill, node_pause and partition
# in fenced and trust2 at 4x16, with the acks/s before and during each
# fault; service: 3 cqlseq serve instances under vegeta, instances SIGTERMed
# and SIGKILLed, a node SIGKILLed and one SIGSTOPped, every body checked:
# TORTURE_ARGS='-phases service' runs it alone, about 4 minutes); it exits
# non-zero if a check fails (a missed rate target only with
# TORTURE_ARGS=-rate-targets). The partition phase cuts node 3 off with
# iptables (Debian package iptables; run as root): without a working
# iptables the run fails at once, naming it (TORTURE_ARGS='-phases ...'
# without partition runs the rest). The late phase (about 6 minutes) stops
# nodes so that hints deliver a dead owner's writes after the next owner, in
# another mode, acknowledged commands. Whatever the outcome, also on Ctrl-C, the
# campaign's iptables rules are removed, paused nodes resumed, and the
# cluster it started is stopped.
torture: $(LAUNCHER) simulate
	GOBIN=$(CACHE)/tools $(GO) install github.com/tsenart/vegeta/v12@v12.13.0
	$(GO) build -o $(BIN)/cqlseq ./cmd/cqlseq
	$(GO) build -o $(BIN)/cqlseq-torture ./testenv/torture/cmd/cqlseq-torture
	@set -euo pipefail; \
	if [ -n "$${CLUSTER_STATE_FILE:-}" ]; then state=$$CLUSTER_STATE_FILE; \
	  trap '$(BIN)/cqlseq-torture -cleanup -state '"$$state"' || true' EXIT; \
	else \
	  mkdir -p $(CACHE); state=$(CACHE)/cluster.torture.$$$$.json; \
	  trap '$(BIN)/cqlseq-torture -cleanup -state '"$$state"' 2>/dev/null || true; $(LAUNCHER) down -state '"$$state"' || true' EXIT; \
	  $(LAUNCHER) up -nodes 3 -heap $(NODE_HEAP) -timeout 600s -crash-safe -state "$$state" >/dev/null; \
	fi; \
	$(BIN)/cqlseq-torture -cqlseq $(BIN)/cqlseq -state "$$state" -vegeta $(CACHE)/tools/vegeta $(TORTURE_ARGS)

# simulate runs the storage-contract simulation (testenv/simulation: owners
# in random modes over storage/adversary, checked by plogcheck) for
# SIM_RUNS seeds from SIM_SEED (make test's unit tests run seeds
# 1..2000; make torture runs this first, from seed 2001).
simulate:
	@set -euo pipefail; \
	$(GO) test -count=1 -timeout 60m -run '^TestSimulation$$' -v ./testenv/simulation/ -args -sim.runs $(SIM_RUNS) -sim.seed $(SIM_SEED) | grep -v '^=== RUN'

# gray-check is issue 22's gray-failure check, run by make test (about 2
# minutes with the cluster start): a 3-node cluster (or CLUSTER_STATE_FILE's),
# a keyspace at RF 3 per mode (trust2, fenced), cqlseq bench at 4 partitions
# x 16 clients, node 2 SIGSTOPped for 10 s after 15 s of load, 5 s more
# load, then cqlseq verify --acks. It fails if an acknowledged command is
# lost (any verify finding) or if fewer than 0.2 of the acks/s of the 10 s
# before the pause are acknowledged during it, and prints the ratio.
# GRAY_ARGS adds flags, e.g. GRAY_ARGS="-bench-args '--cql-health-policy=false'"
# (the check must then fail). Then, on the same cluster, integration/grayfailure:
# a late write from a resumed coordinator loses to a newer one, an owner keeps its
# lease while each node in turn is paused, and the elections suite with a node
# paused. The cluster is stopped whatever the outcome.
gray-check: $(LAUNCHER)
	$(GO) build -o $(BIN)/cqlseq ./cmd/cqlseq
	$(GO) build -o $(BIN)/cqlseq-torture ./testenv/torture/cmd/cqlseq-torture
	@set -euo pipefail; \
	if [ -n "$${CLUSTER_STATE_FILE:-}" ]; then state=$$CLUSTER_STATE_FILE; \
	  trap '$(BIN)/cqlseq-torture -cleanup -state '"$$state"' || true' EXIT; \
	else \
	  mkdir -p $(CACHE); state=$(CACHE)/cluster.gray.$$$$.json; \
	  trap '$(BIN)/cqlseq-torture -cleanup -state '"$$state"' 2>/dev/null || true; $(LAUNCHER) down -state '"$$state"' || true' EXIT; \
	  began=$$(date +%s); \
	  $(LAUNCHER) up -nodes 3 -heap $(NODE_HEAP) -timeout 600s -state "$$state" >/dev/null; \
	  echo "gray-check: 3 nodes up in $$(( $$(date +%s) - began )) s"; \
	fi; \
	$(BIN)/cqlseq-torture -cqlseq $(BIN)/cqlseq -state "$$state" -gray $(GRAY_ARGS); \
	hosts=$$($(LAUNCHER) status -state "$$state"); \
	cd integration && CQLSEQ_CLUSTER_STATE=$$(realpath "$$state") CQLSEQ_CQL_HOSTS=$$hosts CQLSEQ_CQL_ENGINE=cassandra CQLSEQ_CQL_RF=3 \
	  $(GO) test $(IT_FLAGS) ./grayfailure/

lint: $(BIN)/staticcheck
	$(GO) vet ./...
	$(GO) vet -tags cqlseq_lru_hashicorp ./isequencer/
	cd integration && $(GO) vet ./...
	$(BIN)/staticcheck ./...
	cd integration && $(BIN)/staticcheck ./...
	@if docker compose version >/dev/null 2>&1; then \
	   docker compose -f docker-compose.yml config -q && docker compose -f docker-compose.cassandra.yml config -q && echo "docker-compose.yml, docker-compose.cassandra.yml: valid"; \
	 else echo "lint: no docker compose client; the compose files are checked by testenv's TestComposeFile and TestComposeCassandraFile"; fi
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@if command -v $(PROMTOOL) >/dev/null 2>&1; then $(MAKE) --no-print-directory check-ops; \
	 else echo "lint: $(PROMTOOL) not on PATH: skipped check-ops (the alert rules; Debian: apt-get install prometheus)"; fi

# check-ops checks ops/: the alert rules parse and their unit tests pass
# (promtool, Debian's prometheus package), and every metric, label and
# label value the rules, their tests and the Grafana dashboard name is one
# package metrics exports (go test ./ops/, also part of make test-unit).
check-ops:
	@command -v $(PROMTOOL) >/dev/null 2>&1 || { echo "check-ops: $(PROMTOOL) not on PATH (Debian: apt-get install prometheus)" >&2; exit 1; }
	$(PROMTOOL) check rules ops/prometheus/cqlseq-alerts.yml
	$(PROMTOOL) test rules ops/prometheus/cqlseq-alerts_test.yml
	$(GO) test -count=1 ./ops/

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VER)

cassandra-up: $(LAUNCHER)
	@mkdir -p $(CACHE)
	$(LAUNCHER) up -state $(STATE)

cassandra-down: $(LAUNCHER)
	$(LAUNCHER) down -state $(STATE)

# cluster-up starts the nodes one after another (slow on 2 cores: minutes)
# and waits until each sees all of them up and normal; a failed start stops
# what it started. cluster-down stops exactly the processes the state names.
cluster-up: $(LAUNCHER)
	@mkdir -p $(CACHE)
	$(LAUNCHER) up -nodes $(NODES) -heap $(NODE_HEAP) -timeout 600s -state $(CLUSTER_STATE)

cluster-down: $(LAUNCHER)
	$(LAUNCHER) down -state $(CLUSTER_STATE)

cqlsh-venv: $(CQLSH)

$(CQLSH):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q cqlsh==$(CQLSH_VER)

# cqlsh opens against CQLSEQ_CQL_HOSTS (first host) or the cluster started by
# make cassandra-up.
cqlsh: $(CQLSH)
	@set -euo pipefail; \
	hp=$${CQLSEQ_CQL_HOSTS:-$$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["host"])' $(STATE) 2>/dev/null || true)}; \
	[ -n "$$hp" ] || { echo "cqlsh: no cluster: set CQLSEQ_CQL_HOSTS or run make cassandra-up" >&2; exit 1; }; \
	hp=$${hp%%,*}; exec $(CQLSH) $${hp%:*} $${hp##*:} $(CQLSH_ARGS)

demo:
	$(GO) run ./cmd/cqlseq demo

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./isequencer/

# bench-bbolt and bench-cql run cqlseq bench with a raw PLog baseline;
# BENCH_ARGS adds flags (e.g. BENCH_ARGS='--mode trust2 --duration 30s').
# bench-cql migrates the keyspace first and needs CQLSEQ_CQL_HOSTS.
bench-bbolt:
	$(GO) run ./cmd/cqlseq bench --store bbolt --baseline $(BENCH_ARGS)

# crash-bbolt SIGKILLs cqlseq bench on a bbolt file 100 times at random
# instants (every mode, 4 partitions x 16 clients, fsync on) and runs
# cqlseq verify after each kill; make test runs 8 kills.
sizing: build cqlsh-venv
	STATE=$(CACHE)/sizing.state.json OUT=$(CACHE)/sizing NODE_HEAP=$(NODE_HEAP) scripts/sizing.sh

crash-bbolt:
	CQLSEQ_CRASH_KILLS=100 $(GO) test -count=1 -run '^TestCrashBBolt$$' -v -timeout 30m ./cmd/cqlseq/

bench-cql:
	@test -n "$${CQLSEQ_CQL_HOSTS:-}" || { echo "bench-cql: set CQLSEQ_CQL_HOSTS" >&2; exit 2; }
	$(GO) run ./cmd/cqlseq migrate $(MIGRATE_ARGS)
	$(GO) run ./cmd/cqlseq bench --store cql --baseline $(BENCH_ARGS)

# figures runs testenv/figures (cqlseq-figures): the core benchmarks (go
# test -bench, medians of FIGURES_COUNT), make bench-recovery, cqlseq bench
# on bbolt, then on a 3-node launcher cluster it starts and stops cqlseq
# bench at RF 3 in trust0, trust2 and fenced (with the nodes' CPU time per
# command) and a fenced run with node 2 SIGSTOPped 15 s. Each bench run's
# timeline and chart go to docs/figures/. Its table is docs/benchmarks.md's
# current table, its headline list the README's Figures.
figures: build
	$(GO) build -o $(BIN)/cqlseq-figures ./testenv/figures/cmd/cqlseq-figures
	$(BIN)/cqlseq-figures -cqlseq $(BIN)/cqlseq -launcher $(LAUNCHER) -heap $(NODE_HEAP) -count $(FIGURES_COUNT) $(FIGURES_ARGS)

# bench-recovery runs cqlseq-recoverybench (testenv/recoverybench) on
# CQLSEQ_CQL_HOSTS, else on one launcher node it starts and stops whatever the
# outcome (trap on EXIT): it writes 1,000,000 events over 10,000 workspaces
# into partition 0 of a fresh keyspace per PLog format (cqlseq's trust2 PLog
# by plog.Writer.WriteGroup, Voedger's from the golden rows), then, in 3
# interleaved runs, times a sequencer opening (New -> first ok Start, a child
# process) and cqlseq actualize, and prints wall time and peak RSS with their
# medians. RECOVERY_ARGS adds flags: -runs N, -keyspace-cqlseq/-keyspace-voedger
# (reuse written keyspaces), -variant name=BENCH,CQLSEQ (compare builds).
# RECOVERY_NODES=3 starts a 3-node launcher cluster instead (heap NODE_HEAP,
# stopped whatever the outcome) and passes -rf $(RECOVERY_RF) (keyspaces in
# NetworkTopologyStrategy, LOCAL_QUORUM reads and writes); RECOVERY_PAUSE=1
# then also passes -pause-state (the cluster's state file) -pause-node 2
# -pause-after 0.5s -pause-for 5s: node 2 is SIGSTOPped 0.5 s into each timed
# opening and actualize and SIGCONTed 5 s later (and on every exit path),
# and each line says when the child ended, e.g.
#   make bench-recovery RECOVERY_NODES=3 RECOVERY_PAUSE=1 RECOVERY_ARGS='-runs 1'
# CLUSTER_STATE_FILE=S runs on that launcher cluster (make cluster-up), as
# RECOVERY_NODES=3 does but without starting or stopping it (a second run
# can then reuse the keyspaces: -keyspace-cqlseq/-keyspace-voedger).
bench-recovery: build
	$(GO) build -o $(BIN)/cqlseq-recoverybench ./testenv/recoverybench/cmd/cqlseq-recoverybench
	@set -euo pipefail; \
	args=(); \
	if [ -n "$${CQLSEQ_CQL_HOSTS:-}" ]; then hosts=$$CQLSEQ_CQL_HOSTS; \
	  [ -z "$(RECOVERY_PAUSE)" ] || { echo "bench-recovery: RECOVERY_PAUSE pauses a node of the cluster this target starts: unset CQLSEQ_CQL_HOSTS" >&2; exit 2; }; \
	  [ "$(RECOVERY_NODES)" = 1 ] || args+=(-rf $(RECOVERY_RF)); \
	elif [ -n "$${CLUSTER_STATE_FILE:-}" ]; then state=$$CLUSTER_STATE_FILE; \
	  hosts=$$($(LAUNCHER) status -state "$$state"); \
	  args+=(-rf $(RECOVERY_RF)); \
	  if [ -n "$(RECOVERY_PAUSE)" ]; then \
	    trap '$(LAUNCHER) resume -state '"$$state"' -node 2 >/dev/null 2>&1 || true' EXIT; \
	    args+=(-pause-state "$$state" -pause-node 2 -pause-after 0.5s -pause-for 5s); \
	  fi; \
	elif [ "$(RECOVERY_NODES)" = 1 ]; then \
	  [ -z "$(RECOVERY_PAUSE)" ] || { echo "bench-recovery: RECOVERY_PAUSE needs RECOVERY_NODES > 1" >&2; exit 2; }; \
	  mkdir -p $(CACHE); state=$(CACHE)/cassandra.recovery.$$$$.json; \
	  trap '$(LAUNCHER) down -state '"$$state"' || true' EXIT; \
	  hosts=$$($(LAUNCHER) up -heap 1g -timeout 600s -state "$$state"); \
	else \
	  mkdir -p $(CACHE); state=$(CACHE)/cluster.recovery.$$$$.json; \
	  trap '$(LAUNCHER) resume -state '"$$state"' -node 2 >/dev/null 2>&1 || true; $(LAUNCHER) down -state '"$$state"' || true' EXIT; \
	  began=$$(date +%s); \
	  hosts=$$($(LAUNCHER) up -nodes $(RECOVERY_NODES) -heap $(NODE_HEAP) -timeout 600s -state "$$state"); \
	  echo "bench-recovery: $(RECOVERY_NODES) nodes up in $$(( $$(date +%s) - began )) s"; \
	  args+=(-rf $(RECOVERY_RF)); \
	  [ -z "$(RECOVERY_PAUSE)" ] || args+=(-pause-state "$$state" -pause-node 2 -pause-after 0.5s -pause-for 5s); \
	fi; \
	echo "bench-recovery: Cassandra at $$hosts; load: $$(uptime)"; \
	$(BIN)/cqlseq-recoverybench -hosts $$hosts -cqlseq $(BIN)/cqlseq "$${args[@]}" $(RECOVERY_ARGS); \
	echo "bench-recovery: done; load: $$(uptime)"

# bench-latency runs cqlseq-netbench (integration/netcluster): three
# containers of cqlseq/cassandra on one Docker network, RF 3, one-way delays
# per node (tc netem, else cqlseq-netdelay), cqlseq bench in trust0, trust2
# and fenced at 1 and 4 partitions x 16 clients under each delay profile;
# prints the table of docs/benchmarks.md (about 45 minutes with the defaults;
# LATENCY_ARGS adds flags, e.g. LATENCY_ARGS='-repeat 1 -profiles 5ms').
# Needs a Docker engine; not part of make test.
bench-latency:
	cd integration && $(GO) build -o $(BIN)/cqlseq-netbench ./netcluster/cmd/cqlseq-netbench
	@set -euo pipefail; run=lat-$$$$-$$(date +%s); \
	rc=0; CQLSEQ_RUN_ID=$$run $(BIN)/cqlseq-netbench $(LATENCY_ARGS) || rc=$$?; \
	$(MAKE) --no-print-directory check-containers RUN_ID=$$run || rc=1; exit $$rc

# test-netcluster: on three containers with delays 0, 0.5 and 5 ms, node 2
# paused 10 s, node 3 disconnected from the network 10 s, node 2 killed and
# restarted, under cqlseq bench (fenced, trust2; 4 x 16); each fault keeps at
# least 0.2 of the rate before it and verify --acks finds nothing. About 6
# minutes; needs a Docker engine; not part of make test.
test-netcluster:
	@set -euo pipefail; run=net-$$$$-$$(date +%s); \
	rc=0; (cd integration && CQLSEQ_RUN_ID=$$run CQLSEQ_NETCLUSTER=1 $(GO) test -count=1 -v -timeout 30m -run TestFaultsKeepServing ./netcluster/) || rc=$$?; \
	$(MAKE) --no-print-directory check-containers RUN_ID=$$run || rc=1; exit $$rc

# bench-global: the global sequences' benchmarks. alloc-bbolt/alloc-cql:
# cqlseq alloc, 4 processes x 16 goroutines drawing 1,000,000 IDs
# (alloc-cql: child processes, after migrate; needs CQLSEQ_CQL_HOSTS).
bench-global:
	$(GO) test -run '^$$' -bench . -count 5 ./galloc/ ./timeshard/ ./ksuuid/

alloc-bbolt:
	$(GO) run ./cmd/cqlseq alloc --procs 4 --goroutines 16 --ids 1000000 --chunk 10000 $(ALLOC_ARGS)

alloc-cql: build
	@test -n "$${CQLSEQ_CQL_HOSTS:-}" || { echo "alloc-cql: set CQLSEQ_CQL_HOSTS" >&2; exit 2; }
	$(BIN)/cqlseq migrate $(MIGRATE_ARGS)
	$(BIN)/cqlseq alloc --store cql --spawn --procs 4 --goroutines 16 --ids 1000000 --chunk 10000 $(ALLOC_ARGS)

# bench-service: cqlseq serve (bbolt, loopback) beside a trivial net/http
# handler under the same vegeta (v12.13.0, installed in .cache/tools): max
# rate, p99 at half the trivial handler's max, batches of 1,000 IDs; then
# its gRPC API beside a trivial Connect handler (internal/lab/bench/trivialgrpc)
# under the same gRPC client (internal/lab/bench/grpcload, h2c): max rate and
# p99 at half the trivial's max (scripts/bench-service.sh, about 9 minutes;
# docs/benchmarks.md). Fails if a response is not 2xx or a gRPC call fails;
# the table is also in .cache/bench-service/table.md.
bench-service:
	GOBIN=$(CACHE)/tools $(GO) install github.com/tsenart/vegeta/v12@v12.13.0
	$(GO) build -o $(BIN)/cqlseq ./cmd/cqlseq
	$(GO) build -o $(BIN)/trivialhttp ./internal/lab/bench/trivialhttp
	$(GO) build -o $(BIN)/trivialgrpc ./internal/lab/bench/trivialgrpc
	$(GO) build -o $(BIN)/grpcload ./internal/lab/bench/grpcload
	VEGETA=$(CACHE)/tools/vegeta CQLSEQ=$(BIN)/cqlseq TRIVIAL=$(BIN)/trivialhttp \
	  TRIVIAL_GRPC=$(BIN)/trivialgrpc GRPCLOAD=$(BIN)/grpcload OUTDIR=$(CACHE)/bench-service \
	  bash scripts/bench-service.sh

# proto regenerates the gRPC API's Go code (idservice/gen: messages and the
# Connect handler and client) from idservice/proto/cqlseq/idservice/v1/
# idservice.proto with buf and local plugins only (idservice/proto/buf.gen.yaml),
# all three go install'd at fixed versions into .cache/tools: offline once the
# Go module cache holds them. The generated code is committed; make test does
# not run this.
BUF_VER ?= v1.75.0
PROTOC_GEN_GO_VER ?= v1.36.12
PROTOC_GEN_CONNECT_GO_VER ?= v1.21.1
# $(CACHE)/tools/buf is buf alone, for the README's gRPC call
# (integration/readme builds it when no buf is on PATH).
$(CACHE)/tools/buf:
	GOBIN=$(CACHE)/tools $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VER)

proto:
	GOBIN=$(CACHE)/tools $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VER)
	GOBIN=$(CACHE)/tools $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VER)
	GOBIN=$(CACHE)/tools $(GO) install connectrpc.com/connect/cmd/protoc-gen-connect-go@$(PROTOC_GEN_CONNECT_GO_VER)
	rm -rf idservice/gen
	cd idservice/proto && PATH=$(CACHE)/tools:$$PATH $(CACHE)/tools/buf generate
	cd idservice/proto && $(CACHE)/tools/buf lint

clean:
	rm -rf $(BIN) $(CACHE)
