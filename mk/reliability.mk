# Reliability checks of the Rust core (issue 10), the long forms of the tests that `make test`
# runs short (docs/reliability.md, "Core tests"):
#
#   make reliability-rust        200 SIGKILLs of a state-file writer, thousands of model-based
#                                cases, 20 000 operations per thread in the concurrency tests, and
#                                a million inputs per breaker under a counting allocator (release
#                                build, so it takes seconds)
#   make reliability-rust-race   the concurrency tests under valgrind's helgrind and DRD; logs in
#                                target/reliability/ (see docs/reliability.md for what they can and
#                                cannot tell about Rust code)
#
# Sizes can be changed on the command line, e.g. `make reliability-rust KILLS=1000`.

RELIABILITY_TARGETS += reliability-rust reliability-rust-race

RELIABILITY_OUT := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/reliability
KILLS ?= 200
MODEL_CASES ?= 4000
SLOW_MODEL_CASES ?= 500
CONCURRENCY_ROUNDS ?= 20000
BOUNDED_EVENTS ?= 1000000
RACE_ROUNDS ?= 500
RACE_SUPPRESSIONS := crates/agentbreaker/tests/concurrency_valgrind.supp

.PHONY: reliability-rust reliability-rust-race

## Core: the long forms of the crash, model, concurrency and bounded-memory tests.
reliability-rust:
	@echo "== SIGKILL during saves: $(KILLS) kills"
	AGENTBREAKER_KILLS=$(KILLS) $(CARGO) test -p agentbreaker --test crash_safety -- --nocapture
	@echo "== model-based tests: $(MODEL_CASES) cases (the file-writing ones $(SLOW_MODEL_CASES))"
	PROPTEST_CASES=$(MODEL_CASES) $(CARGO) test -p agentbreaker --test model_failure_permits \
	  --test model_budget
	PROPTEST_CASES=$(SLOW_MODEL_CASES) $(CARGO) test -p agentbreaker --test model \
	  --test model_stagnation_counts --test model_restore --test persistence --test model_monitor
	@echo "== concurrency: $(CONCURRENCY_ROUNDS) operations per thread"
	AGENTBREAKER_CONCURRENCY_ROUNDS=$(CONCURRENCY_ROUNDS) $(CARGO) test -p agentbreaker \
	  --test concurrency_cycles --test concurrency -- --nocapture
	@echo "== bounded memory: $(BOUNDED_EVENTS) inputs per breaker (release build)"
	AGENTBREAKER_BOUNDED_EVENTS=$(BOUNDED_EVENTS) $(CARGO) test --release -p agentbreaker \
	  --test bounded_resources -- --nocapture --test-threads=1

## Core: the concurrency tests under helgrind and DRD (valgrind serialises the threads, so this is
## also a run under a very different schedule). Fails when a test fails or hangs under either tool.
## The race reports are written to target/reliability/{helgrind,drd}.log and counted; they are not
## a verdict (docs/reliability.md explains why).
reliability-rust-race:
	$(call apt_install,valgrind)
	mkdir -p $(RELIABILITY_OUT)
	bin=$$($(CARGO) test -q -p agentbreaker --test concurrency_cycles --no-run --message-format=json \
	  | $(PYTHON) -c 'import json, sys; print(next(m["executable"] for m in map(json.loads, sys.stdin) if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "concurrency_cycles" and m.get("executable")))'); \
	for tool in helgrind drd; do \
	  echo "== concurrency_cycles under valgrind --tool=$$tool ($(RACE_ROUNDS) operations per thread)"; \
	  AGENTBREAKER_CONCURRENCY_ROUNDS=$(RACE_ROUNDS) valgrind --tool=$$tool --fair-sched=yes \
	    --suppressions=$(RACE_SUPPRESSIONS) --log-file=$(RELIABILITY_OUT)/$$tool.log \
	    $$bin --test-threads=1; \
	  reports=$$(grep -c -E 'Possible data race|Conflicting (load|store)' $(RELIABILITY_OUT)/$$tool.log || true); \
	  in_core=$$(awk '/Possible data race|Conflicting (load|store)/ { n = 4; hit = 0; next } \
	    n > 0 { n--; if (!hit && $$0 ~ /(at|by) 0x[0-9A-F]+: agentbreaker::/) { c++; hit = 1 } } \
	    END { print c + 0 }' $(RELIABILITY_OUT)/$$tool.log); \
	  echo "$$tool: $$reports race reports, $$in_core of them at an access in agentbreaker's own code;" \
	    "log: $(RELIABILITY_OUT)/$$tool.log"; \
	done
	@echo "Valgrind cannot see the futex-based locks of Rust's std (Mutex, RwLock, Once, atomics):"
	@echo "accesses made under a std::sync::Mutex are reported as races. See docs/reliability.md."
