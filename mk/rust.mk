# Benchmarks of the Rust core (issue 9): criterion, with recloser and failsafe measured in the
# same run, and the memory of idle breakers. Writes target/bench/rust.jsonl for `make bench`.

BENCH_TARGETS += bench-rust

.PHONY: bench-rust
bench-rust:
	mkdir -p target/bench
	rm -rf target/criterion
	$(CARGO) bench -p agentbreaker --bench breakers
	$(PYTHON) tools/criterion_jsonl.py --goals crates/agentbreaker/benches/goals.json target/bench/rust.jsonl
	AGENTBREAKER_BENCH_OUT=$(CURDIR)/target/bench/rust.jsonl $(CARGO) bench -p agentbreaker --bench memory
