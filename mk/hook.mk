# `agentbreaker hook` (issue 16, docs/hooks.md): its tests run with `cargo test -p agentbreaker-cli`
# (make test-cli); its benchmark measures one hook call as an agent sees it, over a 500-tool-call
# session, beside /bin/true and a Python hook that only parses stdin. Writes target/bench/hook.jsonl
# for `make bench`.

BENCH_TARGETS += bench-hook

.PHONY: bench-hook
bench-hook:
	mkdir -p target/bench
	AGENTBREAKER_BENCH_OUT=$(CURDIR)/target/bench/hook.jsonl $(CARGO) bench -p agentbreaker-cli --bench hook
