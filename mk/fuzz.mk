# Fuzzing (issue 10): cargo-fuzz / libFuzzer targets in fuzz/ (a cargo project of its own, built
# into fuzz/target with cargo-fuzz's instrumentation). docs/reliability.md "## Fuzzing" has the
# targets, the figures of the last long runs and how to reproduce a crash.
#
#   make fuzz-short                  every target for FUZZ_SHORT_SECONDS (25) each; part of
#                                    `make reliability`
#   make fuzz-long FUZZ_SECONDS=600  every target for FUZZ_SECONDS each, one after the other, logs
#                                    and a summary table in target/fuzz-logs/
#   make fuzz-run FUZZ_TARGET=restore FUZZ_SECONDS=60   one target
#   make fuzz-cmin                   fold what the runs found (fuzz/work/) into the committed
#                                    corpus (fuzz/corpus/) and minimize it
#   make test-fuzz-smoke             every target for FUZZ_SMOKE_SECONDS (10) each; part of make test
#   make lint-fuzz                   rustfmt and clippy of fuzz/
#
# Stable Rust only: no sanitizer (`-s none`) needs no nightly flag; FUZZ_SANITIZER=address works
# on stable too (RUSTC_BOOTSTRAP=1 is set for it), at about half the speed. New inputs go to
# fuzz/work/<target> (ignored by git); crashes to fuzz/artifacts/<target>/.

FUZZ_TARGETS := budget_event budget_ops analyzer restore env_config fix_plan fingerprint cli_streams
CARGO_FUZZ_VERSION := 0.13.2
FUZZ_SANITIZER ?= none
FUZZ_SECONDS ?= 600
FUZZ_SHORT_SECONDS ?= 25
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_TARGET ?= restore
FUZZ_LOGS := $(CURDIR)/target/fuzz-logs
FUZZ_RSS_MB := 512
FUZZ_TIMEOUT_SECS := 10
FUZZ_ENV := $(if $(filter none,$(FUZZ_SANITIZER)),,RUSTC_BOOTSTRAP=1)
FUZZ := $(FUZZ_ENV) $(CARGO) fuzz
FUZZ_BUILD_FLAGS := -s $(FUZZ_SANITIZER)
# The longest input per target: enough for several events, a snapshot with history, a stream of
# a few dozen lines (the example streams are cut); the fingerprint's is past the 4096-byte cap on
# error texts.
FUZZ_MAX_LEN_budget_event := 16384
FUZZ_MAX_LEN_budget_ops := 8192
FUZZ_MAX_LEN_analyzer := 8192
FUZZ_MAX_LEN_restore := 16384
FUZZ_MAX_LEN_env_config := 4096
FUZZ_MAX_LEN_fix_plan := 4096
FUZZ_MAX_LEN_fingerprint := 8192
FUZZ_MAX_LEN_cli_streams := 8192

TEST_TARGETS += test-fuzz-smoke
LINT_TARGETS += lint-fuzz
RELIABILITY_TARGETS += fuzz-short

.PHONY: fuzz-deps fuzz-build fuzz-run fuzz-short fuzz-long fuzz-cmin fuzz-summary \
	test-fuzz-smoke lint-fuzz

## cargo-fuzz (into ~/.cargo/bin, when missing) and a C++ compiler (libfuzzer-sys builds libFuzzer).
fuzz-deps:
	$(call apt_install,g++)
	@if ! $(CARGO) fuzz --version 2>/dev/null | grep -q ' $(CARGO_FUZZ_VERSION)$$'; then \
	  echo "installing cargo-fuzz $(CARGO_FUZZ_VERSION)"; \
	  $(CARGO) install cargo-fuzz --locked --version $(CARGO_FUZZ_VERSION); \
	fi

## Every fuzz target, instrumented.
fuzz-build: fuzz-deps
	$(FUZZ) build $(FUZZ_BUILD_FLAGS)

# One target for FUZZ_RUN_SECONDS into FUZZ_LOG, from its committed corpus, new inputs into
# fuzz/work/<target>; fails (pointing at the log and the crash's reproducer) on any finding.
FUZZ_RUN_SECONDS ?= $(FUZZ_SECONDS)
FUZZ_LOG ?= $(FUZZ_LOGS)/$(FUZZ_TARGET).log
.PHONY: fuzz-one
FUZZ_ONE_CMD = $(FUZZ) run $(FUZZ_BUILD_FLAGS) $(FUZZ_TARGET) fuzz/work/$(FUZZ_TARGET) \
  fuzz/corpus/$(FUZZ_TARGET) -- -max_total_time=$(FUZZ_RUN_SECONDS) -rss_limit_mb=$(FUZZ_RSS_MB) \
  -max_len=$(FUZZ_MAX_LEN_$(FUZZ_TARGET)) -timeout=$(FUZZ_TIMEOUT_SECS) -print_final_stats=1 \
  $(if $(wildcard fuzz/dicts/$(FUZZ_TARGET).dict),-dict=fuzz/dicts/$(FUZZ_TARGET).dict)
