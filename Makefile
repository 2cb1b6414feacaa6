# The one entry point. `make test` runs everything CI runs; `make test-<surface>` runs one surface.
# Every target installs what it needs on a fresh machine (Rust comes with the machine).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
export AGENTBREAKER_CONFORMANCE_DIR ?= $(CURDIR)/tests/conformance

# Under CI (the variable `CI` set, as `make test-fresh` and CI runners do) every install proves
# itself from empty caches: pip keeps no cache and each `npm ci` gets a new, throw-away one, so a
# lock file or requirement that only a warm machine can satisfy fails here first (docs/toolchain.md).
PIP_NO_CACHE := $(if $(CI),--no-cache-dir)
NPM_CACHE = $(if $(CI),--cache "$$(mktemp -d)")

# Each language surface adds its own targets in mk/<surface>.mk and appends them to these lists
# (TEST_TARGETS += test-python, LINT_TARGETS += lint-python), so `make test` runs every surface
# that exists.
TEST_TARGETS := test-rust test-conformance-suite
LINT_TARGETS := lint-rust
# Benchmarks: each surface writes target/bench/<surface>.jsonl; `make bench` prints one table.
BENCH_TARGETS :=
# The short form of the reliability checks (fuzz runs, the kill test, concurrency, bad input).
RELIABILITY_TARGETS :=

.PHONY: all test lint lint-rust test-rust test-conformance-suite demo clean test-fresh

all: test

-include mk/*.mk

## The README's test command: every check, every surface that exists.
test: lint $(TEST_TARGETS)

## Formatting and lints, warnings are errors.
lint: $(LINT_TARGETS)

lint-rust:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --all-targets -- -D warnings

## The core: unit, property, concurrency, hostile-input and doc tests, and the conformance runner
## (one named test per scenario in $(AGENTBREAKER_CONFORMANCE_DIR)).
test-rust:
	$(CARGO) test -p agentbreaker
	$(CARGO) test -p agentbreaker --features test-panic --test test_panic

## The suite itself: well-formed and duplicate-free (schema + checker, with the checker's own
## tests), and every expected value checked (mutating any one makes the Rust runner fail).
test-conformance-suite: $(VPY)
	$(VPY) -m pytest -q tools/test_check_scenarios.py tools/test_check_npm_lock.py
	$(VPY) tools/check_scenarios.py
	$(VPY) tools/mutate_scenarios.py

$(VPY): tools/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q $(PIP_NO_CACHE) -r tools/requirements.txt
	touch $(VPY)

## CI on a fresh machine, repeatable here: a fresh clone of HEAD run by .ci/run with new, empty
## HOME and CARGO_HOME folders, so nothing comes from ~/.cargo, ~/.npm, ~/.cache or an earlier
## build; only the installed Rust toolchain (RUSTUP_HOME and rustup's proxies) is reused. The clone
## and its log stay in FRESH_DIR (default: a new temporary folder). Commit first: it tests HEAD.
## FRESH_COMMAND runs something else the same way: make test-fresh FRESH_COMMAND="make bench".
FRESH_DIR ?=
FRESH_COMMAND ?= bash .ci/run
test-fresh:
	@command -v rustup >/dev/null || { echo "test-fresh needs rustup on PATH"; exit 1; }
	dir=$${FRESH_DIR:-$$(mktemp -d /tmp/agentbreaker-fresh.XXXXXX)}; \
	rustup_home=$$(rustup show home); rustup_bin=$$(dirname "$$(command -v rustup)"); \
	git clone -q --no-hardlinks $(CURDIR) $$dir/repo && mkdir -p $$dir/home $$dir/cargo && \
	echo "== fresh clone of $$(git rev-parse --short HEAD) in $$dir/repo; log: $$dir/ci.log" && \
	cd $$dir/repo && start=$$(date +%s) && \
	env -i HOME=$$dir/home CARGO_HOME=$$dir/cargo RUSTUP_HOME=$$rustup_home \
	  PATH=$$dir/cargo/bin:$$rustup_bin:/usr/bin:/bin CI=true LANG=C.UTF-8 \
	  $(FRESH_COMMAND) > $$dir/ci.log 2>&1 && rc=0 || rc=$$?; \
	echo "== $(FRESH_COMMAND) exited $$rc after $$(( $$(date +%s) - start )) s"; \
	tail -n 5 $$dir/ci.log; exit $$rc

## The seeds' worked examples, replayed through the library's Rust API.
demo:
	$(CARGO) run -q -p agentbreaker --example replay

clean:
	$(CARGO) clean
	rm -rf $(VENV)

## Benchmarks of every surface beside their peers, measured in one run, printed as one table
## (docs/benchmarks.md records the latest: `make bench BENCH_DOC=docs/benchmarks.md`).
.PHONY: bench
bench:
	rm -rf target/bench && mkdir -p target/bench
	$(if $(strip $(BENCH_TARGETS)),$(MAKE) $(BENCH_TARGETS),@echo "no benchmarks registered")
	$(PYTHON) tools/bench_table.py $(if $(BENCH_DOC),--markdown $(BENCH_DOC))

## The short form of every reliability check (a few minutes): short fuzz runs, the SIGKILL test,
## concurrency under a race detector, the bad-input and panic-boundary tests of every surface.
.PHONY: reliability
reliability:
	$(if $(strip $(RELIABILITY_TARGETS)),$(MAKE) $(RELIABILITY_TARGETS),@echo "no reliability checks registered")
