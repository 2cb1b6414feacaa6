# The agentbreaker command (crates/agentbreaker-cli): unit tests and end-to-end tests that drive
# `run`, `loop`, `replay` and `config` with small fake agents. Lint is part of lint-rust (the CLI
# is a default workspace member).
TEST_TARGETS += test-cli

.PHONY: test-cli
test-cli:
	$(CARGO) test -p agentbreaker-cli
