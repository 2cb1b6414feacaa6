# Node: the `agentbreaker` npm package (node/) over the napi-rs addon (bindings/node).
#
#   make node        npm ci (when the lock file changed) and `napi build --release`: writes
#                    node/agentbreaker.<platform>.node and regenerates node/index.js, node/index.d.ts
#   make test-node   the build; a check that the committed index.js/index.d.ts are exactly what the
#                    build generates; the node:test suites (the
#                    conformance runner, one test per scenario, and the API tests); the TypeScript
#                    check of test/types/usage.ts against index.d.ts; the README's one-line check;
#                    the mutation check of the Node conformance runner; test-node-integrations
#   make test-node-integrations  the framework adapters (issue 18: agentbreaker/ai,
#                    /openai-agents, /langchain, /claude-agent-sdk, /otel) on the real frameworks of
#                    the lock file with their own test doubles, no network, no key
#                    (test/integrations/*.test.js, which also run node/examples/), and the
#                    `tsc --strict` check of every subpath against the frameworks' types
#                    (test/types-integrations)
#   make lint-node   rustfmt and clippy of the binding, `node --check` of the JavaScript
#   make test-node-panic      the panic boundary (issue 10a): the addon built with the core's
#                    test-panic feature (a debug build into <target dir>/node-test-panic, never into
#                    node/), loaded through the package by NAPI_RS_NATIVE_LIBRARY_PATH, and
#                    test/panic.js against it (in `make test` and `make reliability`)
#   make test-node-bad-input  the bad-input matrix (issue 10b, docs/bad-input/node.md): every cell
#                    of test/bad_input.test.js (also part of test-node; in `make reliability`)
#   make bench-node  the benchmark beside opossum and a pure-JS breaker (release build), written
#                    to target/bench/node.jsonl (`make bench`; test-node runs its --smoke mode)
#
# The napi CLI builds with --target <host>, into <target dir>/<host triple>/release, so the addon
# never collides with the plain `cargo build` of the workspace (bindings/node is not a default
# member). CARGO_TARGET_DIR is honoured.

NODE_MODULES_STAMP := node/node_modules/.package-lock.json
NODE_GENERATED := node/index.js node/index.d.ts
NODE_SMOKE := const ab = require('./node'); console.log(new ab.FailureBreaker().getStatus().state)

NODE_PANIC_DIR := $(abspath $(or $(CARGO_TARGET_DIR),target)/node-test-panic)

TEST_TARGETS += test-node test-node-panic
LINT_TARGETS += lint-node
BENCH_TARGETS += bench-node
RELIABILITY_TARGETS += test-node-panic test-node-bad-input

.PHONY: node test-node lint-node mutate-node node-test-panic test-node-panic test-node-bad-input \
  bench-node test-node-integrations

# npm ci only when package.json or the lock file changed; under CI from an empty, throw-away cache
# (NPM_CACHE), after checking that every lock entry has a version and a source (an entry without
# one installs only from a warm cache). The lock file is written from an empty cache:
#   rm package-lock.json && npm install --package-lock-only --ignore-scripts --cache "$(mktemp -d)"
# (that command also rewrites node_modules/.package-lock.json, this rule's stamp: `touch` the lock
# afterwards so that the next make installs it).
# --ignore-scripts: the build is the next, explicit step. Optional dependencies are installed: the
# Claude Agent SDK's per-platform `claude` binary (about 400 MB; the tests never run it, they spawn
# test/support/fake-claude.mjs) comes with them, but --omit=optional would also leave out
# @modelcontextprotocol/client, which @openai/agents-core 0.20 declares optional and loads always.
$(NODE_MODULES_STAMP): node/package.json node/package-lock.json
	$(PYTHON) tools/check_npm_lock.py node/package-lock.json
	cd node && npm ci --ignore-scripts --no-audit --no-fund $(NPM_CACHE)
	touch $@

## The addon, and node/index.js + node/index.d.ts regenerated.
node: $(NODE_MODULES_STAMP)
	cd node && npm run --silent build

## Every Node test (CI fails when the build changes the committed index.js/index.d.ts).
test-node: $(NODE_MODULES_STAMP)
	@saved=$$(mktemp -d) && cp $(NODE_GENERATED) $$saved/ && \
	$(MAKE) --no-print-directory node && \
	for f in index.js index.d.ts; do \
	  diff -u $$saved/$$f node/$$f || { echo "node/$$f differs from what napi build generates: commit the regenerated file"; exit 1; }; \
	done && rm -rf $$saved
	cd node && node --test --test-reporter=spec test/*.test.js
	cd node && npx --no-install tsc --noEmit --strict -p test/types
	test "$$(node -e "$(NODE_SMOKE)")" = CLOSED
	@echo "node: the README's one-line check prints CLOSED"
	cd node && node bench/bench.js --smoke
	$(MAKE) --no-print-directory mutate-node
	$(MAKE) --no-print-directory test-node-integrations

## The framework adapters on the real frameworks (node/test/integrations, node/examples) and the
## TypeScript check of every subpath against the frameworks' own types.
test-node-integrations: node
	cd node && node --test --test-reporter=spec test/integrations/*.test.js
	cd node && npx --no-install tsc --noEmit --strict -p test/types-integrations

## The addon with the core's test-panic feature, in its own directory (node/ stays panic-free).
node-test-panic: $(NODE_MODULES_STAMP)
	cd node && npx --no-install napi build --platform --no-js --features test-panic \
	  --manifest-path ../bindings/node/Cargo.toml --output-dir $(NODE_PANIC_DIR)

## A panic inside the core is an INTERNAL error; the process and the object survive it.
test-node-panic: node-test-panic
	cd node && NAPI_RS_NATIVE_LIBRARY_PATH=$$(ls $(NODE_PANIC_DIR)/agentbreaker.*.node) \
	  node --test --test-reporter=spec test/panic.js

## Every cell of the bad-input matrix (docs/bad-input/node.md is generated from the same table).
test-node-bad-input: node
	cd node && node --test --test-reporter=dot test/bad_input.test.js

## The benchmark (release build): target/bench/node.jsonl.
bench-node: node
	cd node && node bench/bench.js --out $(CURDIR)/target/bench/node.jsonl

## The Node conformance runner must fail every scenario whose expected value is changed.
mutate-node: $(NODE_MODULES_STAMP)
	$(PYTHON) tools/mutate_scenarios.py --runner "node --test \
	  --test-reporter=$(CURDIR)/node/test/support/libtest-reporter.mjs $(CURDIR)/node/test/conformance.test.js"

lint-node:
	rustfmt --edition 2024 --check bindings/node/src/*.rs bindings/node/build.rs
	$(CARGO) clippy -p agentbreaker-node --all-targets -- -D warnings
	node --check node/agentbreaker.js
	node --check node/scripts/install.js
	for f in node/test/*.js node/test/support/*.mjs node/bench/*.js; do node --check $$f; done
	for f in node/integrations/*.js node/examples/*.js node/test/integrations/*.js node/test/support/*.js; do \
	  node --check $$f; done
