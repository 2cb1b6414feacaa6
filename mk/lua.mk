# Lua: the `agentbreaker` module for Lua 5.4, LuaJIT and Lua 5.1 (bindings/lua, lua/).
#
#   make lua        builds target/lua/5.4/agentbreaker.so, target/lua/jit/... and target/lua/5.1/...
#   make test-lua   the busted specs (API, seed 004 replay, the conformance suite) under lua5.4,
#                   luajit and lua5.1, the README's one-line check under each, and the mutation
#                   check of the Lua conformance runner
#   make lint-lua   rustfmt, clippy for each interpreter, luacheck, luarocks lint
#   make bench-lua  the module beside pure-Lua peers under lua5.4 and luajit (target/bench/lua.jsonl)
#   make test-lua-panic      the panic boundary, with a test-panic build (target/lua-test-panic)
#   make test-lua-bad-input  the bad-input matrix (docs/bad-input/lua.md) under each interpreter
#
# Use a module: LUA_CPATH="$PWD/target/lua/5.4/?.so;;" lua5.4 -e 'require("agentbreaker")'
#
# One build per interpreter: mlua allows one Lua-version feature per build, and each build writes
# the same file (libagentbreaker_lua.so), so every variant is copied away right after its build.
# Never build two variants in one cargo invocation, never --all-features.

LUA_OUT := $(CURDIR)/target/lua
LUA_CARGO_TARGET := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
LUA_APT := lua5.4 luajit lua5.1 lua-busted lua-dkjson lua-filesystem
LUA_LINT_APT := lua-check luarocks
BUSTED := /usr/bin/busted
LUA_ROCKSPEC := lua/agentbreaker-0.1.0-1.rockspec
# The issue's acceptance one-liner; its last line must be the seed's refusal.
LUA_SMOKE := local cb = require("agentbreaker").CircuitBreaker.new(); for i=1,5 do cb:recordFailure("x") end; print(cb:shouldAllowOperation())
LUA_REFUSAL := false\tCircuit breaker OPEN. 30 seconds remaining in cooldown. 5 consecutive failures detected. Human intervention required.

MUTATE_LUA := LUA_CPATH="$(LUA_OUT)/5.4/?.so;;" $(PYTHON) tools/mutate_scenarios.py \
  --runner "lua5.4 $(BUSTED) -o $(CURDIR)/lua/libtest_output.lua $(CURDIR)/lua/spec/conformance_spec.lua"

TEST_TARGETS += test-lua test-lua-panic
LINT_TARGETS += lint-lua
BENCH_TARGETS += bench-lua
RELIABILITY_TARGETS += test-lua-panic test-lua-bad-input

.PHONY: lua test-lua lint-lua lua-deps mutate-lua bench-lua test-lua-panic test-lua-bad-input

lua-deps:
	$(call apt_install,$(LUA_APT))

# What the modules are built from: a module newer than all of it is up to date. (Switching cargo
# features rebuilds the cdylib each time, so `make lua` only runs cargo when something changed.)
LUA_SOURCES := $(wildcard bindings/lua/src/* crates/agentbreaker/src/*.rs crates/agentbreaker/src/*/*.rs) \
  bindings/lua/Cargo.toml \
  crates/agentbreaker/Cargo.toml Cargo.toml Cargo.lock

# $(call lua_build,<dir>,<cargo feature>)
define lua_build
	$(CARGO) build --release -p agentbreaker-lua --features $(2)
	install -D -m 0755 $(LUA_CARGO_TARGET)/release/libagentbreaker_lua.so $(LUA_OUT)/$(1)/agentbreaker.so
endef

## The three modules.
lua: $(LUA_OUT)/5.4/agentbreaker.so $(LUA_OUT)/jit/agentbreaker.so $(LUA_OUT)/5.1/agentbreaker.so

# One after the other (order-only prerequisites), also under make -j: the builds share one output.
$(LUA_OUT)/5.4/agentbreaker.so: $(LUA_SOURCES)
	$(call lua_build,5.4,lua54)
$(LUA_OUT)/jit/agentbreaker.so: $(LUA_SOURCES) | $(LUA_OUT)/5.4/agentbreaker.so
	$(call lua_build,jit,luajit)
$(LUA_OUT)/5.1/agentbreaker.so: $(LUA_SOURCES) | $(LUA_OUT)/jit/agentbreaker.so
	$(call lua_build,5.1,lua51)