fuzz-one:
	@mkdir -p fuzz/work/$(FUZZ_TARGET) fuzz/corpus/$(FUZZ_TARGET) $(FUZZ_LOGS)
	@echo "== fuzz $(FUZZ_TARGET) for $(FUZZ_RUN_SECONDS) s: $(strip $(FUZZ_ONE_CMD)) > $(FUZZ_LOG)"
	@$(FUZZ_ONE_CMD) > $(FUZZ_LOG) 2>&1 || { tail -n 60 $(FUZZ_LOG); \
	  echo "FUZZ FINDING in $(FUZZ_TARGET): see $(FUZZ_LOG) and fuzz/artifacts/$(FUZZ_TARGET)/" >&2; \
	  exit 1; }
	@grep -E '^(stat::|Done)' $(FUZZ_LOG) | tr -s ' \n' ' '; echo

# $(call fuzz_each,<seconds>,<log prefix>): every target in turn; all of them run even when one
# fails, and then the whole fails.
define fuzz_each
	failed=""; for t in $(FUZZ_TARGETS); do \
	  $(MAKE) --no-print-directory fuzz-one FUZZ_TARGET=$$t FUZZ_RUN_SECONDS=$(1) \
	    FUZZ_LOG=$(FUZZ_LOGS)/$(2)-$$t.log || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that failed:$$failed" >&2; exit 1; fi
endef

## One target: make fuzz-run FUZZ_TARGET=restore FUZZ_SECONDS=60
fuzz-run: fuzz-build
	$(MAKE) --no-print-directory fuzz-one

## Every target for FUZZ_SHORT_SECONDS each.
fuzz-short: fuzz-build
	$(call fuzz_each,$(FUZZ_SHORT_SECONDS),short)

## Every target for FUZZ_SECONDS each, one at a time; then the summary table.
fuzz-long: fuzz-build
	$(call fuzz_each,$(FUZZ_SECONDS),long)
	$(MAKE) --no-print-directory fuzz-summary

## The table docs/reliability.md records: seconds, executions, corpus, peak RSS per target.
fuzz-summary:
	$(PYTHON) fuzz/summary.py $(FUZZ_LOGS) $(FUZZ_TARGETS)

## What the runs found (fuzz/work/) folded into the committed corpus and minimized (cargo fuzz
## cmin). Edges only (-use_counters=0): hit-count buckets would keep ten times the files, and the
## committed corpus stays under 2 MB; inputs are cut to the target's max_len.
fuzz-cmin: fuzz-build
	mkdir -p $(FUZZ_LOGS)
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p fuzz/work/$$t fuzz/corpus/$$t; \
	  find fuzz/work/$$t -type f -exec cp -n -t fuzz/corpus/$$t {} +; \
	  $(FUZZ) cmin $(FUZZ_BUILD_FLAGS) $$t fuzz/corpus/$$t -- -use_counters=0 \
	    -max_len=$$($(MAKE) --no-print-directory -s fuzz-max-len FUZZ_TARGET=$$t) \
	    -rss_limit_mb=$(FUZZ_RSS_MB) -timeout=$(FUZZ_TIMEOUT_SECS) > $(FUZZ_LOGS)/cmin-$$t.log 2>&1; \
	done
	du -sh fuzz/corpus/*

.PHONY: fuzz-max-len
fuzz-max-len:
	@echo $(FUZZ_MAX_LEN_$(FUZZ_TARGET))

## A few seconds of every target (make test): the targets build, the corpus replays clean.
test-fuzz-smoke: fuzz-build
	$(call fuzz_each,$(FUZZ_SMOKE_SECONDS),smoke)

## rustfmt and clippy (warnings are errors) of the fuzz project.
lint-fuzz:
	$(call apt_install,g++)
	rustfmt --edition 2024 --check fuzz/src/*.rs fuzz/fuzz_targets/*.rs
	$(CARGO) clippy --manifest-path fuzz/Cargo.toml --all-targets -- -D warnings
	$(PYTHON) -m py_compile fuzz/seed_corpus.py fuzz/summary.py
