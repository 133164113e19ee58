# Lockstep — the two commands that matter: `make demo` and `make test`.
# Every target installs what it needs first (scripts/setup.sh is idempotent).

SHELL := /bin/bash
CARGO ?= cargo
TESTS ?=
PROVIDER ?= lockstep

.PHONY: setup build deb demo test lint unit integration mtr mtr-suite compat bench bench-cert failover-bench rejoin-bench catch-up-bench wan-bench soak hot-spots jepsen checker-mutations options-doc fuzz clean

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

# The Debian 12 package (cargo-deb): target/debian/lockstep_*.deb with the
# library in /usr/lib/lockstep/, the lockstep command, the units of the
# health check and the arbitrator, man pages and completions; debug symbols
# in lockstep-dbgsym_*.ddeb. Install: apt-get install ./target/debian/lockstep_*.deb
deb: build
	@scripts/deb.sh

demo: build
	@scripts/demo.sh

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

# Everything CI runs: lint, unit, simulation and property tests, then the
# integration tests that start real mariadbd processes with liblockstep.so.
test: build lint
	$(CARGO) test --release --workspace

# MariaDB's own regression tests with our library, as an unprivileged user:
#   make mtr TESTS="galera.basic wsrep.variables"   [PROVIDER=galera]
mtr: build
	@scripts/mtr.sh $(PROVIDER) $(TESTS)

# A whole suite: make mtr-suite SUITE=wsrep [PROVIDER=galera]
mtr-suite: build
	@scripts/mtr.sh --suite $(SUITE) $(PROVIDER)

# MariaDB's galera, galera_3nodes, galera_sr and wsrep suites in full with
# Galera and with Lockstep, and a side-by-side report in compat-out/report.md
# (about 2 h for both, plus the big-test pass, about 1.5 h more: COMPAT_BIG=0
# skips it; one provider alone: make compat PROVIDERS=lockstep).
compat: build
	@scripts/compat.sh $(PROVIDERS)

# sysbench workloads on a 3-node cluster with Lockstep and with Galera, 2
# rounds in alternating order, with the thread sweep (1, 8, 32, 128 writers)
# and the floor (one MariaDB, wsrep off) (~25 min); report with plots in
# bench-out/<UTC timestamp>/ (docs/bench.md):
#   make bench BENCH_ARGS="--time 60 --workloads oltp_write_only"
# Then the scaling run: the three sysbench workloads on 3, 5 and 7 nodes,
# both providers, in its own report folder with scaling.md (~35 min):
#   make bench SCALING_ARGS="--nodes 3,5 --rounds 1"
BENCH_ARGS ?= --workloads all,sweep --floor
SCALING_ARGS ?= --nodes 3,5,7 --workloads oltp_write_only,oltp_read_write,oltp_update_non_index
bench: build
	target/release/lockstep bench $(BENCH_ARGS)
	target/release/lockstep bench $(SCALING_ARGS)
	@$(MAKE) --no-print-directory bench-cert

# What an application behind HAProxy (every node active, or one writer with
# backups) or keepalived (a virtual IP between network namespaces) sees when
# the writer is killed, cut off, isolated, drained or becomes an SST donor (and
# when another node donates instead),
# Lockstep beside Galera with README's settings: outage, failed statements by
# code, acknowledged writes lost, writes answered by a node not Synced and
# Primary; docs/failover.md with a timeline per fault (~17 min; keepalived
# and the cut need root):
#   make failover-bench FAILOVER_ARGS="--layouts haproxy-writer --faults kill"
FAILOVER_ARGS ?=
failover-bench: build
	target/release/lockstep failover-bench --doc docs/failover.md $(FAILOVER_ARGS)

# How long a node takes to come back on a 1 GB data set: kill -9 then IST,
# the same with a full SST, and Synced after a 60 s cut (~15 min):
#   make rejoin-bench REJOIN_ARGS="--size-mb 1024 --cut-secs 60"
rejoin-bench: build
	$(CARGO) run --release -p lockstep-integration --example rejoin_times -- $(REJOIN_ARGS)

# A joiner's catch-up after its SST (rsync) while node2 writes, Lockstep
# beside Galera in alternating pairs; the nodes must end identical
# (~3 min a run at 512 MB):
#   make catch-up-bench CATCH_UP_ARGS="--size-mb 512 --threads 8 --pairs 2"
catch-up-bench: build
	$(CARGO) run --release -p lockstep-integration --example sst_catch_up -- $(CATCH_UP_ARGS)

# Commit latency and WAN bytes per commit from each of two sites 50 ms
# apart (2 + 1 nodes, gmcast.segment), Lockstep next to Galera; the WAN is
# emulated in user space (scripts/wan-emulator.py; needs root) (~3 min):
#   make wan-bench WAN_ARGS="--delay-ms 25 --commits 200"
wan-bench: build
	$(CARGO) run --release -p lockstep-integration --example wan_latency -- $(WAN_ARGS)

# Memory of every mariadbd under a mixed load with one node slowed to ~15 %
# (SIGSTOP/SIGCONT): RSS every 10 s, growth over the second half (~12 min):
#   make soak SOAK_ARGS="--minutes 10 [--galera 1]"
soak: build
	$(CARGO) run --release -p lockstep-integration --example memory_soak -- $(SOAK_ARGS)

# Jepsen-style histories under faults (issue 33): every nemesis (kill,
# whole-cluster crash with plain and systemd restarts, pauses, partitions,
# and their combinations) with innodb_flush_log_at_trx_commit 0/1/2, on
# Lockstep and on Galera the same way; checked by lockstep-history, written
# to docs/jepsen.md with the history of every run that found something
# (docs/jepsen/) (~25 min):
#   make jepsen JEPSEN_ARGS="--providers lockstep --nemeses crash-all-plain --repeat 3"
JEPSEN_ARGS ?=
jepsen: build
	$(CARGO) run --release -p lockstep-jepsen -- --doc docs/jepsen.md --out jepsen-out $(JEPSEN_ARGS)

# Each anomaly kind removed from the checker in turn must fail one of its
# crafted-history tests (the tests are not blind) (~3 min).
checker-mutations: setup
	@scripts/checker-mutations.sh

# Certification alone (criterion): writesets of 1, 10 and 10 000 keys, in
# keys/s ("thrpt"); HTML report in target/criterion/.
bench-cert: setup
	$(CARGO) bench -p lockstep-core --bench certification

# The issue's full hot-spot run: 12 sysbench threads over 3 nodes on a
# 100-row table for 60 s (make test runs the same for 20 s).
hot-spots: build
	LOCKSTEP_HOT_SPOT_SECONDS=60 $(CARGO) test --release -p lockstep-integration \
		--test hot_spots hot_rows -- --nocapture

# Coverage-guided fuzzing of every decoder of untrusted input (libFuzzer
# through cargo-fuzz, which needs a nightly toolchain; `make test` runs the
# same bodies on seeded inputs on stable): make fuzz [FUZZ_SECONDS=30]
FUZZ_SECONDS ?= 30
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd fuzz && for t in $$($(CARGO) +nightly fuzz list); do \
		echo "== $$t"; \
		$(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

# README.md's list of honoured / no-effect provider options, regenerated
# from the option table (a unit test fails when the two differ).
options-doc:
	LOCKSTEP_BLESS=1 $(CARGO) test --release -p lockstep-core readme_lists_the_honoured

clean:
	$(CARGO) clean