# $(call lua_test,<dir>,<interpreter>): the specs (but the panic boundary's, which needs its own
# build), the README's one-liner, and a smoke run of the benchmark (its peers checked against
# the module, a few iterations of each loop) so that it cannot rot between `make bench` runs.
define lua_test
	cd lua && LUA_CPATH="$(LUA_OUT)/$(1)/?.so;;" $(2) $(BUSTED) --exclude-pattern=panic_spec -o ./libtest_output.lua spec
	LUA_CPATH="$(LUA_OUT)/$(1)/?.so;;" $(2) -e '$(LUA_SMOKE)' | tail -n 1 | grep -qxF "$$(printf '$(LUA_REFUSAL)')"
	@echo "$(2): the README's one-line check prints the seed's refusal"
	LUA_CPATH="$(LUA_OUT)/$(1)/?.so;;" $(2) lua/bench/bench.lua --smoke
endef

## Every Lua test under every interpreter.
test-lua: lua lua-deps
	$(call lua_test,5.4,lua5.4)
	$(call lua_test,jit,luajit)
	$(call lua_test,5.1,lua5.1)
	$(MUTATE_LUA)

## The bad-input matrix alone (it is part of test-lua too): every cell of docs/bad-input/lua.md.
test-lua-bad-input: lua lua-deps
	cd lua && LUA_CPATH="$(LUA_OUT)/5.4/?.so;;" lua5.4 $(BUSTED) -o ./libtest_output.lua spec/bad_input_spec.lua
	cd lua && LUA_CPATH="$(LUA_OUT)/jit/?.so;;" luajit $(BUSTED) -o ./libtest_output.lua spec/bad_input_spec.lua
	cd lua && LUA_CPATH="$(LUA_OUT)/5.1/?.so;;" lua5.1 $(BUSTED) -o ./libtest_output.lua spec/bad_input_spec.lua

# The panic boundary needs a module built with the test-panic feature (the core panics on a
# trigger string). It is built in the dev profile, whose library file no other build writes, so
# a test-panic module can never be copied where the release modules go; one per interpreter.
LUA_PANIC_OUT := $(CURDIR)/target/lua-test-panic

# $(call lua_panic_build,<dir>,<cargo feature>)
define lua_panic_build
	$(CARGO) build -p agentbreaker-lua --features $(2),test-panic
	install -D -m 0755 $(LUA_CARGO_TARGET)/debug/libagentbreaker_lua.so $(LUA_PANIC_OUT)/$(1)/agentbreaker.so
endef

$(LUA_PANIC_OUT)/5.4/agentbreaker.so: $(LUA_SOURCES)
	$(call lua_panic_build,5.4,lua54)
$(LUA_PANIC_OUT)/jit/agentbreaker.so: $(LUA_SOURCES) | $(LUA_PANIC_OUT)/5.4/agentbreaker.so
	$(call lua_panic_build,jit,luajit)

## A panic in the core is an INTERNAL error in Lua, the interpreter goes on and the object works.
## (RUST_BACKTRACE=0: the panics are expected; their messages still go to stderr.)
test-lua-panic: $(LUA_PANIC_OUT)/5.4/agentbreaker.so $(LUA_PANIC_OUT)/jit/agentbreaker.so lua-deps
	cd lua && RUST_BACKTRACE=0 LUA_CPATH="$(LUA_PANIC_OUT)/5.4/?.so;;" lua5.4 $(BUSTED) -o ./libtest_output.lua spec/panic_spec.lua
	cd lua && RUST_BACKTRACE=0 LUA_CPATH="$(LUA_PANIC_OUT)/jit/?.so;;" luajit $(BUSTED) -o ./libtest_output.lua spec/panic_spec.lua

## Benchmarks (make bench): ours beside the seed's pure-Lua CircuitBreaker and pure-Lua peers,
## under lua5.4 and luajit, each written to target/bench/lua.jsonl (about a minute).
bench-lua: lua lua-deps
	mkdir -p target/bench
	rm -f target/bench/lua.jsonl
	LUA_CPATH="$(LUA_OUT)/5.4/?.so;;" lua5.4 lua/bench/bench.lua --out target/bench/lua.jsonl
	LUA_CPATH="$(LUA_OUT)/jit/?.so;;" luajit lua/bench/bench.lua --out target/bench/lua.jsonl

## The Lua conformance runner must fail every scenario whose expected value is changed.
mutate-lua: lua lua-deps
	$(MUTATE_LUA)

lint-lua:
	$(call apt_install,$(LUA_LINT_APT))
	rustfmt --edition 2024 --check bindings/lua/src/*.rs
	$(CARGO) clippy -p agentbreaker-lua --features lua54 -- -D warnings
	$(CARGO) clippy -p agentbreaker-lua --features luajit -- -D warnings
	$(CARGO) clippy -p agentbreaker-lua --features lua51 -- -D warnings
	luacheck --config lua/.luacheckrc bindings/lua/src/agentbreaker.lua lua
	luarocks lint $(LUA_ROCKSPEC)
